import { describe, expect, it } from 'vitest';
import { activityEvent as event, EMAIL, serverWithAccount, SHOP, type AccountAdmin } from '../../test/activities.ts';
import type { TestServer } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { accountScope } from '../services.ts';
import { checkCounters } from './activities.ts';

// Ingestion under concurrency (docs/activities.md "Ingestion", "Storage"): batches that arrive at
// once and share events and profiles are recorded once each and counted right, and a deleted
// profile takes its activity events with it.

const MANIFEST: Manifest = { sections: [{ name: 'Shop' }] };

let server: TestServer;
let accountId: string;
let token: string;
let admin: AccountAdmin;
serverWithAccount(MANIFEST, (a) => {
  ({ server, accountId, token, admin } = a);
});

describe('concurrent ingestion', () => {
  it("ACT-05: batches sent at once, repeating each other's events and profiles in opposite orders, record each event once and count a recount", async () => {
    for (const id of ['conc-a', 'conc-b']) {
      expect(
        (
          await admin('PUT', `/activities/${id}`, {
            kind: 'email',
            section_discriminator: SHOP,
            name: id,
            status: 'sent',
          })
        ).status,
      ).toBe(201);
    }
    const types = ['SENT', 'DELIVERED', 'OPENED', 'CLICKED'];
    // Every batch holds the same 160 events (40 profiles, some new to the account) in its own order.
    const events = ['conc-a', 'conc-b'].flatMap((activity) =>
      types.flatMap((type) =>
        Array.from({ length: 20 }, (_, i) => event(activity, type, `c${(i * 7) % 40}@example.com`, `${type}-${i}`)),
      ),
    );
    const rotated = <T>(list: T[], k: number) => [...list.slice(k), ...list.slice(0, k)];
    const batches = Array.from({ length: 6 }, (_, b) => rotated(b % 2 === 1 ? [...events].reverse() : events, b * 27));
    const answers = await Promise.all(batches.map((items) => admin('POST', '/activity-events', items)));
    for (const a of answers) expect(a.status, a.text).toBe(200);
    expect(answers.reduce((sum, a) => sum + a.body.recorded, 0)).toBe(events.length);
    expect(answers.reduce((sum, a) => sum + a.body.duplicates, 0)).toBe(events.length * 5);

    const scope = await accountScope(server.services, accountId);
    for (const activity of ['conc-a', 'conc-b']) {
      const { kept, recounted } = await checkCounters(server.services.pool, scope, activity);
      expect(kept).toEqual(recounted);
      for (const type of types)
        expect(kept.find((r) => r.type === type)).toMatchObject({ events: '20', profiles: '20' });
    }
  }, 60_000);
});

describe('profiles deleted', () => {
  it('PROF-14: deleting a profile deletes its activity events; the counters keep what they counted', async () => {
    expect(
      (
        await admin('PUT', '/activities/gone', {
          kind: 'email',
          section_discriminator: SHOP,
          name: 'gone',
          status: 'sent',
        })
      ).status,
    ).toBe(201);
    const recorded = await admin('POST', '/activity-events', [
      event('gone', 'SENT', 'stay@example.com', 's1'),
      event('gone', 'SENT', 'leave@example.com', 's2'),
    ]);
    expect(recorded.body.recorded).toBe(2);
    const deleted = await server.request(
      'DELETE',
      `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent('leave@example.com')}`,
      { token },
    );
    expect(deleted.status, deleted.text).toBe(204);

    const scope = await accountScope(server.services, accountId);
    const { kept, recounted } = await checkCounters(server.services.pool, scope, 'gone');
    expect(recounted).toMatchObject([{ type: 'SENT', events: '1', profiles: '1' }]);
    expect(kept).toMatchObject([{ type: 'SENT', events: '2', profiles: '2' }]);
  }, 60_000);
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, TestServer, type Response } from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { activitiesFollowProfiles } from '../src/activities/events.ts';
import { deleteProfile } from '../src/profiles/profiles.ts';
import { accountScope } from '../src/services.ts';

// Every writer of profile events against a delete of the profile running at the same time
// (migration 0017: profile_events and activity_events have no foreign key to profiles; writers
// lock the profiles they write to). The delete is held open in a transaction of its own while the
// write arrives; the write waits for it, and once it commits, no event of the deleted profile is
// left behind.

const NS = 'com.vendor1';
const EMAIL = `${NS}.keyspaces.email`;
const SHOP = `${NS}.sections.user-created.shop`;
const PAGE_VIEW = `${NS}.events.page-view`;
const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      events: [
        { name: 'Page view', discriminator: PAGE_VIEW, versions: [{ type: [{ name: 'title', type: 'Text' }] }] },
      ],
    },
  ],
};

let server: TestServer;
let accountId: string;
let token: string;

beforeAll(async () => {
  server = await TestServer.start();
  const login = await server.login(MANIFEST);
  accountId = login.accountId;
  token = login.token;
});
afterAll(async () => server?.close());

const profilePath = (key: string) => `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}`;

async function createProfile(key: string): Promise<void> {
  const created = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, {
    token,
    body: { profile_key: key },
  });
  expect(created.status, created.text).toBe(201);
}

/**
 * Deletes the profile of `key` in a transaction held open while `write` is sent, until the write
 * waits for the delete's locks; then commits the delete and answers the write's response.
 */
async function deleteDuring(key: string, write: () => Promise<Response>): Promise<Response> {
  const scope = await accountScope(server.services, accountId);
  const deleter = await server.services.pool.connect();
  try {
    await deleter.query('begin');
    await deleteProfile(deleter, scope, { keyspace_discriminator: EMAIL, profile_key: key }, activitiesFollowProfiles);
    // On a Citus cluster the write waits on a worker: its lock waits are citus_lock_waits', by global pid.
    const {
      rows: [{ citus }],
    } = await deleter.query<{ citus: boolean }>("select to_regclass('citus_lock_waits') is not null as citus");
    const deleterPid = (
      await deleter.query<{ pid: string }>(`select ${citus ? 'citus_backend_gpid()' : 'pg_backend_pid()'}::text as pid`)
    ).rows[0].pid;
    const waits = citus
      ? 'select 1 from citus_lock_waits where blocking_gpid = $1::bigint'
      : 'select 1 from pg_stat_activity where $1::int = any(pg_blocking_pids(pid))';
    const answer = write();
    // Until a connection waits for the delete (the write's lock of the profile).
    for (let polls = 0; ; polls++) {
      const { rows } = await server.services.pool.query(waits, [deleterPid]);
      if (rows.length > 0) break;
      if (polls > 2000)
        throw new Error(
          `the write never waited for the delete: it did not lock the profile (${JSON.stringify(await Promise.race([answer, 'pending']))})`,
        );
      await new Promise((resolve) => setImmediate(resolve));
    }
    await deleter.query('commit');
    return await answer;
  } finally {
    // After a failure the delete is undone, and the connection goes back clean.
    await deleter.query('rollback').catch(() => {});
    deleter.release();
  }
}

/** Events of the account, profile and activity events, whose profile no longer exists. */
async function orphans(): Promise<number> {
  const { rows } = await server.services.pool.query<{ n: number }>(
    `select (select count(*) from profile_events e where e.account_id = $1::bigint and not exists (select 1 from profiles p where p.account_id = $1::bigint and p.profile_id = e.profile_id))
      + (select count(*) from activity_events e where e.account_id = $1::bigint and not exists (select 1 from profiles p where p.account_id = $1::bigint and p.profile_id = e.profile_id)) as n`,
    [accountId],
  );
  return Number(rows[0].n);
}

describe('a profile deleted while events are written to it', () => {
  it("PROF-14: the ingestion of activity events waits for the delete, then skips the deleted profile's events and records the others", async () => {
    const put = await server.admin('PUT', `/admin/accounts/${accountId}/activities/deleted-during`, {
      kind: 'email',
      section_discriminator: SHOP,
      name: 'Deleted during',
      status: 'sent',
    });
    expect(put.status, put.text).toBe(201);
    await createProfile('going@example.com');
    await createProfile('staying@example.com');
    const event = (key: string, correlation: string) => ({
      activity_id: 'deleted-during',
      type: 'SENT',
      keyspace_discriminator: EMAIL,
      profile_key: key,
      correlation_id: correlation,
    });

    const answer = await deleteDuring('going@example.com', () =>
      server.admin('POST', `/admin/accounts/${accountId}/activity-events`, [
        event('going@example.com', 'd1'),
        event('staying@example.com', 'd2'),
      ]),
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({ received: 2, recorded: 1, duplicates: 0, skipped: [{ item: 0 }] });
    expect(answer.body.skipped[0].reason).toMatch(/deleted/);
    expect(await orphans()).toBe(0);
    const kept = await server.request('GET', `${profilePath('staying@example.com')}/sections/${SHOP}/events`, {
      token,
    });
    expect(kept.body.items).toHaveLength(1);
  }, 60_000);

  it('PROF-14: POST …/events waits for the delete, then answers 404 and writes nothing', async () => {
    await createProfile('leaving@example.com');
    const sectionEvents = (await server.request('GET', `/audience/sections/${SHOP}/events`, { token })).body.items;
    const versionId = sectionEvents.find((e: { discriminator: string }) => e.discriminator === PAGE_VIEW).versions[0]
      .id;
    const body = { items: [{ event_time: '2026-01-02T03:04:05Z', version_id: versionId, data: { title: 'Home' } }] };

    const answer = await deleteDuring('leaving@example.com', () =>
      server.request('POST', `${profilePath('leaving@example.com')}/sections/${SHOP}/events`, { token, body }),
    );
    expectProblem(answer, 404, 'AUD-1201');
    expect(await orphans()).toBe(0);
  }, 60_000);

  it('PROF-14: events recorded before a delete go with the profile', async () => {
    await createProfile('later@example.com');
    const recorded = await server.admin('POST', `/admin/accounts/${accountId}/activity-events`, [
      {
        activity_id: 'deleted-during',
        type: 'DELIVERED',
        keyspace_discriminator: EMAIL,
        profile_key: 'later@example.com',
        correlation_id: 'l1',
      },
    ]);
    expect(recorded.body.recorded).toBe(1);
    const deleted = await server.request('DELETE', profilePath('later@example.com'), { token });
    expect(deleted.status, deleted.text).toBe(204);
    expect(await orphans()).toBe(0);
  }, 60_000);
});

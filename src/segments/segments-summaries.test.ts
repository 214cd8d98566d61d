import { describe, expect, it } from 'vitest';
import {
  DAY,
  EMAIL,
  SEC,
  WEB,
  account,
  db,
  expectNoContent,
  seg,
  segmentsServer,
  server,
} from '../../test/segments-http.ts';

/**
 * Counts answer event terms from the per-profile sums of events (profile_event_summaries, migration
 * 0021) that the writes keep: through every write of events and every delete, the sums are the
 * sums of the events, and counts whose windows lie before, after and strictly between a profile's
 * events agree with the events (AQL-11).
 */

segmentsServer();

/** The account's sums as kept, and as computed from its events: the two must be equal. */
async function sums(accountId: string): Promise<{ kept: unknown[]; computed: unknown[] }> {
  const order = 'order by profile_id, section_id, version_id';
  const kept = await db.query(
    `select profile_id::text, section_id::text, version_id::text, event_count::int, first_time, last_time
     from profile_event_summaries where account_id = $1::bigint ${order}`,
    [accountId],
  );
  const computed = await db.query(
    `select profile_id::text, section_id::text, version_id::text, count(*)::int as event_count, min(event_time) as first_time, max(event_time) as last_time
     from profile_events where account_id = $1::bigint group by profile_id, section_id, version_id ${order}`,
    [accountId],
  );
  return { kept: kept.rows, computed: computed.rows };
}

async function expectSumsOfEvents(accountId: string, rows: number): Promise<void> {
  const { kept, computed } = await sums(accountId);
  expect(kept).toEqual(computed);
  expect(kept).toHaveLength(rows);
}

describe('counts of event terms from the sums of events', () => {
  it('AQL-11: sums kept by event writes, merges, unmerges and profile deletes agree with the events and the counts', async () => {
    const a = await account();
    const now = server.clock.now;
    const buyers = { segment_discriminator: seg('buyers') };
    const recent = { segment_discriminator: seg('recent-buyers') }; // the last 7 days
    const lapsed = { segment_discriminator: seg('lapsed-buyers') }; // 7 to 30 days ago
    // Events before and after the lapsed window, none inside: its sums span the window.
    await a.create(EMAIL, 'around@x.io');
    await a.buy(EMAIL, 'around@x.io', now - 40 * DAY);
    await a.buy(EMAIL, 'around@x.io', now - DAY);
    // Events before, inside and after the window, written in one request.
    await a.create(EMAIL, 'inside@x.io');
    const r = await a.call('POST', `/audience/keyspaces/${EMAIL}/profiles/inside@x.io/sections/${SEC}/events`, {
      body: {
        items: [now - 40 * DAY, now - 20 * DAY, now - DAY].map((t) => ({
          event_time: new Date(t).toISOString(),
          version_id: a.purchaseVersion,
          data: { sku: 'A', amount: 1 },
        })),
      },
    });
    expectNoContent(r);
    // A web visitor who bought inside the window only.
    await a.create(WEB, 'cookie');
    await a.buy(WEB, 'cookie', now - 10 * DAY);
    await a.create(EMAIL, 'none@x.io');
    await expectSumsOfEvents(a.accountId, 3);
    expect(await a.counted(buyers)).toBe(3);
    expect(await a.counted(recent)).toBe(2);
    expect(await a.counted(lapsed)).toBe(2);

    // Merged into the profile whose events span the window, the visitor's event makes the cluster lapsed.
    await a.merge([EMAIL, 'around@x.io'], [WEB, 'cookie']);
    await expectSumsOfEvents(a.accountId, 3);
    expect(await a.counted(buyers)).toBe(2);
    expect(await a.counted(lapsed)).toBe(2);
    // Apart again, each profile has its own events.
    expectNoContent(await a.call('DELETE', `/audience/profiles/merges/keyspaces/${WEB}/profiles/cookie`));
    expect(await a.counted(buyers)).toBe(3);
    expect(await a.counted(lapsed)).toBe(2);
    expect(await a.counted(recent)).toBe(2);

    // A later event moves the sums: the last time and the count.
    await a.buy(EMAIL, 'around@x.io', now - 15 * DAY);
    await expectSumsOfEvents(a.accountId, 3);
    expect(await a.counted(lapsed)).toBe(3);

    // A deleted profile takes its events and their sums with it.
    expectNoContent(await a.call('DELETE', `/audience/keyspaces/${EMAIL}/profiles/inside@x.io`));
    await expectSumsOfEvents(a.accountId, 2);
    expect(await a.counted(buyers)).toBe(2);
    expect(await a.counted(recent)).toBe(1);
  });
});

/**
 * Live segments (docs/aql.md "Live segments"): a segment's membership, kept by the writes and by
 * time through the live segments job, equals the on-demand evaluation after the jobs are drained,
 * under random interleavings of attribute, tag, consent and event writes, merges, unmerges,
 * deletes and clock moves; its count and trend are read from the membership; each entry and exit
 * reaches a subscribed receiver on loopback, signed; a key restricted to some sections sees only
 * what they allow. The worker runs jobs only when a test drains them (runDue), due by the test's
 * clock.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectProblem, SHOP } from '../../test/app.ts';
import { type CallbackReceiver, receiverForTests } from '../../test/callbacks.ts';
import { builtIn, userCreated } from '../../test/names.ts';
import {
  account as newAccount,
  apply as applyWrite,
  call,
  db,
  enc,
  EMAIL,
  evaluated as evaluatedMembers,
  inline as withIds,
  key,
  KEYS,
  points,
  profile,
  S,
  segmentOf,
  segmentWritesServer,
  server,
  steps,
  TZ,
  view,
  worker,
  type Account,
  type Step as WriteStep,
} from '../../test/segment-writes.ts';
import { subscribe, verified } from '../../test/webhooks.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { sendImportFile } from '../../test/imports-http.ts';

const CLUB = userCreated('sections', 'club');
const EMAIL_CH = builtIn('channels', 'email');
const WEEKLY = userCreated('topics', 'weekly-news');
const VIP = userCreated('tags', 'vip');

/** The live segments: an attribute, a moving window, both under `||` with event data, and `&&` with any event. */
const SEGMENTS: Record<string, string> = {
  rich: `${points}.gt(50)`,
  recent: `${view}.inLast("events.day", 0, 2)`,
  either: `(${points}.gte(100) || ${view}.eventData("url").eq("https://x/a").inLast("events.hour", 0, 30))`,
  both: `(${points}.gt(10) && ${view})`,
};

const MANIFEST: Manifest = {
  ...SHOP,
  sections: [...SHOP.sections!, { name: 'Club', attributes: [{ name: 'Level', versions: [{ type: ['Number'] }] }] }],
  segments: Object.entries(SEGMENTS).map(([name, query]) => ({ name, section: S, versions: [{ query }] })),
};

segmentWritesServer({ CALLBACKS_ALLOW_PRIVATE: 'true' });

const account = () => newAccount(MANIFEST);

/** A segment's query with the account's ids, as a count's segment_definition takes it (evaluated on demand). */
const inline = (a: Account, name: string): string => withIds(a, SEGMENTS[name]);

async function makeLive(a: Account, name: string): Promise<void> {
  const res = await call(a, 'PUT', `/audience/segments/${segmentOf(name)}/live`, { time_zone: TZ });
  expect(res.status, res.text).toBe(200);
  expect(res.body).toMatchObject({ live: true, time_zone: TZ });
}

/** Runs every job due by the test's clock, those they enqueue included. */
const drain = () => worker.runDue();

type Step =
  WriteStep | { kind: 'tag'; key: number; on: boolean } | { kind: 'consent'; key: number; type: 'opt-in' | 'opt-out' };

const step: fc.Arbitrary<Step> = fc.oneof(
  ...steps([5, 20, 60, 120]),
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tag' as const), key, on: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('consent' as const),
      key,
      type: fc.constantFrom('opt-in' as const, 'opt-out' as const),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('event' as const),
      key,
      url: fc.constantFrom('a' as const, 'b' as const),
      hoursAgo: fc.constantFrom(0, 20, 40, 70),
    }),
  },
);

/** Applies a step through the API: a tag, a consent, or one of the shared writes. */
async function apply(a: Account, s: Step): Promise<void> {
  switch (s.kind) {
    case 'tag':
      await call(a, 'PATCH', `${profile(KEYS[s.key])}/tags`, { [VIP]: s.on });
      return;
    case 'consent':
      await call(a, 'POST', `/v2/audience/keyspaces/${EMAIL}/profiles/${enc(KEYS[s.key])}/sections/${S}/consents`, {
        topic_discriminator: WEEKLY,
        channel_discriminator: EMAIL_CH,
        type: s.type,
        reason: 'test',
      });
      return;
    default:
      await applyWrite(a, s);
  }
}

/** The export keys of the canonical profiles the evaluation route (the in-memory evaluator) puts in each segment. */
const evaluated = (a: Account) => evaluatedMembers(a, Object.keys(SEGMENTS));

/** A count through the count route: of the stored (live) segment, or of its query given inline (evaluated on demand). */
async function count(a: Account, name: string, how: 'live' | 'inline', known?: boolean) {
  const segment =
    how === 'live'
      ? { timezone: TZ, segment_discriminator: segmentOf(name) }
      : { timezone: TZ, segment_definition: inline(a, name) };
  const res = await call(a, 'POST', '/audience/profiles/reports/segments/count', {
    section_discriminator: S,
    segment,
    ...(known === undefined ? {} : { known_profiles: known }),
  });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function members(a: Account, name: string): Promise<string[]> {
  const { rows } = await db.query<{ export_key: string }>(
    `select m.export_key from segment_members m join segments s using (account_id, segment_id)
     where m.account_id = $1::bigint and s.discriminator = $2 order by 1`,
    [a.accountId, segmentOf(name)],
  );
  return rows.map((r) => r.export_key);
}

describe('live segments', () => {
  it('keep their members equal to the on-demand evaluation through random writes and clock moves; their count answers as EXP-23 (AQL-11)', async () => {
    // Members seen over every step: the segments were not all empty.
    let seen = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 8, maxLength: 22 }), async (steps) => {
        const a = await account();
        for (const k of KEYS.slice(0, 3)) await apply(a, { kind: 'create', key: KEYS.indexOf(k) });
        for (const name of Object.keys(SEGMENTS)) await makeLive(a, name);
        await drain();
        for (const s of steps) {
          await apply(a, s);
          await drain();
          const expected = await evaluated(a);
          for (const name of Object.keys(SEGMENTS)) {
            const context = `${name} after ${JSON.stringify(s)} of ${JSON.stringify(steps)}`;
            expect(await members(a, name), context).toEqual(expected[name]);
            const live = await count(a, name, 'live');
            expect(live.live, context).toMatchObject({ refreshed_at: expect.any(String) });
            expect(live.profile_count, context).toBe((await count(a, name, 'inline')).profile_count);
            expect(live.profile_count, context).toBe(expected[name].length);
            seen += expected[name].length;
          }
        }
        const known = await count(a, 'rich', 'live', true);
        expect(known.profile_count).toBe((await count(a, 'rich', 'inline', true)).profile_count);
      }),
      { numRuns: Number(process.env.LIVE_RUNS ?? 5) },
    );
    expect(seen).toBeGreaterThan(0);
  }, 900_000);

  it('answer their state, read their trend (AQL-08) from the recorded entries and exits, and forget them when stopped', async () => {
    const a = await account();
    await apply(a, { kind: 'create', key: 0 });
    await apply(a, { kind: 'create', key: 1 });
    const before = await call(a, 'GET', `/audience/segments/${segmentOf('rich')}/live`);
    expect(before.body).toMatchObject({ live: false, size: null });
    await makeLive(a, 'rich');
    // Not computed until the job ran.
    expect((await call(a, 'GET', `/audience/segments/${segmentOf('rich')}/live`)).body.size).toBeNull();
    expect((await count(a, 'rich', 'live')).live).toBeUndefined();
    await drain();
    const t0 = new Date(server.clock.now);
    await apply(a, { kind: 'clock', hours: 1 });
    await apply(a, { kind: 'points', key: 0, value: 60 });
    await drain();
    const t1 = new Date(server.clock.now);
    await apply(a, { kind: 'clock', hours: 1 });
    await apply(a, { kind: 'points', key: 1, value: 70 });
    await drain();
    const t2 = new Date(server.clock.now);
    await apply(a, { kind: 'clock', hours: 1 });
    await apply(a, { kind: 'points', key: 0, value: 1 });
    await drain();
    const t3 = new Date(server.clock.now);
    const state = await call(a, 'GET', `/audience/segments/${segmentOf('rich')}/live`);
    expect(state.body).toMatchObject({ live: true, size: 1, refreshed_at: t3.toISOString() });
    const points = [t0, t1, t2, t3].map((t) => t.toISOString());
    const trend = await call(a, 'POST', `/audience/sections/${S}/segments/${segmentOf('rich')}/trend`, {
      sampling_points: points,
      timezone: TZ,
    });
    expect(trend.status, trend.text).toBe(200);
    expect(trend.body.live).toMatchObject({ refreshed_at: t3.toISOString() });
    expect(Object.values(trend.body.matching_profile_count).map((c: any) => c.known + c.unknown)).toEqual([0, 1, 2, 1]);
    // The on-demand trend (another time zone reads no membership) agrees at these points.
    const onDemand = await call(a, 'POST', `/audience/sections/${S}/segments/${segmentOf('rich')}/trend`, {
      sampling_points: points,
      timezone: 'UTC',
    });
    expect(onDemand.body.live).toBeUndefined();
    expect(onDemand.body.matching_profile_count).toEqual(trend.body.matching_profile_count);

    expect((await call(a, 'DELETE', `/audience/segments/${segmentOf('rich')}/live`)).status).toBe(204);
    await drain();
    expect((await call(a, 'GET', `/audience/segments/${segmentOf('rich')}/live`)).body).toMatchObject({ live: false });
    const { rows } = await db.query('select count(*)::int as n from segment_member_changes where account_id = $1', [
      a.accountId,
    ]);
    expect(rows[0].n).toBe(0);
  });

  it('take the profiles an import writes', async () => {
    const a = await account();
    await apply(a, { kind: 'create', key: 0 });
    await makeLive(a, 'rich');
    await drain();
    const imported = await call(a, 'POST', `/v2/audience/sections/${S}/imports`, {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'points', attribute_version_id: a.ids.points }],
    });
    expect(imported.status, imported.text).toBe(201);
    const csv = `email,points\n${KEYS[0]},80\n${KEYS[4]},90\n${KEYS[3]},3\n`;
    const uploaded = await sendImportFile(server.url, imported.body, csv);
    expect(uploaded.status, await uploaded.text()).toBe(204);
    await drain();
    const status = await call(a, 'GET', `/audience/sections/${S}/imports/${imported.body.import_id}`);
    expect(status.body.result?.status, status.text).toBe('completed');
    expect(await members(a, 'rich')).toEqual((await evaluated(a)).rich);
    expect((await members(a, 'rich')).length).toBe(2);
  });

  it('refuse bad input naming the field, and keys restricted to other sections', async () => {
    const a = await account();
    const bad = await call(a, 'PUT', `/audience/segments/${segmentOf('rich')}/live`, { time_zone: 'Mars/Base' });
    expect(expectProblem(bad, 400, 'AUD-1712')).toMatch(/time_zone/);
    expectProblem(
      await call(a, 'PUT', `/audience/segments/${segmentOf('nope')}/live`, { time_zone: TZ }),
      404,
      'AUD-1104',
    );
    expectProblem(await call(a, 'PUT', `/audience/segments/${segmentOf('rich')}/live`, {}), 400);
    await makeLive(a, 'rich');
    const clubOnly = await server.token(await server.createKey(a.accountId, { section_discriminators: [CLUB] }));
    const as = (method: string, path: string, body?: unknown) =>
      server.request(method, path, { token: clubOnly, body });
    expectProblem(await as('GET', `/audience/segments/${segmentOf('rich')}/live`), 403, 'AUD-1107');
    expectProblem(await as('DELETE', `/audience/segments/${segmentOf('rich')}/live`), 403, 'AUD-1107');
    expectProblem(await as('PUT', `/audience/segments/${segmentOf('rich')}/live`, { time_zone: TZ }), 403, 'AUD-1107');
    const shopOnly = await server.token(await server.createKey(a.accountId, { section_discriminators: [S] }));
    const read = await server.request('GET', `/audience/segments/${segmentOf('rich')}/live`, { token: shopOnly });
    expect(read.status, read.text).toBe(200);
  });
});

describe('live segment webhooks', () => {
  let receiver: CallbackReceiver;
  receiverForTests((r) => {
    receiver = r;
  });

  it('deliver every entry and exit, signed, through writes and time passing', async () => {
    const a = await account();
    const url = receiver.url('/live-hook');
    const { secret } = await subscribe(server, a, url, ['segment.entered', 'segment.exited']);
    await apply(a, { kind: 'create', key: 0 });
    await apply(a, { kind: 'create', key: 1 });
    await makeLive(a, 'rich');
    await makeLive(a, 'recent');
    await drain();
    const exportKey = async (k: string) =>
      (
        await db.query(
          'select p.export_key from profile_identifiers i join profiles p using (account_id, profile_id) where i.account_id = $1 and i.profile_key = $2',
          [a.accountId, k],
        )
      ).rows[0].export_key;
    const [k0, k1] = [await exportKey(KEYS[0]), await exportKey(KEYS[1])];
    // Writes: 0 enters rich; 1 enters recent with a page view now.
    await apply(a, { kind: 'points', key: 0, value: 60 });
    await apply(a, { kind: 'event', key: 1, url: 'a', hoursAgo: 0 });
    await drain();
    // Time: two days and more later, 1 leaves recent without a write; then 0 leaves rich by a write.
    await apply(a, { kind: 'clock', hours: 49 });
    await drain();
    await apply(a, { kind: 'points', key: 0, value: 10 });
    await drain();
    const got = receiver.received
      .filter((r) => r.path === '/live-hook')
      .map((r) => verified(r, secret))
      .map((p) => [p.type, p.data.segment_discriminator, p.data.profile.export_key]);
    // Every entry and exit, each profile's in order.
    expect(got.filter((g) => g[2] === k0)).toEqual([
      ['segment.entered', segmentOf('rich'), k0],
      ['segment.exited', segmentOf('rich'), k0],
    ]);
    expect(got.filter((g) => g[2] === k1)).toEqual([
      ['segment.entered', segmentOf('recent'), k1],
      ['segment.exited', segmentOf('recent'), k1],
    ]);
    expect(got).toHaveLength(4);
    // Exactly once per id.
    const ids = receiver.received.filter((r) => r.path === '/live-hook').map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

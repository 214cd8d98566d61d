import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, expect } from 'vitest';
import { serverWithPool, type Credentials, type Response, type TestServer } from './app.ts';
import { builtIn, NS, userCreated } from './names.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import type { Worker } from '../src/jobs/queue.ts';
import { startWorker } from '../src/worker/worker.ts';

// What the property tests of live segments and of counts from a projection
// (src/segments/live.test.ts, projection.test.ts) share: their server, database connection and
// worker, an account without rate limits, and the random profile writes they interleave (points,
// page views, creates, merges, unmerges, deletes and clock moves), applied through the API.

export let server: TestServer;
export let db: pg.Pool;
/** The worker runs jobs only when a test drains them (worker.runDue), due by the test's clock. */
export let worker: Worker;

/** Starts the test file's server (with `env`), connection and worker before its tests, and stops them after. */
export function segmentWritesServer(env: Record<string, string>): void {
  serverWithPool({ env: { LOG_LEVEL: 'silent', ...env } }, (s, d) => {
    server = s;
    db = d;
  });
  beforeAll(async () => {
    worker = await startWorker(server.services, (err) => console.error('job failed', err), { dueByClock: true });
    worker.setTakesJobs(false);
  });
  afterAll(async () => {
    await worker?.stop();
  });
}

export const S = userCreated('sections', 'shop');
export const EMAIL = builtIn('keyspaces', 'email');
export const POINTS = userCreated('attributes', 'points');
export const PAGE_VIEW = `${NS}.events.page-view`;
export const HOUR = 3_600_000;
export const KEYS = ['a@x.io', 'b@x.io', 'c@x.io', 'd@x.io', 'e@x.io'];
export const TZ = 'Europe/Berlin';

/** The points attribute and the page view event of a query, with placeholders `inline` replaces. */
export const points = `section({section}).attribute({attribute:${POINTS}@2})`;
export const view = `section({section}).event({event:${PAGE_VIEW}@1})`;
export const segmentOf = (name: string): string => userCreated('segments', name);

export const enc = encodeURIComponent;
/** A profile's path in the shop section. */
export const profile = (key: string): string => `/audience/keyspaces/${EMAIL}/profiles/${enc(key)}/sections/${S}`;
export const ref = (key: string) => ({ keyspace_discriminator: EMAIL, profile_key: key });

export interface Account extends Credentials {
  token: string;
  /** The ids of the points attribute's latest version, the page view's first version and the shop section. */
  ids: { points: string; view: string; section: string };
}

/** A new account with `manifest` and no rate limits, and the ids its queries refer to. */
export async function account(manifest: Manifest): Promise<Account> {
  const a = await server.login(manifest, {
    requests_per_second: null,
    token_requests_per_minute: null,
    profile_key_operations_per_second: null,
    profile_export_requests_per_second: null,
  });
  const attributes = (await server.request('GET', `/audience/sections/${S}/attributes`, { token: a.token })).body.items;
  const events = (await server.request('GET', `/audience/sections/${S}/events`, { token: a.token })).body.items;
  const sections = (await server.request('GET', '/audience/sections', { token: a.token })).body.items;
  return {
    ...a,
    ids: {
      points: attributes.find((x: any) => x.discriminator === POINTS).versions.at(-1).id,
      view: events.find((x: any) => x.discriminator === PAGE_VIEW).versions[0].id,
      section: sections.find((x: any) => x.discriminator === S).id,
    },
  };
}

/** A query with the account's ids, as a count's segment_definition takes it (evaluated on demand). */
export function inline(a: Account, query: string): string {
  return query
    .replaceAll('{section}', a.ids.section)
    .replaceAll(`{attribute:${POINTS}@2}`, a.ids.points)
    .replaceAll(`{event:${PAGE_VIEW}@1}`, a.ids.view);
}

/** Calls the server as the account; any answer but a 5xx. */
export async function call(a: Account, method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = method === 'PATCH' ? { 'content-type': 'application/merge-patch+json' } : {};
  const res = await server.request(method, path, { token: a.token, body, headers });
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(500);
  return res;
}

export type Step =
  | { kind: 'points'; key: number; value: number | null }
  | { kind: 'event'; key: number; hoursAgo: number; url?: 'a' | 'b' }
  | { kind: 'create'; key: number }
  | { kind: 'merge'; key: number; other: number }
  | { kind: 'unmerge'; key: number }
  | { kind: 'delete'; key: number }
  | { kind: 'clock'; hours: number };

export const key = fc.integer({ min: 0, max: KEYS.length - 1 });

/** The weighted steps: points set to one of `values` (or removed), and the writes and clock moves besides. */
export function steps(values: number[]): fc.WeightedArbitrary<Step>[] {
  return [
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('points' as const),
        key,
        value: fc.option(fc.constantFrom(...values), { nil: null }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('create' as const), key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('merge' as const), key, other: key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('unmerge' as const), key }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), key }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('clock' as const), hours: fc.constantFrom(1, 10, 25, 49) }) },
  ];
}

/** Applies a step through the API; refusals (a profile that does not exist, a merge the rules refuse) are part of the game. */
export async function apply(a: Account, s: Step): Promise<void> {
  switch (s.kind) {
    case 'points':
      await call(a, 'PATCH', `/v2${profile(KEYS[s.key])}/attributes`, { [POINTS]: s.value });
      return;
    case 'event': {
      const posted = await call(a, 'POST', `${profile(KEYS[s.key])}/events`, {
        items: [
          {
            event_time: new Date(server.clock.now - s.hoursAgo * HOUR).toISOString(),
            version_id: a.ids.view,
            data: { url: `https://x/${s.url ?? 'a'}` },
          },
        ],
      });
      // Refused only for a profile that does not exist.
      expect([200, 201, 202, 204, 404], posted.text).toContain(posted.status);
      return;
    }
    case 'create':
      await call(a, 'POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, { profile_key: KEYS[s.key] });
      return;
    case 'merge':
      await call(a, 'PUT', '/audience/profiles/merges', { profiles: [ref(KEYS[s.key]), ref(KEYS[s.other])] });
      return;
    case 'unmerge':
      await call(a, 'DELETE', `/audience/profiles/merges/keyspaces/${EMAIL}/profiles/${enc(KEYS[s.key])}`);
      return;
    case 'delete':
      await call(a, 'DELETE', `/audience/keyspaces/${EMAIL}/profiles/${enc(KEYS[s.key])}`);
      return;
    case 'clock':
      server.clock.advance(s.hours * HOUR);
      // Access tokens expire by the same clock.
      a.token = await server.token(a);
      return;
  }
}

/**
 * The export keys of the canonical profiles the evaluation route (the in-memory evaluator) puts in
 * each of the segments `names`, sorted.
 */
export async function evaluated(a: Account, names: string[]): Promise<Record<string, string[]>> {
  const members: Record<string, Set<string>> = Object.fromEntries(names.map((n) => [n, new Set()]));
  for (const k of KEYS) {
    const res = await call(a, 'POST', `/audience/keyspaces/${EMAIL}/profiles/${enc(k)}/evaluations`, {
      segments: names.map((n) => ({ discriminator: segmentOf(n) })),
      time_zone: TZ,
    });
    if (res.status === 404) continue;
    expect(res.status, res.text).toBe(200);
    const { rows } = await db.query<{ export_key: string }>(
      `select c.export_key from profile_identifiers i join profiles p on p.account_id = i.account_id and p.profile_id = i.profile_id
       join profiles c on c.account_id = p.account_id and c.profile_id = coalesce(p.canonical_id, p.profile_id)
       where i.account_id = $1::bigint and i.profile_key = $2`,
      [a.accountId, k],
    );
    for (const n of names) if (res.body.matches.segments[segmentOf(n)]) members[n].add(rows[0].export_key);
  }
  return Object.fromEntries(Object.entries(members).map(([n, s]) => [n, [...s].sort()]));
}

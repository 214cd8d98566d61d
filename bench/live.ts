/**
 * The live segments of the benches that measure what keeping segments live (docs/aql.md "Live
 * segments") costs writes: bench/live-segments.ts (events and PATCHes) and bench/imports.ts (an
 * import), for docs/benchmarks.md "Live segments".
 *
 * 50 segments of the demo account's Shop section, stored through the manifest, in turn "loyalty
 * points above a bound" (attributes alone), "points above a bound or a page view in the last
 * hours" (both) and "a page view in the last 3 to 49 days" (events alone). A setting makes the
 * first n of them live and the others not: one is a segment of points, ten hold four of points,
 * three of both and three of page views.
 */
import pg from 'pg';
import { embeddedDatabaseUrl, onCleanup, request, type Audience } from './harness.ts';

export const SEGMENTS = 50;
/** How long a membership may take to catch up (LiveSegments.caughtUp), in ms. */
export const CATCH_UP_MS = 900_000;

/**
 * The numbers of live segments to measure, from BENCH_LIVE_SEGMENTS (e.g. "0,1,10"), or `fallback`
 * without it: each at most SEGMENTS, and 0 among them (the baseline every ratio is to).
 */
export function liveSettings(fallback: number[]): number[] {
  const text = process.env.BENCH_LIVE_SEGMENTS;
  const settings = text === undefined ? fallback : text.split(',').map((s) => Number(s.trim()));
  if (!settings.every((n) => Number.isInteger(n) && n >= 0 && n <= SEGMENTS) || !settings.includes(0))
    throw new Error(`BENCH_LIVE_SEGMENTS must list numbers of 0 to ${SEGMENTS}, 0 among them: ${text}`);
  return [...new Set(settings)];
}

export interface LiveSegments {
  /** Makes the first `n` segments live and the others not, and waits until the job computed them. */
  setLive(n: number): Promise<void>;
  /**
   * Waits until the first `n` segments' memberships are computed and no marked profile nor due run
   * of the job is left (the membership caught up); answers how long that took, in ms.
   */
  caughtUp(n: number): Promise<number>;
  /** The members of the first `n` segments, summed (that the writes move some). */
  members(n: number): Promise<number>;
}

/** A JSON call of the API of `audience` with its demo account's token (or `bearer`): its answer, undefined when empty; throws on a status of 300 or more. */
export function jsonApi(audience: Audience) {
  return async (method: string, path: string, body?: unknown, bearer = audience.token) => {
    const res = await request(`${audience.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.text ? JSON.parse(res.text) : undefined;
  };
}

/** Stores the SEGMENTS segments in the demo account of `audience`, whose namespace is `ns` (e.g. com.vendor1). */
export async function storeLiveSegments(audience: Audience, ns: string): Promise<LiveSegments> {
  const { adminToken, accountId } = audience;
  const api = jsonApi(audience);
  const shop = `${ns}.sections.user-created.shop`;
  const view = `section({section}).event({event:${ns}.events.page-view@1})`;
  const points = `section({section}).attribute({attribute:${ns}.attributes.user-created.loyalty-points@2})`;
  const queries = Array.from({ length: SEGMENTS }, (_, i) =>
    i % 3 === 0
      ? `${points}.gt(${10 * i})`
      : i % 3 === 1
        ? `(${points}.gt(${5 * i}) || ${view}.inLast("events.hour", 0, ${i}))`
        : `${view}.inLast("events.day", 0, ${1 + i})`,
  );
  await api(
    'PUT',
    `/admin/accounts/${accountId}/manifest`,
    { segments: queries.map((query, i) => ({ name: `live ${i}`, section: shop, versions: [{ query }] })) },
    adminToken,
  );
  const segment = (i: number) => `${ns}.segments.user-created.live-${i}`;
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(audience.dataDir) });
  await db.connect();
  onCleanup(() => db.end());

  const states = (n: number): Promise<{ size: number | null }[]> =>
    Promise.all(Array.from({ length: n }, (_, i) => api('GET', `/audience/segments/${segment(i)}/live`)));
  async function caughtUp(n: number): Promise<number> {
    const started = performance.now();
    let computed = false;
    for (;;) {
      computed ||= (await states(n)).every((s) => s.size !== null);
      const { rows } = await db.query<{ pending: boolean }>(
        `select exists (select 1 from profile_changes where account_id = $1::bigint)
           or exists (select 1 from jobs where account_id = $1::bigint and kind = 'live-segments' and run_at <= now()) as pending`,
        [accountId],
      );
      if (computed && !rows[0].pending) return performance.now() - started;
      if (performance.now() - started > CATCH_UP_MS)
        throw new Error(`live segments did not catch up in ${CATCH_UP_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    async setLive(n) {
      for (let i = 0; i < SEGMENTS; i++)
        if (i < n) await api('PUT', `/audience/segments/${segment(i)}/live`, { time_zone: 'UTC' });
        else await api('DELETE', `/audience/segments/${segment(i)}/live`);
      await caughtUp(n);
    },
    caughtUp,
    members: async (n) => (await states(n)).reduce((sum, s) => sum + (s.size ?? 0), 0),
  };
}

/**
 * `npm run bench:live-segments`: what live segments (docs/aql.md "Live segments") cost the writes
 * of events, for docs/benchmarks.md "Live segments": events written per second through the event
 * route with 0, 10 and 50 live segments in the account, in one run, in alternating rounds, so that
 * the load of a shared machine weighs on each alike.
 *
 * 1. Starts the real server (`node src/main.js serve`: API and worker thread, embedded
 *    PostgreSQL), creates BENCH_LIVE_PROFILES profiles in the demo account's Shop section through
 *    the API, and stores 50 segments through the manifest (page views in the last 1 to 50 days,
 *    loyalty points above a bound, or both).
 * 2. Per round, for 0, 10 and 50 live segments in turn: makes that many live (and the others not),
 *    waits until the job has computed them, then BENCH_LIVE_WRITERS writers post one page view each
 *    to random profiles for BENCH_DURATION_S seconds. Reports events/s, the PostgreSQL CPU per
 *    event, the time until the membership caught up after the writes stopped (the queue drained),
 *    and each rate as a ratio of the 0-live rate of the same round. The load average and this
 *    process's CPU (the load generator's) are printed with them.
 *
 * Settings: BENCH_LIVE_PROFILES (2000), BENCH_LIVE_WRITERS (8), BENCH_ROUNDS (2), BENCH_DURATION_S (10).
 */
import os from 'node:os';
import pg from 'pg';
import {
  DURATION_S,
  embeddedDatabaseUrl,
  log,
  onCleanup,
  postgresCpuMs,
  request,
  ROUNDS,
  runBench,
  startAudience,
  table,
} from './harness.ts';

const PROFILES = Math.max(100, Number(process.env.BENCH_LIVE_PROFILES ?? 2000));
const WRITERS = Math.max(1, Number(process.env.BENCH_LIVE_WRITERS ?? 8));
const V = 'com.vendor1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;
const LIVE = [0, 10, 50] as const;
const SEGMENTS = 50;

await runBench(900_000 + ROUNDS * LIVE.length * (DURATION_S + 60) * 1000, async () => {
  const audience = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'profile_key_operations_per_second',
  ]);
  const { url, token, adminToken, accountId } = audience;
  const api = async (method: string, path: string, body?: unknown, bearer = token) => {
    const res = await request(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.text ? JSON.parse(res.text) : undefined;
  };
  const key = (i: number) => `live-${i}@example.com`;
  for (let i = 0; i < PROFILES; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, PROFILES - i) }, (_, j) =>
        api('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, { profile_key: key(i + j) }),
      ),
    );
  log(`${PROFILES} profiles created`);
  const view = `section({section}).event({event:${V}.events.page-view@1})`;
  const points = `section({section}).attribute({attribute:${V}.attributes.user-created.loyalty-points@2})`;
  const queries = Array.from({ length: SEGMENTS }, (_, i) =>
    i % 3 === 0
      ? `${view}.inLast("events.day", 0, ${1 + i})`
      : i % 3 === 1
        ? `${points}.gt(${10 * i})`
        : `(${points}.gt(${5 * i}) || ${view}.inLast("events.hour", 0, ${i}))`,
  );
  await api(
    'PUT',
    `/admin/accounts/${accountId}/manifest`,
    { segments: queries.map((query, i) => ({ name: `live ${i}`, section: SHOP, versions: [{ query }] })) },
    adminToken,
  );
  const segment = (i: number) => `${V}.segments.user-created.live-${i}`;
  const events = await api('GET', `/audience/sections/${SHOP}/events`);
  const versionId = events.items.find((e: { discriminator: string }) => e.discriminator.endsWith('.events.page-view'))
    .versions[0].id;

  /** Makes the first `n` segments live and the others not, and waits until the job computed them. */
  async function setLive(n: number): Promise<void> {
    for (let i = 0; i < SEGMENTS; i++)
      if (i < n) await api('PUT', `/audience/segments/${segment(i)}/live`, { time_zone: 'UTC' });
      else await api('DELETE', `/audience/segments/${segment(i)}/live`);
    await caughtUp(n);
  }
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(audience.dataDir) });
  await db.connect();
  onCleanup(() => db.end());
  /** Waits until every live segment's membership is computed and the marked profiles are all taken (no run of the job waiting). */
  async function caughtUp(n: number): Promise<number> {
    const started = performance.now();
    for (;;) {
      const states = await Promise.all(
        Array.from({ length: n }, (_, i) => api('GET', `/audience/segments/${segment(i)}/live`)),
      );
      const { rows } = await db.query<{ pending: number }>(
        `select (select count(*) from profile_changes where account_id = $1::bigint)
           + (select count(*) from jobs where account_id = $1::bigint and kind = 'live-segments' and run_at <= now()) as pending`,
        [accountId],
      );
      if (states.every((s) => s.size !== null) && Number(rows[0].pending) === 0) return performance.now() - started;
      if (performance.now() - started > 300_000) throw new Error('live segments did not catch up in 5 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const results = new Map<number, { eps: number[]; ratio: number[]; cpuUs: number[]; catchUpMs: number[] }>();
  for (let round = 1; round <= ROUNDS; round++) {
    let baseline = 0;
    for (const n of round % 2 === 1 ? LIVE : [...LIVE].reverse()) {
      await setLive(n);
      const cpuBefore = await postgresCpuMs(audience.dataDir);
      const started = performance.now();
      const until = started + DURATION_S * 1000;
      let written = 0;
      await Promise.all(
        Array.from({ length: WRITERS }, async () => {
          while (performance.now() < until) {
            const k = key(Math.floor(Math.random() * PROFILES));
            await api(
              'POST',
              `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(k)}/sections/${SHOP}/events`,
              {
                items: [{ event_time: new Date().toISOString(), version_id: versionId, data: { url: 'https://x/p' } }],
              },
            );
            written++;
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const cpu = (await postgresCpuMs(audience.dataDir)) - cpuBefore;
      const catchUpMs = n === 0 ? 0 : await caughtUp(n);
      const eps = written / seconds;
      if (n === 0) baseline = eps;
      const r = results.get(n) ?? { eps: [], ratio: [], cpuUs: [], catchUpMs: [] };
      r.eps.push(eps);
      r.cpuUs.push((cpu * 1000) / written);
      r.catchUpMs.push(catchUpMs);
      results.set(n, r);
      log(
        `round ${round}, ${n} live: ${eps.toFixed(0)} events/s, caught up ${catchUpMs.toFixed(0)} ms after; load ${os.loadavg()[0].toFixed(1)}`,
      );
    }
    for (const n of LIVE) results.get(n)!.ratio.push(results.get(n)!.eps.at(-1)! / baseline);
  }
  const cpu = process.cpuUsage();
  console.log('');
  console.log(
    table([
      [
        'live segments',
        'events/s per round',
        'x the 0-live rate per round',
        'PostgreSQL CPU µs per event',
        'caught up after (ms)',
      ],
      ...LIVE.map((n) => {
        const r = results.get(n)!;
        return [
          String(n),
          r.eps.map((x) => x.toFixed(0)).join(', '),
          r.ratio.map((x) => x.toFixed(2)).join(', '),
          r.cpuUs.map((x) => x.toFixed(0)).join(', '),
          r.catchUpMs.map((x) => x.toFixed(0)).join(', '),
        ];
      }),
    ]),
  );
  console.log(
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}; load generator CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms`,
  );
});

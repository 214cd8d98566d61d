/**
 * `npm run bench:live-segments`: what live segments (docs/aql.md "Live segments") cost writes, for
 * docs/benchmarks.md "Live segments": events written per second through the event route, and
 * attribute PATCHes per second, with 0, 10 and 50 live segments in the account (or the numbers of
 * BENCH_LIVE_SEGMENTS), in one run, in alternating rounds, so that the load of a shared machine
 * weighs on each alike.
 *
 * 1. Starts the real server (`node src/main.js serve`: API and worker thread, embedded
 *    PostgreSQL), creates BENCH_LIVE_PROFILES profiles in the demo account's Shop section through
 *    the API, and stores the 50 segments of bench/live.ts through the manifest (loyalty points
 *    above a bound, page views in the last days, or either).
 * 2. Per round, per write (BENCH_LIVE_WRITES: `event`, one page view posted to a random profile;
 *    `patch`, a v2 PATCH of a random profile's loyalty points), for each number of live segments in
 *    turn (the order reversed in every other round): makes that many live (and the others not),
 *    waits until the job has computed them, then BENCH_LIVE_WRITERS writers write for
 *    BENCH_DURATION_S seconds. Reports writes/s, each as a ratio of the 0-live rate of the same
 *    round and write, the PostgreSQL CPU per write, the server's peak RSS during the writes, the
 *    time until the membership caught up after the writes stopped (the queue drained), and the load
 *    average; and this process's CPU (the load generator's) over the run.
 *
 * Settings: BENCH_LIVE_PROFILES (2000), BENCH_LIVE_WRITERS (8), BENCH_LIVE_SEGMENTS (0,10,50),
 * BENCH_LIVE_WRITES (event,patch), BENCH_ROUNDS (2), BENCH_DURATION_S (10).
 */
import os from 'node:os';
import {
  DURATION_S,
  log,
  memoryOf,
  postgresCpuMs,
  ROUNDS,
  runBench,
  sampleMemory,
  startAudience,
  table,
} from './harness.ts';
import { jsonApi, liveSettings, storeLiveSegments } from './live.ts';

const PROFILES = Math.max(100, Number(process.env.BENCH_LIVE_PROFILES ?? 2000));
const WRITERS = Math.max(1, Number(process.env.BENCH_LIVE_WRITERS ?? 8));
const V = 'com.vendor1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;
const POINTS = `${V}.attributes.user-created.loyalty-points`;
const LIVE = liveSettings([0, 10, 50]);
const WRITES = (process.env.BENCH_LIVE_WRITES ?? 'event,patch').split(',').map((w) => w.trim());
if (!WRITES.every((w) => w === 'event' || w === 'patch'))
  throw new Error(`BENCH_LIVE_WRITES must list event and patch: ${process.env.BENCH_LIVE_WRITES}`);

await runBench(900_000 + ROUNDS * WRITES.length * LIVE.length * (DURATION_S + 60) * 1000, async () => {
  const audience = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'profile_key_operations_per_second',
  ]);
  const api = jsonApi(audience);
  const key = (i: number) => `live-${i}@example.com`;
  for (let i = 0; i < PROFILES; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, PROFILES - i) }, (_, j) =>
        api('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, { profile_key: key(i + j) }),
      ),
    );
  log(`${PROFILES} profiles created`);
  const live = await storeLiveSegments(audience, V);
  const events = await api('GET', `/audience/sections/${SHOP}/events`);
  const versionId = events.items.find((e: { discriminator: string }) => e.discriminator.endsWith('.events.page-view'))
    .versions[0].id;
  const profile = () =>
    `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key(Math.floor(Math.random() * PROFILES)))}/sections/${SHOP}`;
  const write = {
    event: () =>
      api('POST', `${profile()}/events`, {
        items: [{ event_time: new Date().toISOString(), version_id: versionId, data: { url: 'https://x/p' } }],
      }),
    // Points of 0 to 599: across the bounds of the points segments (0 to 480), so that profiles enter and leave.
    patch: () => api('PATCH', `/v2${profile()}/attributes`, { [POINTS]: Math.floor(Math.random() * 600) }),
  };

  interface Figures {
    wps: number[];
    ratio: number[];
    cpuUs: number[];
    rssMb: number[];
    catchUpMs: number[];
    load: number[];
  }
  const results = new Map<string, Figures>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const w of WRITES) {
      let baseline = 0;
      for (const n of round % 2 === 1 ? LIVE : [...LIVE].reverse()) {
        await live.setLive(n);
        const cpuBefore = await postgresCpuMs(audience.dataDir);
        const memory = sampleMemory(audience.pid!, 200);
        const started = performance.now();
        const until = started + DURATION_S * 1000;
        let written = 0;
        await Promise.all(
          Array.from({ length: WRITERS }, async () => {
            while (performance.now() < until) {
              await write[w as keyof typeof write]();
              written++;
            }
          }),
        );
        const seconds = (performance.now() - started) / 1000;
        const cpu = (await postgresCpuMs(audience.dataDir)) - cpuBefore;
        const peakKb = Math.max(memory.stop().peakKb, (await memoryOf(audience.pid!))?.rssKb ?? 0);
        const catchUpMs = n === 0 ? 0 : await live.caughtUp(n);
        const wps = written / seconds;
        if (n === 0) baseline = wps;
        const r = results.get(`${w} ${n}`) ?? { wps: [], ratio: [], cpuUs: [], rssMb: [], catchUpMs: [], load: [] };
        r.wps.push(wps);
        r.cpuUs.push((cpu * 1000) / written);
        r.rssMb.push(peakKb / 1024);
        r.catchUpMs.push(catchUpMs);
        r.load.push(os.loadavg()[0]);
        results.set(`${w} ${n}`, r);
        log(
          `round ${round}, ${w}, ${n} live: ${wps.toFixed(0)} writes/s, caught up ${catchUpMs.toFixed(0)} ms after (${await live.members(n)} members); load ${os.loadavg()[0].toFixed(1)}`,
        );
      }
      for (const n of LIVE) results.get(`${w} ${n}`)!.ratio.push(results.get(`${w} ${n}`)!.wps.at(-1)! / baseline);
    }
  }
  const cpu = process.cpuUsage();
  const each = (xs: number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(', ');
  console.log('');
  console.log(
    table([
      [
        'write',
        'live segments',
        'writes/s per round',
        'x the 0-live rate per round',
        'PostgreSQL CPU µs per write',
        'server peak RSS MB',
        'caught up after (ms)',
        'load average',
      ],
      ...WRITES.flatMap((w) =>
        LIVE.map((n) => {
          const r = results.get(`${w} ${n}`)!;
          return [
            w,
            String(n),
            each(r.wps),
            each(r.ratio, 2),
            each(r.cpuUs),
            each(r.rssMb),
            each(r.catchUpMs),
            each(r.load, 1),
          ];
        }),
      ),
    ]),
  );
  console.log(
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}; load generator CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms`,
  );
});

/**
 * `npm run bench`: authenticated GET /audience/sections of the real server against a bare
 * `node:http` server answering the same JSON body, measured alternately in one run with wrk (or
 * autocannon where wrk is not installed).
 *
 * Both servers run in their own child process on loopback, and so does wrk. The
 * machine is shared and noisy, so what counts is the ratio audience/bare of the same run, not the
 * absolute figures. Everything is bounded in time and cleaned up (child processes, temp dir) on
 * failure too; the audience server gets SIGTERM so that it stops its embedded PostgreSQL.
 *
 * Tuning through the environment: those of bench/harness.ts (BENCH_GENERATOR, BENCH_CONNECTIONS,
 * BENCH_WARMUP_S, BENCH_DURATION_S, BENCH_ROUNDS, BENCH_SERVER_ARGS, e.g. "--cpu-prof"), where the
 * shared pieces are.
 */
import {
  failOnBadRuns,
  LOAD,
  measure,
  printSetting,
  request,
  runBench,
  share,
  startAudience,
  startBare,
  summary,
  summaryLine,
  table,
  usPerRequest,
  type Measured,
} from './harness.ts';

/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 120_000 + LOAD.rounds * 2 * (LOAD.warmupS + LOAD.durationS) * 1000 * 1.5;
const PATH = '/audience/sections';

await runBench(DEADLINE_MS, async (autocannon) => {
  printSetting();

  const audience = await startAudience();
  const sections = await request(`${audience.url}${PATH}`, { headers: { authorization: `Bearer ${audience.token}` } });
  if (sections.status !== 200) throw new Error(`GET ${PATH}: ${sections.status} ${sections.text}`);
  const body = sections.text;
  const bare = await startBare(body);
  const check = await request(`${bare.url}${PATH}`);
  if (check.text !== body) throw new Error('the bare server does not answer the same body');
  console.log(
    `body: ${Buffer.byteLength(body)} bytes, ${(JSON.parse(body) as { items: unknown[] }).items.length} sections`,
  );

  const results: Measured[] = [];
  for (let round = 1; round <= LOAD.rounds; round++) {
    results.push(await measure(autocannon, 'bare node:http', round, bare, { path: PATH }));
    results.push(
      await measure(autocannon, 'audience', round, audience, {
        path: PATH,
        headers: { authorization: `Bearer ${audience.token}` },
      }),
    );
  }

  const row = (label: string, m: Measured, ratioTo?: Measured) => [
    label,
    String(m.round),
    m.rps.toFixed(0),
    m.mean.toFixed(2),
    m.p50.toFixed(1),
    m.p99.toFixed(1),
    usPerRequest(m.serverCpuUsPerRequest),
    share(m.serverCpuShare),
    share(m.clientCpuShare),
    m.loadAverage.toFixed(2),
    ratioTo ? (m.rps / ratioTo.rps).toFixed(2) : '',
  ];
  const rows = [
    [
      'target',
      'round',
      'requests/s',
      'mean ms',
      'p50 ms',
      'p99 ms',
      'server CPU µs/req',
      'server CPU',
      `${LOAD.generator} CPU`,
      'load avg',
      'audience/bare',
    ],
  ];
  for (let round = 1; round <= LOAD.rounds; round++) {
    const b = results.find((r) => r.target === 'bare node:http' && r.round === round)!;
    const a = results.find((r) => r.target === 'audience' && r.round === round)!;
    rows.push(row(b.target, b), row(a.target, a, b));
  }
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(summaryLine('GET /audience/sections', summary(results, 'audience', 'bare node:http'), 0.5));
  failOnBadRuns(results);
});

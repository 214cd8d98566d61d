/**
 * `npm run bench`: authenticated GET /audience/sections of the real server against a bare
 * `node:http` server answering the same JSON body, measured alternately in one run with wrk (or
 * autocannon where wrk is not installed). The server runs as `npm start` runs it, logging every
 * request (LOG_LEVEL=info, its log in a file); beside it, on the same database, the same server at
 * LOG_LEVEL=warn (no request lines), so that the cost of the request log is measured in the same run.
 *
 * Both servers run in their own child process on loopback, and so does wrk. The
 * machine is shared and noisy, so what counts is the ratio audience/bare of the same run, not the
 * absolute figures. Everything is bounded in time and cleaned up (child processes, temp dir) on
 * failure too; the audience server gets SIGTERM so that it stops its embedded PostgreSQL.
 *
 * Tuning through the environment: those of bench/harness.ts (BENCH_GENERATOR, BENCH_CONNECTIONS,
 * BENCH_WARMUP_S, BENCH_DURATION_S, BENCH_ROUNDS, BENCH_SERVER_ARGS, e.g. "--cpu-prof",
 * BENCH_LOG_LEVEL), where the shared pieces are.
 */
import {
  failOnBadRuns,
  logLines,
  LOAD,
  measure,
  printSetting,
  request,
  runBench,
  share,
  startAudience,
  startBare,
  startBeside,
  summary,
  summaryLine,
  table,
  usPerRequest,
  type Measured,
} from './harness.ts';

/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 180_000 + LOAD.rounds * 3 * (LOAD.warmupS + LOAD.durationS) * 1000 * 1.5;
const PATH = '/audience/sections';

await runBench(DEADLINE_MS, async (autocannon) => {
  printSetting();

  // Both measured servers run beside the first one, on its database: the same kind of process
  // (the first one's own PostgreSQL is its child; theirs is not), differing only in the log level.
  const first = await startAudience();
  const audience = await startBeside(first, first.logLevel);
  const quiet = await startBeside(first, 'warn');
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
    const load = { path: PATH, headers: { authorization: `Bearer ${audience.token}` } };
    results.push(await measure(autocannon, 'audience', round, audience, load));
    results.push(await measure(autocannon, 'audience warn', round, quiet, load));
  }
  const logged = await logLines(audience);

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
  const name = (level: string) => `audience (LOG_LEVEL=${level})`;
  for (let round = 1; round <= LOAD.rounds; round++) {
    const b = results.find((r) => r.target === 'bare node:http' && r.round === round)!;
    const a = results.find((r) => r.target === 'audience' && r.round === round)!;
    const w = results.find((r) => r.target === 'audience warn' && r.round === round)!;
    rows.push(row(b.target, b), row(name(audience.logLevel), a, b), row(name('warn'), w, b));
  }
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(`log: ${logged} lines written by the server at LOG_LEVEL=${audience.logLevel}`);
  console.log(
    summaryLine(
      `GET /audience/sections, LOG_LEVEL=${audience.logLevel}`,
      summary(results, 'audience', 'bare node:http'),
      0.5,
    ),
  );
  console.log(
    summaryLine('GET /audience/sections, LOG_LEVEL=warn', summary(results, 'audience warn', 'bare node:http'), 0.5, {
      target: 'audience warn',
      baseline: 'bare',
    }),
  );
  // What the request log costs: the logged server over the same server not logging requests; on a
  // shared machine the server's CPU time per request varies less than its throughput.
  const cost = summary(results, 'audience', 'audience warn');
  console.log(
    summaryLine('GET /audience/sections', cost, 0.9, {
      target: `audience ${audience.logLevel}`,
      baseline: 'audience warn',
    }),
  );
  if (cost.serverUs !== undefined && cost.baselineServerUs !== undefined)
    console.log(
      `request log: server CPU per request ${cost.serverUs.toFixed(0)} µs at ${audience.logLevel}, ${cost.baselineServerUs.toFixed(0)} µs at warn: throughput where the server's core is the limit ${(cost.baselineServerUs / cost.serverUs).toFixed(2)} of unlogged (aim at least 0.90)`,
    );
  failOnBadRuns(results);
});

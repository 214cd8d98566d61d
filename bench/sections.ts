/**
 * `npm run bench`: authenticated GET /audience/sections of the real server against a bare
 * `node:http` server answering the same JSON body, measured alternately in one run with wrk (or
 * autocannon where wrk is not installed). The server runs as `npm start` runs it, logging every
 * request (LOG_LEVEL=info, its log in a file); beside it, on the same database, the same server at
 * LOG_LEVEL=warn (no request lines), so that the cost of the request log is measured in the same run:
 * two servers at each level, each round in another order, their figures pooled by level.
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
  type Load,
  type Measured,
  type Server,
} from './harness.ts';

/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 240_000 + LOAD.rounds * 5 * (LOAD.warmupS + LOAD.durationS) * 1000 * 1.5;
const PATH = '/audience/sections';

await runBench(DEADLINE_MS, async (autocannon) => {
  printSetting();

  // The measured servers run beside the first one, on its database: the same kind of process (the
  // first one's own PostgreSQL is its child; theirs is not), differing only in the log level. Two
  // at each level, started info, warn, warn, info: in runs of identical servers the CPU time per
  // request drifted with the order they were started in (5–10% from the first to the last), which
  // this order cancels.
  const first = await startAudience();
  const audience = await startBeside(first, first.logLevel);
  const quiet = await startBeside(first, 'warn');
  const quiet2 = await startBeside(first, 'warn');
  const audience2 = await startBeside(first, first.logLevel);
  const sections = await request(`${audience.url}${PATH}`, { headers: { authorization: `Bearer ${audience.token}` } });
  if (sections.status !== 200) throw new Error(`GET ${PATH}: ${sections.status} ${sections.text}`);
  const body = sections.text;
  const bare = await startBare(body);
  const check = await request(`${bare.url}${PATH}`);
  if (check.text !== body) throw new Error('the bare server does not answer the same body');
  console.log(
    `body: ${Buffer.byteLength(body)} bytes, ${(JSON.parse(body) as { items: unknown[] }).items.length} sections`,
  );

  const load = { path: PATH, headers: { authorization: `Bearer ${audience.token}` } };
  const targets: [string, Server, Load][] = [
    ['bare node:http', bare, { path: PATH }],
    ['audience', audience, load],
    ['audience warn', quiet, load],
    ['audience warn 2', quiet2, load],
    ['audience 2', audience2, load],
  ];
  const results: Measured[] = [];
  for (let round = 1; round <= LOAD.rounds; round++) {
    // Each round starts one further along, so that no server is always measured after the same one.
    const turn = (round - 1) % targets.length;
    for (const [target, server, asked] of [...targets.slice(turn), ...targets.slice(0, turn)])
      results.push(await measure(autocannon, target, round, server, asked));
  }
  // Each level's two servers as one: their requests and CPU time summed in each round.
  const pooled = [...results];
  for (let round = 1; round <= LOAD.rounds; round++)
    for (const [target, pair] of [
      ['audience both', ['audience', 'audience 2']],
      ['audience warn both', ['audience warn', 'audience warn 2']],
    ] as const)
      pooled.push(
        pool(
          target,
          pair.map((t) => results.find((r) => r.target === t && r.round === round)!),
        ),
      );
  const logged = (await logLines(audience)) + (await logLines(audience2));

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
  const names: Record<string, string> = {
    audience: `audience (LOG_LEVEL=${audience.logLevel})`,
    'audience 2': `audience (LOG_LEVEL=${audience.logLevel}), second`,
    'audience warn': 'audience (LOG_LEVEL=warn)',
    'audience warn 2': 'audience (LOG_LEVEL=warn), second',
  };
  for (let round = 1; round <= LOAD.rounds; round++) {
    const b = results.find((r) => r.target === 'bare node:http' && r.round === round)!;
    rows.push(row(b.target, b));
    for (const [target, label] of Object.entries(names))
      rows.push(
        row(
          label,
          results.find((r) => r.target === target && r.round === round)!,
          b,
        ),
      );
  }
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(`log: ${logged} lines written by the servers at LOG_LEVEL=${audience.logLevel}`);
  console.log(
    summaryLine(
      `GET /audience/sections, LOG_LEVEL=${audience.logLevel}`,
      summary(pooled, 'audience both', 'bare node:http'),
      0.5,
    ),
  );
  console.log(
    summaryLine(
      'GET /audience/sections, LOG_LEVEL=warn',
      summary(pooled, 'audience warn both', 'bare node:http'),
      0.5,
      { target: 'audience warn', baseline: 'bare' },
    ),
  );
  // What the request log costs: the logged servers over the same servers not logging requests; on
  // a shared machine the servers' CPU time per request varies less than their throughput.
  const cost = summary(pooled, 'audience both', 'audience warn both');
  console.log(
    summaryLine('GET /audience/sections', cost, 0.9, {
      target: `audience ${audience.logLevel}`,
      baseline: 'audience warn',
    }),
  );
  if (cost.serverUs !== undefined && cost.baselineServerUs !== undefined)
    console.log(
      `request log: server CPU per request ${cost.serverUs.toFixed(1)} µs at ${audience.logLevel}, ${cost.baselineServerUs.toFixed(1)} µs at warn: throughput where the server's core is the limit ${(cost.baselineServerUs / cost.serverUs).toFixed(2)} of unlogged (aim at least 0.90)`,
    );
  failOnBadRuns(results);
});

/** Two servers' measures of one round as one: requests per second averaged, CPU time per request over both. */
function pool(target: string, [a, b]: Measured[]): Measured {
  const total = a.total + b.total;
  const weighted = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : (x * a.total + y * b.total) / total;
  return {
    ...a,
    target,
    rps: (a.rps + b.rps) / 2,
    mean: (a.mean + b.mean) / 2,
    total,
    serverCpuUsPerRequest: weighted(a.serverCpuUsPerRequest, b.serverCpuUsPerRequest),
    dbCpuUsPerRequest: weighted(a.dbCpuUsPerRequest, b.dbCpuUsPerRequest),
    clientCpuShare: (a.clientCpuShare + b.clientCpuShare) / 2,
  };
}

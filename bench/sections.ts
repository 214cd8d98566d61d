/**
 * `npm run bench`: authenticated GET /audience/sections of the real server against a bare
 * `node:http` server answering the same JSON body, measured alternately in one run with wrk (or
 * autocannon where wrk is not installed). The server runs as `npm start` runs it, logging every
 * request (LOG_LEVEL=info, its log in a file); beside it, on the same database, the same server at
 * LOG_LEVEL=warn (no request lines), so that the cost of the request log is measured in the same run:
 * BENCH_SERVERS (3) servers at each level, each round in another order, their figures pooled by level.
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
  type Audience,
  type Load,
  type Measured,
  type Server,
} from './harness.ts';

/** How many servers are measured at each log level (BENCH_SERVERS). */
const PER_LEVEL = Math.max(1, Number(process.env.BENCH_SERVERS ?? 3));
/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 300_000 + LOAD.rounds * (1 + 2 * PER_LEVEL) * (LOAD.warmupS + LOAD.durationS) * 1000 * 1.5;
const PATH = '/audience/sections';

await runBench(DEADLINE_MS, async (autocannon) => {
  printSetting();

  // The measured servers run beside the first one, on its database: the same kind of process (the
  // first one's own PostgreSQL is its child; theirs is not), differing only in the log level.
  // Identical servers differed by 5-10% in CPU time per request, steadily from round to round, so
  // there are BENCH_SERVERS (3) at each level, started in an order balanced between the levels
  // (info, warn, warn, info, info, warn, …), and their figures are pooled by level.
  const first = await startAudience();
  const levels = Array.from({ length: 2 * PER_LEVEL }, (_, i) =>
    i % 4 === 0 || i % 4 === 3 ? first.logLevel : 'warn',
  );
  const servers: { target: string; label: string; server: Audience }[] = [];
  for (const level of levels) {
    const n = servers.filter((s) => s.server.logLevel === level).length + 1;
    const target = level === 'warn' ? `audience warn ${n}` : `audience ${n}`;
    servers.push({ target, label: `audience (LOG_LEVEL=${level}) ${n}`, server: await startBeside(first, level) });
  }
  const token = first.token;
  const sections = await request(`${servers[0].server.url}${PATH}`, { headers: { authorization: `Bearer ${token}` } });
  if (sections.status !== 200) throw new Error(`GET ${PATH}: ${sections.status} ${sections.text}`);
  const body = sections.text;
  const bare = await startBare(body);
  const check = await request(`${bare.url}${PATH}`);
  if (check.text !== body) throw new Error('the bare server does not answer the same body');
  console.log(
    `body: ${Buffer.byteLength(body)} bytes, ${(JSON.parse(body) as { items: unknown[] }).items.length} sections`,
  );

  const load = { path: PATH, headers: { authorization: `Bearer ${token}` } };
  const targets: [string, Server, Load][] = [
    ['bare node:http', bare, { path: PATH }],
    ...servers.map(({ target, server }): [string, Server, Load] => [target, server, load]),
  ];
  const results: Measured[] = [];
  for (let round = 1; round <= LOAD.rounds; round++) {
    // Each round starts one further along, so that no server is always measured after the same one.
    const turn = (round - 1) % targets.length;
    for (const [target, server, asked] of [...targets.slice(turn), ...targets.slice(0, turn)])
      results.push(await measure(autocannon, target, round, server, asked));
  }
  // Each level's servers as one: their requests and CPU time summed in each round.
  const logged = servers.filter((s) => s.server.logLevel !== 'warn');
  const quiet = servers.filter((s) => s.server.logLevel === 'warn');
  const pooled = [...results];
  for (let round = 1; round <= LOAD.rounds; round++)
    for (const [target, group] of [
      ['audience', logged],
      ['audience warn', quiet],
    ] as const)
      pooled.push(
        pool(
          target,
          group.map((s) => results.find((r) => r.target === s.target && r.round === round)!),
        ),
      );
  let lines = 0;
  for (const { server } of logged) lines += await logLines(server);

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
    rows.push(row(b.target, b));
    for (const { target, label } of servers)
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
  console.log(`log: ${lines} lines written by the servers at LOG_LEVEL=${first.logLevel}`);
  console.log(
    summaryLine(
      `GET /audience/sections, LOG_LEVEL=${first.logLevel}`,
      summary(pooled, 'audience', 'bare node:http'),
      0.5,
    ),
  );
  console.log(
    summaryLine('GET /audience/sections, LOG_LEVEL=warn', summary(pooled, 'audience warn', 'bare node:http'), 0.5, {
      target: 'audience warn',
      baseline: 'bare',
    }),
  );
  // What the request log costs: the logged servers over the same servers not logging requests; on
  // a shared machine the servers' CPU time per request varies less than their throughput.
  const cost = summary(pooled, 'audience', 'audience warn');
  console.log(
    summaryLine('GET /audience/sections', cost, 0.9, {
      target: `audience ${first.logLevel}`,
      baseline: 'audience warn',
    }),
  );
  if (cost.serverUs !== undefined && cost.baselineServerUs !== undefined)
    console.log(
      `request log: server CPU per request ${cost.serverUs.toFixed(1)} µs at ${first.logLevel}, ${cost.baselineServerUs.toFixed(1)} µs at warn: throughput where the server's core is the limit ${(cost.baselineServerUs / cost.serverUs).toFixed(2)} of unlogged (aim at least 0.90)`,
    );
  failOnBadRuns(results);
});

/** Servers' measures of one round as one: requests per second averaged, CPU time per request over them all. */
function pool(target: string, measures: Measured[]): Measured {
  const total = measures.reduce((n, m) => n + m.total, 0);
  const mean = (of: (m: Measured) => number) => measures.reduce((n, m) => n + of(m), 0) / measures.length;
  const weighted = (of: (m: Measured) => number | undefined) =>
    measures.some((m) => of(m) === undefined) ? undefined : measures.reduce((n, m) => n + of(m)! * m.total, 0) / total;
  return {
    ...measures[0],
    target,
    rps: mean((m) => m.rps),
    mean: mean((m) => m.mean),
    total,
    serverCpuUsPerRequest: weighted((m) => m.serverCpuUsPerRequest),
    dbCpuUsPerRequest: weighted((m) => m.dbCpuUsPerRequest),
    clientCpuShare: mean((m) => m.clientCpuShare),
  };
}

/**
 * `npm run bench`: authenticated GET /audience/sections of the real server against a bare
 * `node:http` server answering the same JSON body, measured alternately in one run with autocannon.
 *
 * Both servers run in their own child process on loopback; autocannon runs in this process. The
 * machine is shared and noisy, so what counts is the ratio audience/bare of the same run, not the
 * absolute figures. Everything is bounded in time and cleaned up (child processes, temp dir) on
 * failure too; the audience server gets SIGTERM so that it stops its embedded PostgreSQL.
 *
 * Tuning through the environment: BENCH_CONNECTIONS (50), BENCH_WARMUP_S (3), BENCH_DURATION_S (10),
 * BENCH_ROUNDS (2), BENCH_SERVER_ARGS (extra node flags for the audience server, e.g. "--cpu-prof").
 * The shared pieces are in bench/harness.ts.
 */
import {
  best, DURATION_S, failOnBadRuns, measure, printSetting, request, ROUNDS, runBench, share, startAudience, startBare, table, usPerRequest, WARMUP_S,
  type Measured,
} from './harness.ts';

/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 120_000 + ROUNDS * 2 * (WARMUP_S + DURATION_S) * 1000 * 1.5;
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
  console.log(`body: ${Buffer.byteLength(body)} bytes, ${(JSON.parse(body) as { items: unknown[] }).items.length} sections`);

  const results: Measured[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    results.push(await measure(autocannon, 'bare node:http', round, bare, { path: PATH }));
    results.push(await measure(autocannon, 'audience', round, audience, { path: PATH, headers: { authorization: `Bearer ${audience.token}` } }));
  }

  const bestBare = best(results, 'bare node:http');
  const bestAudience = best(results, 'audience');
  const row = (label: string, m: Measured, ratioTo?: Measured) => [
    label, String(m.round), m.rps.toFixed(0), m.mean.toFixed(2), String(m.p50), String(m.p99), usPerRequest(m.serverCpuUsPerRequest), share(m.serverCpuShare), share(m.clientCpuShare),
    ratioTo ? (m.rps / ratioTo.rps).toFixed(2) : '',
  ];
  const rows = [['target', 'round', 'requests/s', 'mean ms', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'server CPU', 'client CPU', 'audience/bare']];
  for (let round = 1; round <= ROUNDS; round++) {
    const b = results.find((r) => r.target === 'bare node:http' && r.round === round)!;
    const a = results.find((r) => r.target === 'audience' && r.round === round)!;
    rows.push(row(b.target, b), row(a.target, a, b));
  }
  rows.push(row('best bare node:http', bestBare), row('best audience', bestAudience, bestBare));
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(`ratio audience/bare (best of each): ${(bestAudience.rps / bestBare.rps).toFixed(2)} (aim: at least 0.50)`);
  if (bestAudience.serverCpuUsPerRequest !== undefined && bestBare.serverCpuUsPerRequest !== undefined) {
    console.log(`server CPU per request audience/bare (best runs): ${(bestAudience.serverCpuUsPerRequest / bestBare.serverCpuUsPerRequest).toFixed(2)}`);
  }
  failOnBadRuns(results);
});

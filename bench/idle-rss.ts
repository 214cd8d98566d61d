/**
 * `npm run bench:idle-rss`: the resident memory of the program at idle, after a start on a fresh
 * DATA_DIR and a few requests, of the program's own process (not its PostgreSQL), for the roles
 * `serve` (API and worker thread, what `npm start` runs), `api` and `worker`; and, in the same run,
 * what a bare `node` and a trivial TypeScript file measure, the floor under any program.
 *
 * Each run starts every role in turn (`node src/main.ts <role>` with its own temp DATA_DIR and
 * embedded PostgreSQL, on a free loopback port), waits for /readyz, makes the requests of a client
 * that has just connected (a token, the sections, a metrics scrape), waits BENCH_IDLE_SETTLE_S for
 * the heap to settle, reads VmRSS and VmHWM (the peak since the start) from /proc/<pid>/status and
 * stops it. Runs alternate the roles, so that a slower stretch of the shared machine hits them all.
 *
 * Settings from the environment: BENCH_IDLE_RUNS (5), BENCH_IDLE_SETTLE_S (10), BENCH_IDLE_ROLES
 * (serve,api,worker), BENCH_SERVER_ARGS (extra node flags for the program, e.g.
 * "--max-semi-space-size=8"), and BENCH_IDLE_LOAD_S (0): seconds of load (autocannon, 10
 * connections, GET /audience/sections with the demo account's request limit lifted) before the
 * wait, for the idle memory of a server that has had traffic. Needs Linux (/proc).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  demoToken,
  log,
  onCleanup,
  request,
  runBench,
  sleep,
  startProgram,
  stopProgram,
  table,
  within,
  type Autocannon,
  type Program,
} from './harness.ts';

const RUNS = Math.max(1, Number(process.env.BENCH_IDLE_RUNS ?? 5));
const SETTLE_S = Number(process.env.BENCH_IDLE_SETTLE_S ?? 10);
const LOAD_S = Number(process.env.BENCH_IDLE_LOAD_S ?? 0);
const ROLES = (process.env.BENCH_IDLE_ROLES ?? 'serve,api,worker').split(',').map((r) => r.trim()) as (
  'serve' | 'api' | 'worker'
)[];
/** The baselines hold nothing that settles: a short wait is enough. */
const BASELINE_WAIT_S = 2;
const DEADLINE_MS = 60_000 + RUNS * (ROLES.length * (40 + SETTLE_S + LOAD_S * 1.5) + 2 * (10 + BASELINE_WAIT_S)) * 1000;

interface Sample {
  rss: number;
  hwm: number;
  anon: number;
  file: number;
}

/** VmRSS, VmHWM, RssAnon and RssFile of a process, in MB (/proc/<pid>/status gives kB). */
async function memoryOf(pid: number): Promise<Sample> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]) / 1024;
  };
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** What a client that has just connected does: a token, the sections a few times, and a metrics scrape. */
async function requests(program: Program, role: string): Promise<void> {
  const expect = async (what: string, answer: Promise<{ status: number; text: string }>) => {
    const { status, text } = await answer;
    if (status !== 200) throw new Error(`${role}: ${what}: ${status} ${text.slice(0, 200)}`);
  };
  if (role !== 'worker') {
    const token = await demoToken(program);
    for (let i = 0; i < 5; i++)
      await expect(
        'GET /audience/sections',
        request(`${program.url}/audience/sections`, { headers: { authorization: `Bearer ${token}` } }),
      );
  }
  await expect(
    'GET /metrics',
    request(`${program.url}/metrics`, { headers: { authorization: `Bearer ${program.adminToken}` } }),
  );
}

/** LOAD_S seconds of GET /audience/sections, with the demo account's request limit lifted. */
async function load(autocannon: Autocannon, program: Program): Promise<void> {
  const demo = JSON.parse(await fs.readFile(path.join(program.dataDir, 'demo-credentials.json'), 'utf8')) as {
    account_id: string;
  };
  const lifted = await request(`${program.url}/admin/accounts/${encodeURIComponent(demo.account_id)}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${program.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ limits: { requests_per_second: null } }),
  });
  if (lifted.status !== 200)
    throw new Error(`lifting the demo account's request limit: ${lifted.status} ${lifted.text}`);
  const token = await demoToken(program);
  const run = autocannon({
    url: `${program.url}/audience/sections`,
    headers: { authorization: `Bearer ${token}` },
    connections: 10,
    pipelining: 1,
    duration: LOAD_S,
    timeout: 10,
  });
  const result = await within(LOAD_S * 1000 + 30_000, 'load', run).catch((err: Error) => {
    run.stop();
    throw err;
  });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`load: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  log(`load: ${result.requests.total} requests in ${LOAD_S} s`);
}

/** A node process running `args` until it is stopped: its memory after BASELINE_WAIT_S. */
async function baseline(args: string[]): Promise<Sample> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  onCleanup(stop);
  try {
    await sleep(BASELINE_WAIT_S * 1000);
    if (child.exitCode !== null) throw new Error(`node ${args.join(' ')} exited with ${child.exitCode}`);
    return await memoryOf(child.pid!);
  } finally {
    await stop();
  }
}

const mb = (v: number) => v.toFixed(0);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

await runBench(DEADLINE_MS, async (autocannon) => {
  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; ${(os.totalmem() / 2 ** 30).toFixed(0)} GB; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `node ${process.version}; ${RUNS} runs; roles ${ROLES.join(', ')}; ${LOAD_S > 0 ? `${LOAD_S} s of load, then ` : ''}${SETTLE_S} s to settle after the requests${process.env.BENCH_SERVER_ARGS ? `; program flags: ${process.env.BENCH_SERVER_ARGS}` : ''}`,
  );
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-idle-'));
  onCleanup(() => fs.rm(scratch, { recursive: true, force: true }));
  // The floor of any TypeScript program run by type stripping: Node loads its transpiler for it.
  const trivial = path.join(scratch, 'idle.ts');
  await fs.writeFile(trivial, 'const forever: number = 2 ** 30;\nsetInterval(() => {}, forever);\nexport {};\n');

  const samples = new Map<string, Sample[]>();
  const add = (target: string, sample: Sample) => {
    samples.set(target, [...(samples.get(target) ?? []), sample]);
    log(
      `${target}: VmRSS ${mb(sample.rss)} MB, VmHWM ${mb(sample.hwm)} MB (anonymous ${mb(sample.anon)}, file ${mb(sample.file)})`,
    );
  };
  for (let run = 1; run <= RUNS; run++) {
    log(`run ${run} of ${RUNS}`);
    for (const role of ROLES) {
      const program = await startProgram(role);
      await requests(program, role);
      if (LOAD_S > 0 && role !== 'worker') await load(autocannon, program);
      await sleep(SETTLE_S * 1000);
      add(role, await memoryOf(program.pid!));
      await stopProgram(program);
    }
    add('bare node', await baseline(['-e', 'setInterval(() => {}, 2 ** 30)']));
    add('trivial .ts', await baseline([trivial]));
  }

  const rows = [
    [
      'target',
      'runs',
      'VmRSS min',
      'VmRSS median',
      'VmRSS max',
      'VmHWM min',
      'VmHWM median',
      'VmHWM max',
      'RssAnon median',
      'RssFile median',
    ],
  ];
  for (const [target, list] of samples) {
    const of = (pick: (s: Sample) => number) => list.map(pick);
    const rss = of((s) => s.rss);
    const hwm = of((s) => s.hwm);
    rows.push([
      target,
      String(list.length),
      mb(Math.min(...rss)),
      mb(median(rss)),
      mb(Math.max(...rss)),
      mb(Math.min(...hwm)),
      mb(median(hwm)),
      mb(Math.max(...hwm)),
      mb(median(of((s) => s.anon))),
      mb(median(of((s) => s.file))),
    ]);
  }
  console.log('');
  console.log("MB (MiB), the program's process only (not its PostgreSQL):");
  console.log(table(rows));
  const serve = samples.get('serve');
  if (serve) console.log(`\nserve, VmRSS median: ${mb(median(serve.map((s) => s.rss)))} MB (aim: under 150 MB)`);
});

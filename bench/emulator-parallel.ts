import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { createNamespace, startEmulator, type Namespace } from '../clients/testing/src/index.ts';

/**
 * Parallel test workers on one emulator (docs/emulator.md "Namespaces", docs/benchmarks.md
 * "Emulator: parallel test workers"): one `audience emulate` of the one-file fixture with manual
 * jobs; first one worker runs TESTS tests (the baseline), then WORKERS worker processes run TESTS
 * tests each at once. Each test makes its namespace and checks that it sees only its own data,
 * request log and mail: a tag of its own, a transactional message of its own, both read back.
 *
 *   node bench/emulator-parallel.ts            # 8 workers × 50 tests
 *   BENCH_WORKERS=4 BENCH_TESTS=20 node bench/emulator-parallel.ts
 */

const FIXTURE = path.join(import.meta.dirname, '..', 'examples', 'emulator-fixture.json');
const SHOP = 'com.acme1.sections.user-created.shop';
const EMAIL = 'com.acme1.keyspaces.email';

interface WorkerReport {
  tests: number;
  failures: string[];
  /** Milliseconds of each test. */
  times: number[];
  /** CPU seconds the worker process used (user + system). */
  cpu: number;
}

async function call(ns: Namespace, token: string, method: string, url: string, body?: unknown) {
  const res = await fetch(ns.baseUrl + url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** One test: its namespace, a tag and a message of its own, and what it sees of them. Answers what went wrong, if anything. */
async function oneTest(baseUrl: string, name: string): Promise<string | undefined> {
  const ns = await createNamespace(baseUrl);
  const token = await ns.token();
  const tag = `Tag ${name}`;
  const to = `${name}@example.com`;
  const created = await call(ns, token, 'POST', `/audience/sections/${SHOP}/tags`, { name: tag });
  if (created.status !== 201) return `tag: ${created.status}`;
  const sent = await call(
    ns,
    token,
    'POST',
    `/emails/sections/${SHOP}/activities/transactional/order-confirmation/transactions`,
    {
      keyspace_discriminator: EMAIL,
      profile_key: to,
      to_name: name,
      to_email_address: to,
      variables: { order: name },
    },
  );
  if (sent.status !== 201) return `send: ${sent.status}`;
  await ns.control.jobs.run();
  // Data: of the tags tests made, only its own.
  const tags = (await call(ns, token, 'GET', `/audience/sections/${SHOP}/tags`)).body.items.map(
    (t: { name: string }) => t.name,
  );
  const made = tags.filter((t: string) => t.startsWith('Tag '));
  if (made.length !== 1 || made[0] !== tag) return `tags seen: ${made.join(', ')}`;
  // The request log: its requests only, all of them there.
  const log = await ns.control.requests.list();
  if (log.some((r) => r.namespace !== ns.id)) return 'a request of another namespace in the log';
  if (log.length !== 4) return `${log.length} requests in the log, not 4`;
  // Mail: its message only.
  const mail = await ns.control.mail.list();
  if (mail.length !== 1 || mail[0].to.join() !== to || mail[0].subject !== `Your order ${name}`)
    return `mail seen: ${mail.map((m) => m.to.join()).join('; ')}`;
  return undefined;
}

/** A worker: its tests one after the other, reported to the parent. */
async function worker(baseUrl: string, id: string, tests: number): Promise<WorkerReport> {
  const report: WorkerReport = { tests, failures: [], times: [], cpu: 0 };
  for (let i = 0; i < tests; i++) {
    const started = performance.now();
    const failure = await oneTest(baseUrl, `w${id}-t${i}`).catch((err: Error) => err.message);
    report.times.push(performance.now() - started);
    if (failure) report.failures.push(`w${id} t${i}: ${failure}`);
  }
  const usage = process.cpuUsage();
  report.cpu = (usage.user + usage.system) / 1e6;
  return report;
}

function runWorkers(baseUrl: string, workers: number, tests: number): Promise<WorkerReport[]> {
  return Promise.all(
    Array.from(
      { length: workers },
      (_, i) =>
        new Promise<WorkerReport>((resolve, reject) => {
          const child = fork(import.meta.filename, ['worker', baseUrl, String(i), String(tests)]);
          child.once('message', (m) => resolve(m as WorkerReport));
          child.once('exit', (code) => code !== 0 && reject(new Error(`worker ${i} exited with ${code}`)));
        }),
    ),
  );
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)];

async function main(): Promise<void> {
  const workers = Number(process.env.BENCH_WORKERS ?? 8);
  const tests = Number(process.env.BENCH_TESTS ?? 50);
  const emulator = await startEmulator({ vendor: 'acme', manifest: FIXTURE, jobs: 'manual', timeoutMs: 300_000 });
  try {
    const round = async (n: number) => {
      const load = os.loadavg()[0];
      const started = performance.now();
      const reports = await runWorkers(emulator.baseUrl, n, tests);
      const wall = performance.now() - started;
      const times = reports.flatMap((r) => r.times);
      const failures = reports.flatMap((r) => r.failures);
      const cpu = reports.reduce((sum, r) => sum + r.cpu, 0);
      return { n, wall, times, failures, cpu, load: [load, os.loadavg()[0]] };
    };
    const baseline = await round(1);
    const parallel = await round(workers);
    for (const r of [baseline, parallel])
      console.log(
        `${r.n} worker(s) × ${tests} tests: ${(r.wall / 1000).toFixed(1)} s wall, ${((r.n * tests) / (r.wall / 1000)).toFixed(1)} tests/s, ` +
          `a test median ${median(r.times).toFixed(0)} ms, p95 ${p95(r.times).toFixed(0)} ms; ` +
          `workers' CPU ${r.cpu.toFixed(1)} s; cross-talk or failures: ${r.failures.length}; ` +
          `load average ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)}`,
      );
    for (const f of [...baseline.failures, ...parallel.failures].slice(0, 10)) console.log(`  ${f}`);
    const throughput = (parallel.n * tests) / parallel.wall / (tests / baseline.wall);
    console.log(
      `ratio: ${workers} workers' wall time / 1 worker's = ${(parallel.wall / baseline.wall).toFixed(2)}; throughput ×${throughput.toFixed(2)}`,
    );
    if (baseline.failures.length + parallel.failures.length > 0) process.exitCode = 1;
  } finally {
    await emulator.stop();
  }
}

if (process.argv[2] === 'worker') {
  const [, , , baseUrl, id, tests] = process.argv;
  const report = await worker(baseUrl, id, Number(tests));
  process.send!(report, () => process.exit(0));
} else {
  await main();
}

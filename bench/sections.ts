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
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// ---- The bench ----

interface Histogram { average: number; mean: number; p50: number; p99: number; max: number }
interface Result {
  requests: Histogram & { total: number; sent: number };
  latency: Histogram;
  throughput: Histogram;
  errors: number;
  timeouts: number;
  non2xx: number;
  duration: number;
}
/** The instance autocannon returns: a thenable of the result, which can be stopped. */
interface Run extends PromiseLike<Result> { stop(): void }
type Autocannon = (options: { url: string; connections: number; duration: number; pipelining: number; timeout: number; headers?: Record<string, string> }) => Run;

const require = createRequire(import.meta.url);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const ROUNDS = Math.min(5, Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2)));
/** The whole run, start-up and clean-up included. */
const DEADLINE_MS = 120_000 + ROUNDS * 2 * (WARMUP_S + DURATION_S) * 1000 * 1.5;

interface Measured {
  target: string; round: number; rps: number; mean: number; p50: number; p99: number;
  non2xx: number; errors: number; timeouts: number; total: number;
  /** The server process's CPU time (user + system) per answered request, from /proc. */
  serverCpuUsPerRequest: number | undefined;
  serverCpuShare: number | undefined;
  /** This process's (autocannon's) CPU time over wall time: near 1 means the client was the limit. */
  clientCpuShare: number;
}

const children: { child: ChildProcess; name: string; postmasterPidFile?: string }[] = [];
let tempDir: string | undefined;
let cleaning: Promise<void> | undefined;

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects after `ms` with `what` in the message. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    Promise.resolve(promise).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms); }),
  ]);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM, then SIGKILL after `graceMs`; for the audience server also its PostgreSQL if it outlived it. */
async function stopChild(entry: (typeof children)[number], graceMs: number): Promise<void> {
  const { child, name } = entry;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    try {
      await within(graceMs, `${name} stop`, exited(child));
    } catch {
      log(`${name} did not stop within ${graceMs} ms; killing it`);
      child.kill('SIGKILL');
      await within(5000, `${name} kill`, exited(child)).catch(() => {});
    }
  }
  if (entry.postmasterPidFile) {
    // The embedded PostgreSQL this server started, when the server could not stop it itself.
    const pid = Number((await fs.readFile(entry.postmasterPidFile, 'utf8').catch(() => '')).split('\n')[0]);
    // Only that PostgreSQL: a stale pid file must not make us signal another process.
    const cmdline = Number.isInteger(pid) && pid > 1 ? await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '') : '';
    if (cmdline.includes(path.dirname(entry.postmasterPidFile))) {
      try {
        process.kill(pid, 'SIGTERM');
        log(`stopped the leftover PostgreSQL (pid ${pid})`);
        for (let i = 0; i < 50; i++) {
          await sleep(100);
          process.kill(pid, 0);
        }
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.all(children.map((c) => stopChild(c, 30_000)));
    if (tempDir) await fs.rm(tempDir, { recursive: true, force: true }).catch((err: Error) => log(`could not remove ${tempDir}: ${err.message}`));
  })();
  return cleaning;
}

/** CPU time (user + system, ms) a process has used so far, from /proc; undefined where there is no /proc. */
async function cpuMsOf(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15, in 1/100 s.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function startBare(body: string): Promise<{ url: string; pid: number | undefined }> {
  const child = fork(fileURLToPath(import.meta.url), ['bare'], { env: { ...process.env, BENCH_BODY: body }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push({ child, name: 'bare server' });
  const port = await within(15_000, 'bare server start', new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`bare server exited with ${code}`)));
  }));
  return { url: `http://127.0.0.1:${port}`, pid: child.pid };
}

async function request(url: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, text: await res.text() };
}

async function startAudience(): Promise<{ url: string; pid: number | undefined; token: string; body: string }> {
  tempDir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-bench-'));
  // As root, the embedded PostgreSQL runs as the postgres user, which must traverse the data directory.
  await fs.chmod(tempDir, 0o755);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const extraArgs = (process.env.BENCH_SERVER_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
  const child = spawn(NODE, [...extraArgs, 'src/main.ts', 'serve'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: tempDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push({ child, name: 'audience server', postmasterPidFile: path.join(tempDir, 'postgres', 'cluster', 'postmaster.pid') });
  let exitCode: number | null | undefined;
  child.once('exit', (code) => { exitCode = code; });

  // Ready: /readyz answers 200 (the embedded PostgreSQL initialises its cluster first).
  const started = Date.now();
  for (;;) {
    if (exitCode !== undefined) throw new Error(`audience server exited with ${exitCode} before it was ready`);
    if (Date.now() - started > 90_000) throw new Error('audience server not ready within 90 s');
    const ready = await request(`${url}/readyz`).catch(() => undefined);
    if (ready?.status === 200) break;
    await sleep(250);
  }
  log(`audience server ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const demo = JSON.parse(await fs.readFile(path.join(tempDir, 'demo-credentials.json'), 'utf8')) as { account_id: string; client_id: string; client_secret: string };
  const adminToken = (await fs.readFile(path.join(tempDir, 'admin-token'), 'utf8')).trim();
  const lifted = await request(`${url}/admin/accounts/${encodeURIComponent(demo.account_id)}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ limits: { requests_per_second: null, token_requests_per_minute: null } }),
  });
  if (lifted.status !== 200) throw new Error(`lifting the demo account's limits: ${lifted.status} ${lifted.text}`);
  const issued = await request(`${url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: demo.client_id, client_secret: demo.client_secret }),
  });
  if (issued.status !== 200) throw new Error(`token: ${issued.status} ${issued.text}`);
  const token = (JSON.parse(issued.text) as { access_token: string }).access_token;
  const sections = await request(`${url}/audience/sections`, { headers: { authorization: `Bearer ${token}` } });
  if (sections.status !== 200) throw new Error(`GET /audience/sections: ${sections.status} ${sections.text}`);
  return { url, pid: child.pid, token, body: sections.text };
}

async function measure(autocannon: Autocannon, target: string, round: number, server: { url: string; pid: number | undefined }, headers: Record<string, string>): Promise<Measured> {
  const url = `${server.url}/audience/sections`;
  const common = { url, connections: CONNECTIONS, pipelining: 1, timeout: 10, headers };
  const run = async (what: string, duration: number): Promise<Result> => {
    const instance = autocannon({ ...common, duration });
    try {
      return await within(duration * 1000 + 30_000, `${target} ${what}`, Promise.resolve(instance));
    } catch (err) {
      instance.stop();
      throw err;
    }
  };
  if (WARMUP_S > 0) await run('warm-up', WARMUP_S);
  const serverBefore = await cpuMsOf(server.pid);
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  const r = await run('run', DURATION_S);
  const elapsedMs = performance.now() - started;
  const clientUsage = process.cpuUsage(clientBefore);
  const serverAfter = await cpuMsOf(server.pid);
  const serverCpuMs = serverBefore === undefined || serverAfter === undefined ? undefined : serverAfter - serverBefore;
  const m = {
    target, round, rps: r.requests.average, mean: r.latency.mean,
    serverCpuUsPerRequest: serverCpuMs === undefined ? undefined : (serverCpuMs * 1000) / r.requests.total,
    serverCpuShare: serverCpuMs === undefined ? undefined : serverCpuMs / elapsedMs,
    clientCpuShare: (clientUsage.user + clientUsage.system) / 1000 / elapsedMs, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts, total: r.requests.total };
  const cpu = m.serverCpuUsPerRequest === undefined ? '' : `, server CPU ${m.serverCpuUsPerRequest.toFixed(0)} µs/request (${(100 * m.serverCpuShare!).toFixed(0)}% of a core)`;
  log(`round ${round} ${target}: ${m.rps.toFixed(0)} req/s, mean ${m.mean.toFixed(2)} ms, p50 ${m.p50} ms, p99 ${m.p99} ms, ${m.total} requests, ${m.non2xx} non-2xx, ${m.errors} errors${cpu}, autocannon ${(100 * m.clientCpuShare).toFixed(0)}% of a core`);
  return m;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) => '| ' + r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ') + ' |';
  return [line(rows[0]), '|' + widths.map((w, i) => (i === 0 ? '-'.repeat(w + 1) + '-' : '-'.repeat(w + 1) + ':')).join('|') + '|', ...rows.slice(1).map(line)].join('\n');
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    log(`the run took over ${Math.round(DEADLINE_MS / 1000)} s; stopping`);
    void cleanup().finally(() => process.exit(1));
  }, DEADLINE_MS);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    const autocannon = require('autocannon') as Autocannon;
    const cpus = os.cpus();
    console.log(`machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log(`node ${process.version}; autocannon ${CONNECTIONS} connections, keep-alive, ${WARMUP_S} s warm-up + ${DURATION_S} s measured per run, ${ROUNDS} alternating rounds`);

    const audience = await startAudience();
    const bare = await startBare(audience.body);
    const check = await request(`${bare.url}/audience/sections`);
    if (check.text !== audience.body) throw new Error('the bare server does not answer the same body');
    console.log(`body: ${Buffer.byteLength(audience.body)} bytes, ${(JSON.parse(audience.body) as { items: unknown[] }).items.length} sections`);

    const results: Measured[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      results.push(await measure(autocannon, 'bare node:http', round, bare, {}));
      results.push(await measure(autocannon, 'audience', round, audience, { authorization: `Bearer ${audience.token}` }));
    }
    const bad = results.filter((r) => r.non2xx > 0 || r.errors > 0 || r.timeouts > 0);

    const best = (target: string) => results.filter((r) => r.target === target).reduce((a, b) => (b.rps > a.rps ? b : a));
    const bestBare = best('bare node:http');
    const bestAudience = best('audience');
    const us = (m: Measured) => (m.serverCpuUsPerRequest === undefined ? 'n/a' : m.serverCpuUsPerRequest.toFixed(0));
    const share = (v: number | undefined) => (v === undefined ? 'n/a' : `${(100 * v).toFixed(0)}%`);
    const row = (label: string, m: Measured, ratioTo?: Measured) => [
      label, String(m.round), m.rps.toFixed(0), m.mean.toFixed(2), String(m.p50), String(m.p99), us(m), share(m.serverCpuShare), share(m.clientCpuShare),
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
    if (bad.length > 0) {
      for (const r of bad) console.log(`WARNING: round ${r.round} ${r.target}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`);
      process.exitCode = 1;
    }
  } catch (err) {
    log(`failed: ${(err as Error).stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
    clearTimeout(deadline);
  }
}

// ---- Mode "bare": the reference server, run as a child process of the bench ----

if (process.argv[2] === 'bare') {
  const body = Buffer.from(process.env.BENCH_BODY ?? '{}');
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as net.AddressInfo).port }));
  process.on('SIGTERM', () => process.exit(0));
  process.on('disconnect', () => process.exit(0));
} else {
  await main();
}

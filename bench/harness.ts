/**
 * What the benches share: starting the audience server (own temp DATA_DIR, embedded PostgreSQL,
 * demo account with lifted limits, a bearer token) and the bare `node:http` reference server
 * (bench/bare.ts) in child processes on loopback, measuring one target with wrk or, where wrk is
 * not installed, autocannon (with the CPU time of the server, of its PostgreSQL and of the load
 * generator), time bounds, and clean-up of child processes and the temp dir on success, failure,
 * deadline, SIGINT and SIGTERM.
 *
 * Settings from the environment: BENCH_GENERATOR (wrk when on the PATH, else autocannon),
 * BENCH_CONNECTIONS (32 with wrk, 50 with autocannon), BENCH_WARMUP_S (2; 3), BENCH_DURATION_S
 * (5; 10), BENCH_ROUNDS (3, at most 9; 2, at most 5), BENCH_SERVER_ARGS (extra node flags for the
 * audience server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") and BENCH_SERVER_ENV (variables added to
 * the audience server's environment alone, e.g. "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2").
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { accessSync, constants, createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/store/embedded.ts';
import pg from 'pg';

// ---- autocannon's API, as far as the benches use it ----

export interface Histogram {
  average: number;
  mean: number;
  p50: number;
  p99: number;
  max: number;
}
export interface Result {
  requests: Histogram & { total: number; sent: number };
  latency: Histogram;
  throughput: Histogram;
  errors: number;
  timeouts: number;
  non2xx: number;
  duration: number;
}
/** The instance autocannon returns: a thenable of the result, which can be stopped. */
export interface Run extends PromiseLike<Result> {
  stop(): void;
}
/** What autocannon sends; `setupRequest` may change it before each request. */
export interface RequestData {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}
export interface AutocannonRequest extends RequestData {
  setupRequest?: (request: RequestData & { headers: Record<string, string> }) => RequestData;
}
export type Autocannon = (
  options: RequestData & {
    requests?: AutocannonRequest[];
    url: string;
    connections: number;
    duration: number;
    pipelining: number;
    timeout: number;
  },
) => Run;

/** What `measure` sends, the same with either generator. */
export interface Load {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  /** When set, each request has its own path and body: see N_MARK and R_MARK. */
  randomUpTo?: number;
}

const require = createRequire(import.meta.url);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;

export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
export const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 3);
export const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
export const ROUNDS = Math.min(5, Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2)));

export interface Server {
  url: string;
  pid: number | undefined;
  /** The DATA_DIR of the embedded PostgreSQL it uses when that is not its own child (its CPU is then counted as the database's). */
  databaseOf?: string;
}

export interface Measured {
  target: string;
  round: number;
  rps: number;
  mean: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  total: number;
  /** The server process's CPU time (user + system) per answered request, from /proc. */
  serverCpuUsPerRequest: number | undefined;
  serverCpuShare: number | undefined;
  /** The CPU time of the server's child processes (its embedded PostgreSQL) per answered request. */
  dbCpuUsPerRequest: number | undefined;
  dbCpuShare: number | undefined;
  /** The load generator's CPU time over wall time (wrk's process, or autocannon's, this one): near 1 means it was the limit. */
  clientCpuShare: number;
  /** The 1-minute load average at the end of the run. */
  loadAverage: number;
}

// ---- Output ----

export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    '| ' + r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ') + ' |';
  return [
    line(rows[0]),
    '|' + widths.map((w, i) => (i === 0 ? '-'.repeat(w + 1) + '-' : '-'.repeat(w + 1) + ':')).join('|') + '|',
    ...rows.slice(1).map(line),
  ].join('\n');
}

/** The machine and settings lines every bench prints first. */
export function printSetting(): void {
  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const generator =
    LOAD.generator === 'wrk'
      ? `wrk (${WRK}, one thread, its own process)`
      : 'autocannon (in the bench process; no wrk on the PATH)';
  console.log(
    `node ${process.version}; load generator ${generator}, ${LOAD.connections} connections, keep-alive, ${LOAD.warmupS} s warm-up + ${LOAD.durationS} s measured per run, ${LOAD.rounds} alternating rounds`,
  );
}

// ---- Time bounds and clean-up ----

const children: { child: ChildProcess; name: string; postmasterPidFile?: string }[] = [];
const cleanupHooks: (() => Promise<void>)[] = [];
const tempDirs: string[] = [];
let cleaning: Promise<void> | undefined;

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects after `ms` with `what` in the message. */
export function within<T>(ms: number, what: string, promise: PromiseLike<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    Promise.resolve(promise).finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}

/** Stops `child` at clean-up (SIGTERM, then SIGKILL), with the bench's other child processes. */
export function track(child: ChildProcess, name: string): void {
  children.push({ child, name });
}

/** A new temp dir, removed at clean-up. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** Runs `hook` at clean-up, before the child processes are stopped (e.g. to close a database connection). */
export function onCleanup(hook: () => Promise<void>): void {
  cleanupHooks.push(hook);
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
    const cmdline =
      Number.isInteger(pid) && pid > 1 ? await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '') : '';
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
    for (const hook of cleanupHooks)
      await within(10_000, 'clean-up', hook()).catch((err: Error) => log(`clean-up: ${err.message}`));
    await Promise.all(children.map((c) => stopChild(c, 30_000)));
    for (const dir of tempDirs)
      await fs
        .rm(dir, { recursive: true, force: true })
        .catch((err: Error) => log(`could not remove ${dir}: ${err.message}`));
  })();
  return cleaning;
}

/**
 * Runs a bench: `main` gets autocannon; on success, failure, the deadline (`deadlineMs`, the whole
 * run), SIGINT or SIGTERM everything is cleaned up. A failure sets exit code 1.
 */
export async function runBench(deadlineMs: number, main: (autocannon: Autocannon) => Promise<void>): Promise<void> {
  const deadline = setTimeout(() => {
    log(`the run took over ${Math.round(deadlineMs / 1000)} s; stopping`);
    void cleanup().finally(() => process.exit(1));
  }, deadlineMs);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    await main(require('autocannon') as Autocannon);
  } catch (err) {
    log(`failed: ${(err as Error).stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
    clearTimeout(deadline);
  }
}

// ---- The servers ----

export async function request(url: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, text: await res.text() };
}

/** The reference: bench/bare.ts in a child process, answering GET with `body` and other methods with 204. */
export function startBare(body: string): Promise<Server> {
  return startReference('bare server', 'bare.ts', { BENCH_BODY: body });
}

/**
 * A reference server of the benches (bench/`file`) in a child process with `env` added to this
 * one's; it sends its port once it listens.
 */
export async function startReference(name: string, file: string, env: Record<string, string>): Promise<Server> {
  const child = fork(path.join(ROOT, 'bench', file), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push({ child, name });
  const port = await within(
    15_000,
    `${name} start`,
    new Promise<number>((resolve, reject) => {
      child.once('message', (m) => resolve((m as { port: number }).port));
      child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
    }),
  );
  return { url: `http://127.0.0.1:${port}`, pid: child.pid };
}

export interface Audience extends Program {
  token: string;
  accountId: string;
}

/** A program started by `startProgram`: its URL and pid, the temp `DATA_DIR`, and the operator token. */
export interface Program extends Server {
  dataDir: string;
  adminToken: string;
  logLevel: string;
  /** Where its standard output goes. */
  logFile: string;
}

/**
 * The log level of the programs the benches start: BENCH_LOG_LEVEL, else `info`, what `npm start`
 * runs with (every request logged).
 */
export const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'info';

/** How a program is started: its log level (LOG_LEVEL by default), and a database of another program's to use instead of its own. */
export interface ProgramOptions {
  logLevel?: string;
  /** A program whose DATA_DIR (secrets, files) and embedded PostgreSQL this one shares. */
  beside?: Program;
}

/**
 * `node src/main.js <role>` (serve, api or worker) with a new temp DATA_DIR (its own embedded
 * PostgreSQL) on a free loopback port; resolves once /readyz answers 200. Its standard output (the
 * log) goes to a file in a temp dir, as an operator's would, not to /dev/null.
 */
export async function startProgram(
  role: 'serve' | 'api' | 'worker' = 'serve',
  options: ProgramOptions = {},
): Promise<Program> {
  if (options.beside) return spawnProgram(role, options.beside.dataDir, options);
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-bench-'));
  tempDirs.push(dataDir);
  // As root, the embedded PostgreSQL runs as the postgres user, which must traverse the data directory.
  await fs.chmod(dataDir, 0o755);
  return spawnProgram(role, dataDir, options);
}

/**
 * Stops a program `startProgram` started (SIGTERM: it stops its PostgreSQL) and starts it again on
 * the same DATA_DIR: a fresh process over the data the first one wrote.
 */
export async function restartProgram<P extends Program>(
  program: P,
  role: 'serve' | 'api' | 'worker' = 'serve',
): Promise<P> {
  const at = children.findIndex((c) => c.child.pid === program.pid);
  if (at >= 0) {
    await stopChild(children[at], 30_000);
    children.splice(at, 1);
  }
  const started = await spawnProgram(role, program.dataDir, { logLevel: program.logLevel });
  return { ...program, url: started.url, pid: started.pid, logFile: started.logFile };
}

/** "A=1 B=x=y" as { A: '1', B: 'x=y' }: the variables of BENCH_SERVER_ENV and of bench variants. */
export function envPairs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`not NAME=value: ${pair}`);
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

async function spawnProgram(
  role: 'serve' | 'api' | 'worker',
  dataDir: string,
  options: ProgramOptions,
): Promise<Program> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const logLevel = options.logLevel ?? LOG_LEVEL;
  const extraArgs = (process.env.BENCH_SERVER_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
  // MALLOC_ARENA_MAX as bin/audience (what `npm start` runs) and the image set it.
  const env: NodeJS.ProcessEnv = {
    MALLOC_ARENA_MAX: '2',
    ...process.env,
    ...envPairs(process.env.BENCH_SERVER_ENV ?? ''),
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: logLevel,
  };
  // Always the embedded database of the temp dir, never one the caller's environment points at;
  // a program beside another uses that one's.
  delete env.DATABASE_URL;
  if (options.beside) env.DATABASE_URL = await embeddedDatabaseUrl(options.beside.dataDir);
  const logDir = await tempDir('audience-bench-log-');
  const logFile = path.join(logDir, `${role}-${port}.log`);
  const out = await fs.open(logFile, 'a');
  const child = spawn(NODE, [...extraArgs, 'src/main.js', role], {
    cwd: ROOT,
    env,
    stdio: ['ignore', out.fd, 'inherit'],
  });
  await out.close();
  children.push({
    child,
    name: `audience ${role}`,
    ...(options.beside ? {} : { postmasterPidFile: pidFileOf(dataDir) }),
  });
  let exitCode: number | null | undefined;
  child.once('exit', (code) => {
    exitCode = code;
  });

  // Ready: /readyz answers 200 (the embedded PostgreSQL initialises its cluster first).
  const started = Date.now();
  for (;;) {
    if (exitCode !== undefined) throw new Error(`audience ${role} exited with ${exitCode} before it was ready`);
    if (Date.now() - started > 90_000) throw new Error(`audience ${role} not ready within 90 s`);
    const ready = await request(`${url}/readyz`).catch(() => undefined);
    if (ready?.status === 200) break;
    await sleep(250);
  }
  log(
    `audience ${role} (LOG_LEVEL=${logLevel}${options.beside ? ", beside another's database" : ''}, pid ${child.pid}) ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  return {
    url,
    pid: child.pid,
    dataDir,
    adminToken,
    logLevel,
    logFile,
    ...(options.beside ? { databaseOf: dataDir } : {}),
  };
}

/** The lines a program has logged so far (its standard output). */
export async function logLines(program: Program): Promise<number> {
  const text = await fs.readFile(program.logFile, 'utf8').catch(() => '');
  return text.split('\n').filter((l) => l !== '').length;
}

/** Stops a program `startProgram` started (SIGTERM, so that it stops its PostgreSQL) and removes its temp dir. */
export async function stopProgram(program: Program): Promise<void> {
  const at = children.findIndex((c) => c.child.pid === program.pid);
  if (at >= 0) {
    await stopChild(children[at], 30_000);
    children.splice(at, 1);
  }
  if (program.databaseOf !== undefined) return;
  await fs.rm(program.dataDir, { recursive: true, force: true });
  tempDirs.splice(tempDirs.indexOf(program.dataDir), 1);
}

/**
 * `node src/main.js serve` (see `startProgram`); lifts the demo account's `lift` limits through the
 * operator API and gets a bearer token for it.
 */
export async function startAudience(
  lift: string[] = ['requests_per_second', 'token_requests_per_minute'],
): Promise<Audience> {
  const program = await startProgram('serve');
  const { url, dataDir, adminToken } = program;
  const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8')) as {
    account_id: string;
    client_id: string;
    client_secret: string;
  };
  const lifted = await request(`${url}/admin/accounts/${encodeURIComponent(demo.account_id)}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ limits: Object.fromEntries(lift.map((l) => [l, null])) }),
  });
  if (lifted.status !== 200) throw new Error(`lifting the demo account's limits: ${lifted.status} ${lifted.text}`);
  const token = await demoToken(program);
  return { ...program, token, accountId: demo.account_id };
}

/**
 * A second `serve` program at `logLevel` on the database and DATA_DIR of `audience` (its accounts,
 * limits and tokens): the same server in another configuration, to measure against it in one run.
 */
export async function startBeside(audience: Audience, logLevel: string): Promise<Audience> {
  const program = await startProgram('serve', { logLevel, beside: audience });
  return { ...audience, ...program };
}

/** A bearer token of the demo account of a program with the API (`POST /oauth/token`). */
export async function demoToken(program: Program): Promise<string> {
  const demo = JSON.parse(await fs.readFile(path.join(program.dataDir, 'demo-credentials.json'), 'utf8')) as {
    client_id: string;
    client_secret: string;
  };
  const issued = await request(`${program.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: demo.client_id,
      client_secret: demo.client_secret,
    }),
  });
  if (issued.status !== 200) throw new Error(`token: ${issued.status} ${issued.text}`);
  return (JSON.parse(issued.text) as { access_token: string }).access_token;
}

/**
 * After a bench wrote an account's profile events straight into the database: their sums per
 * profile and event version (migration 0021), which the service's own writes keep, computed anew.
 */
export async function summariseEvents(db: pg.ClientBase, accountId: string): Promise<void> {
  await db.query(
    `insert into profile_event_summaries (account_id, profile_id, section_id, version_id, event_count, first_time, last_time)
     select account_id, profile_id, section_id, version_id, count(*), min(event_time), max(event_time)
     from profile_events where account_id = $1::bigint group by account_id, profile_id, section_id, version_id
     on conflict (account_id, profile_id, section_id, version_id) do update
       set event_count = excluded.event_count, first_time = excluded.first_time, last_time = excluded.last_time`,
    [accountId],
  );
}

/** The URL of the audience server's embedded PostgreSQL: password from DATA_DIR/postgres/password, port from postmaster.pid. */
export async function embeddedDatabaseUrl(dataDir: string): Promise<string> {
  const password = (await fs.readFile(path.join(dataDir, 'postgres', 'password'), 'utf8')).trim();
  // postmaster.pid: pid, data directory, start time, port, …
  const port = Number((await fs.readFile(pidFileOf(dataDir), 'utf8')).split('\n')[3]);
  if (!Number.isInteger(port) || port <= 0) throw new Error("no port in the embedded PostgreSQL's postmaster.pid");
  return `postgres://audience:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}

// ---- Measuring ----

/** The postmaster.pid file of the embedded PostgreSQL of a DATA_DIR. */
function pidFileOf(dataDir: string): string {
  return path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid');
}

/** The postmaster's pid: the first line of its postmaster.pid. */
async function postmasterOf(pidFile: string): Promise<number> {
  return Number((await fs.readFile(pidFile, 'utf8')).split('\n')[0]);
}

export interface Memory {
  rssKb: number;
  hwmKb: number;
}

export async function memoryOf(pid: number): Promise<Memory | undefined> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  if (!status) return undefined;
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM') };
}

/**
 * What a database server has read so far: blocks PostgreSQL took from the operating system rather
 * than its own buffers (pg_stat_database, the database `db` is connected to), the bytes its
 * processes read from storage (/proc/<pid>/io read_bytes: what the page cache did not hold), and
 * the page cache's size (/proc/meminfo Cached). Differences of two readings tell where a workload's
 * reads came from; a backend that ended meanwhile takes its bytes with it.
 */
export interface Reads {
  blocksRead: number;
  blocksHit: number;
  storageBytes: number;
  pageCacheKb: number;
}

export async function readsOf(dataDir: string, db: pg.Client): Promise<Reads> {
  const postmaster = await postmasterOf(pidFileOf(dataDir));
  const pids = [postmaster, ...(await processes()).filter(([, parent]) => parent === postmaster).map(([pid]) => pid)];
  const bytes = await Promise.all(
    pids.map(async (pid) => {
      const io = await fs.readFile(`/proc/${pid}/io`, 'utf8').catch(() => '');
      return Number(/^read_bytes:\s+(\d+)/m.exec(io)?.[1] ?? 0);
    }),
  );
  const { rows } = await db.query<{ blks_read: string; blks_hit: string }>(
    `select blks_read, blks_hit from pg_stat_database where datname = current_database()`,
  );
  const meminfo = await fs.readFile('/proc/meminfo', 'utf8');
  return {
    blocksRead: Number(rows[0].blks_read),
    blocksHit: Number(rows[0].blks_hit),
    storageBytes: bytes.reduce((a, b) => a + b, 0),
    pageCacheKb: Number(/^Cached:\s+(\d+) kB/m.exec(meminfo)?.[1] ?? NaN),
  };
}

/** Samples VmRSS of `pid` every `intervalMs` until stopped: the peak, and the peak of each phase. */
export function sampleMemory(pid: number, intervalMs: number) {
  const peaks = new Map<string, number>();
  let phase = 'before';
  let peakKb = 0;
  let samples = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void memoryOf(pid)
      .then((m) => {
        if (!m || !Number.isFinite(m.rssKb)) return;
        samples++;
        peakKb = Math.max(peakKb, m.rssKb);
        peaks.set(phase, Math.max(peaks.get(phase) ?? 0, m.rssKb));
      })
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  return {
    phase(name: string) {
      phase = name;
    },
    stop() {
      clearInterval(timer);
      return { peakKb, peaks, samples };
    },
  };
}

/** [pid, parent pid, CPU ms] of every process, from /proc; empty where there is no /proc. */
async function processes(): Promise<[number, number, number][]> {
  const pids = (await fs.readdir('/proc').catch(() => [] as string[])).filter((d) => /^\d+$/.test(d));
  const rows = await Promise.all(
    pids.map(async (pid): Promise<[number, number, number] | undefined> => {
      const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
      if (!stat) return undefined;
      // Fields after the command name (which may hold spaces): state is field 3, ppid 4, utime 14, stime 15, in 1/100 s.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return [Number(pid), Number(fields[1]), (Number(fields[11]) + Number(fields[12])) * 10];
    }),
  );
  return rows.filter((r) => r !== undefined);
}

/** CPU time (ms) so far of a process and, apart, of all its descendants (for the audience server: its PostgreSQL). */
export async function cpuMsOf(pid: number | undefined): Promise<{ own: number; descendants: number } | undefined> {
  if (pid === undefined) return undefined;
  const all = await processes();
  const self = all.find(([p]) => p === pid);
  if (!self) return undefined;
  const tree = new Set([pid]);
  let descendants = 0;
  for (let grown = true; grown;) {
    grown = false;
    for (const [p, parent, cpu] of all) {
      if (!tree.has(p) && tree.has(parent)) {
        tree.add(p);
        descendants += cpu;
        grown = true;
      }
    }
  }
  return { own: self[2], descendants };
}

/**
 * CPU time (ms) so far of an embedded PostgreSQL in `dataDir`: its postmaster, every process it
 * runs (backends, io workers, parallel workers), and the ended ones it has reaped (cutime and
 * cstime), so that a query's parallel workers, which exit with it, are counted.
 */
export async function postgresCpuMs(dataDir: string): Promise<number> {
  return postmasterCpuMs(pidFileOf(dataDir));
}

/** postgresCpuMs of any PostgreSQL, by the postmaster.pid file of its data directory (a node of a cluster). */
export async function postmasterCpuMs(pidFile: string): Promise<number> {
  const postmaster = await postmasterOf(pidFile);
  const stat = await fs.readFile(`/proc/${postmaster}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const own = (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10;
  return (
    own + (await processes()).filter(([, parent]) => parent === postmaster).reduce((sum, [, , cpu]) => sum + cpu, 0)
  );
}

/**
 * Samples what the server's database connections do, every 50 ms on a connection of its own, until
 * `stop`: per state or wait event and statement, how many connections on average (a connection
 * `CPU` runs or waits for a CPU; `idle in transaction` waits for the server process).
 */
export async function sampleWaits(server: { dataDir: string }): Promise<{ stop(): Promise<string[][]> }> {
  const client = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await client.connect();
  const waits = new Map<string, number>();
  let samples = 0;
  let sampling = true;
  const sampled = (async () => {
    while (sampling) {
      const { rows } = await client.query<{ state: string; wait: string | null; query: string }>(
        `select state, wait_event_type || ':' || wait_event as wait, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) as query
         from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid() and datname is not null and state <> 'idle'`,
      );
      samples++;
      for (const r of rows) {
        const what = `${r.state === 'active' ? (r.wait ?? 'CPU') : r.state} | ${r.state === 'active' ? r.query : ''}`;
        waits.set(what, (waits.get(what) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await sampled;
      await client.end();
      return [...waits]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 15)
        .map(([what, n]) => [what, (n / samples).toFixed(2)]);
    },
  };
}

// ---- Load generators ----

/** `wrk` on the PATH, unless BENCH_GENERATOR=autocannon. */
function findWrk(): string | undefined {
  if (process.env.BENCH_GENERATOR === 'autocannon') return undefined;
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const file = path.join(dir || '.', 'wrk');
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  if (process.env.BENCH_GENERATOR === 'wrk')
    throw new Error('BENCH_GENERATOR=wrk, but there is no wrk on the PATH (apt-get install wrk)');
  return undefined;
}

const WRK = findWrk();

/**
 * How `measure` loads a server: wrk (one thread, in a process of its own) when it is installed,
 * since autocannon in this process takes about a whole core to load the bare server and so becomes
 * the limit; autocannon otherwise.
 */
export const LOAD = WRK
  ? {
      generator: 'wrk' as const,
      connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
      warmupS: Number(process.env.BENCH_WARMUP_S ?? 2),
      durationS: Number(process.env.BENCH_DURATION_S ?? 5),
      rounds: Math.min(9, Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))),
    }
  : {
      generator: 'autocannon' as const,
      connections: CONNECTIONS,
      warmupS: WARMUP_S,
      durationS: DURATION_S,
      rounds: ROUNDS,
    };

/** What a load sends: `N_MARK` in the path or body becomes a random integer from 1 to `randomUpTo` in each request, `R_MARK` 8 random letters. */
export const N_MARK = '__N__';
export const R_MARK = '__R__';

/** The path and body of one request of `load`, marks filled in. */
function fill(text: string, randomUpTo: number): string {
  return text
    .replaceAll(N_MARK, () => String(1 + Math.floor(Math.random() * randomUpTo)))
    .replaceAll(R_MARK, () => Math.random().toString(36).slice(2, 10).padEnd(8, 'x'));
}

/** A Lua string literal of any bytes. */
function luaString(text: string): string {
  return (
    '"' +
    [...Buffer.from(text)]
      .map((b) =>
        b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${String(b).padStart(3, '0')}`,
      )
      .join('') +
    '"'
  );
}

/** A Lua expression building `text` with its marks filled in for each request. */
function luaFilled(text: string): string {
  const parts = text.split(new RegExp(`(${N_MARK}|${R_MARK})`)).filter((p) => p !== '');
  if (parts.length === 0) return '""';
  return parts
    .map((p) => (p === N_MARK ? 'tostring(math.random(1, max))' : p === R_MARK ? 'letters8()' : luaString(p)))
    .join(' .. ');
}

/**
 * The wrk script of a load: a new path and body for each request (random profile key, random
 * value), and a last line with the figures as JSON (latencies in µs).
 */
function wrkScript(load: Load): string {
  const headers = Object.entries(load.headers ?? {})
    .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
    .join(', ');
  return `-- written by bench/harness.ts
local max = ${Math.max(1, load.randomUpTo ?? 1)}
local headers = { ${headers} }
local alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
math.randomseed(${Math.floor(Math.random() * 2 ** 31)})
local function letters8()
  local out = {}
  for i = 1, 8 do
    local k = math.random(1, #alphabet)
    out[i] = alphabet:sub(k, k)
  end
  return table.concat(out)
end
request = function()
  return wrk.format(${luaString(load.method ?? 'GET')}, ${luaFilled(load.path ?? '/')}, headers, ${load.body === undefined ? 'nil' : luaFilled(load.body)})
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"durationUs":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"meanUs":%.1f,"p50Us":%d,"p99Us":%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout, latency.mean, latency:percentile(50), latency:percentile(99)))
end
`;
}

/** This process's waited-for children's CPU time (ms) so far, from /proc/self/stat (cutime + cstime): a wrk run's, once it has exited. */
export async function childrenCpuMs(): Promise<number> {
  const stat = await fs.readFile('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * (1000 / 100);
}

export interface Generated {
  rps: number;
  total: number;
  mean: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  generatorCpuShare: number;
}

/** One wrk run of `seconds` against `url`; its CPU time from /proc (this process's children's times, before and after). */
export async function runWrk(url: string, load: Load, seconds: number, what: string): Promise<Generated> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-wrk-'));
  tempDirs.push(dir);
  const script = path.join(dir, 'load.lua');
  await fs.writeFile(script, wrkScript(load));
  const cpuBefore = await childrenCpuMs();
  const started = performance.now();
  const child = spawn(WRK!, ['-t1', `-c${LOAD.connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', script, url], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push({ child, name: 'wrk' });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  try {
    const code = await within(
      seconds * 1000 + 30_000,
      what,
      new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))),
    );
    if (code !== 0) throw new Error(`${what}: wrk exited with ${code}: ${out}`);
  } finally {
    children.splice(
      children.findIndex((c) => c.child === child),
      1,
    );
    if (child.exitCode === null) child.kill('SIGKILL');
    await fs.rm(dir, { recursive: true, force: true });
    tempDirs.splice(tempDirs.indexOf(dir), 1);
  }
  const wallMs = performance.now() - started;
  const cpuMs = (await childrenCpuMs()) - cpuBefore;
  const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '));
  if (!line) throw new Error(`${what}: no result from wrk: ${out}`);
  const r = JSON.parse(line.slice('WRK_RESULT '.length)) as {
    requests: number;
    durationUs: number;
    connect: number;
    read: number;
    write: number;
    status: number;
    timeout: number;
    meanUs: number;
    p50Us: number;
    p99Us: number;
  };
  return {
    rps: r.requests / (r.durationUs / 1e6),
    total: r.requests,
    mean: r.meanUs / 1000,
    p50: r.p50Us / 1000,
    p99: r.p99Us / 1000,
    non2xx: r.status,
    errors: r.connect + r.read + r.write,
    timeouts: r.timeout,
    generatorCpuShare: cpuMs / wallMs,
  };
}

/** One autocannon run in this process; its CPU time is this process's. */
async function runAutocannon(
  autocannon: Autocannon,
  url: string,
  load: Load,
  seconds: number,
  what: string,
): Promise<Generated> {
  const { randomUpTo, ...request } = load;
  const varies = randomUpTo !== undefined;
  const instance = autocannon({
    ...request,
    url: `${url}${load.path ?? ''}`,
    connections: LOAD.connections,
    pipelining: 1,
    timeout: 10,
    duration: seconds,
    ...(varies
      ? {
          requests: [
            {
              method: load.method,
              setupRequest: (r) => ({
                ...r,
                path: fill(load.path ?? '/', randomUpTo),
                body: load.body === undefined ? undefined : fill(load.body, randomUpTo),
              }),
            },
          ],
        }
      : {}),
  });
  const before = process.cpuUsage();
  const started = performance.now();
  let r: Result;
  try {
    r = await within(seconds * 1000 + 30_000, what, Promise.resolve(instance));
  } catch (err) {
    instance.stop();
    throw err;
  }
  const used = process.cpuUsage(before);
  return {
    rps: r.requests.average,
    total: r.requests.total,
    mean: r.latency.mean,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    generatorCpuShare: (used.user + used.system) / 1000 / (performance.now() - started),
  };
}

/** One warm-up (not counted) and one measured run of `load` against `server`, with wrk or autocannon (LOAD). */
export async function measure(
  autocannon: Autocannon,
  target: string,
  round: number,
  server: Server,
  load: Load,
): Promise<Measured> {
  const run = (what: string, seconds: number) =>
    LOAD.generator === 'wrk'
      ? runWrk(`${server.url}/`, load, seconds, `${target} ${what}`)
      : runAutocannon(autocannon, server.url, load, seconds, `${target} ${what}`);
  if (LOAD.warmupS > 0) await run('warm-up', LOAD.warmupS);
  const database = () => (server.databaseOf === undefined ? undefined : postgresCpuMs(server.databaseOf));
  const serverBefore = await cpuMsOf(server.pid);
  const databaseBefore = await database();
  const started = performance.now();
  const r = await run('run', LOAD.durationS);
  const elapsedMs = performance.now() - started;
  const serverAfter = await cpuMsOf(server.pid);
  const databaseAfter = await database();
  const own = serverBefore && serverAfter ? serverAfter.own - serverBefore.own : undefined;
  // Processes that ended during the run take their CPU time with them, so this is a lower bound.
  const db =
    databaseBefore !== undefined && databaseAfter !== undefined
      ? Math.max(0, databaseAfter - databaseBefore)
      : serverBefore && serverAfter
        ? Math.max(0, serverAfter.descendants - serverBefore.descendants)
        : undefined;
  const m: Measured = {
    target,
    round,
    rps: r.rps,
    mean: r.mean,
    p50: r.p50,
    p99: r.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    total: r.total,
    serverCpuUsPerRequest: own === undefined ? undefined : (own * 1000) / r.total,
    serverCpuShare: own === undefined ? undefined : own / elapsedMs,
    dbCpuUsPerRequest: db === undefined ? undefined : (db * 1000) / r.total,
    dbCpuShare: db === undefined ? undefined : db / elapsedMs,
    clientCpuShare: r.generatorCpuShare,
    loadAverage: os.loadavg()[0],
  };
  const cpu =
    m.serverCpuUsPerRequest === undefined
      ? ''
      : `, server CPU ${m.serverCpuUsPerRequest.toFixed(0)} µs/request (${(100 * m.serverCpuShare!).toFixed(0)}% of a core)`;
  const dbCpu =
    m.dbCpuUsPerRequest === undefined || m.dbCpuShare! < 0.01
      ? ''
      : `, database CPU ${m.dbCpuUsPerRequest.toFixed(0)} µs/request (${(100 * m.dbCpuShare!).toFixed(0)}% of a core)`;
  log(
    `round ${round} ${target}: ${m.rps.toFixed(0)} req/s, mean ${m.mean.toFixed(2)} ms, p50 ${m.p50} ms, p99 ${m.p99} ms, ${m.total} requests, ${m.non2xx} non-2xx, ${m.errors} errors${cpu}${dbCpu}, ${LOAD.generator} ${(100 * m.clientCpuShare).toFixed(0)}% of a core, load average ${m.loadAverage.toFixed(2)}`,
  );
  return m;
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * The ratio of `target` to `baseline` in each round (the two measured one after the other) and
 * their median, with the medians of the CPU figures: the figures the benches report.
 */
export function summary(results: Measured[], target: string, baseline: string) {
  const rounds = results
    .filter((r) => r.target === target)
    .map((a) => ({ a, b: results.find((r) => r.target === baseline && r.round === a.round)! }));
  const of = (xs: (number | undefined)[]) => (xs.some((x) => x === undefined) ? undefined : median(xs as number[]));
  return {
    ratios: rounds.map(({ a, b }) => a.rps / b.rps),
    ratio: median(rounds.map(({ a, b }) => a.rps / b.rps)),
    serverUs: of(rounds.map(({ a }) => a.serverCpuUsPerRequest)),
    baselineServerUs: of(rounds.map(({ b }) => b.serverCpuUsPerRequest)),
    dbUs: of(rounds.map(({ a }) => a.dbCpuUsPerRequest)),
    generator: median(rounds.flatMap(({ a, b }) => [a.clientCpuShare, b.clientCpuShare])),
    loadAverage: median(rounds.flatMap(({ a, b }) => [a.loadAverage, b.loadAverage])),
  };
}

/**
 * The line a bench prints for `op`: median ratio of `names.target` to `names.baseline` (audience
 * and bare unless given), the rounds' ratios, CPU per request, the generator's share, the load average.
 */
export function summaryLine(
  op: string,
  s: ReturnType<typeof summary>,
  aim: number | undefined,
  names = { target: 'audience', baseline: 'bare' },
): string {
  const us = (v: number | undefined) => (v === undefined ? 'n/a' : v.toFixed(0));
  return (
    `${op}: ratio ${names.target}/${names.baseline} ${s.ratio.toFixed(2)} (median of rounds ${s.ratios.map((r) => r.toFixed(2)).join(', ')}${aim === undefined ? '' : `; aim at least ${aim.toFixed(2)}`}); ` +
    `CPU per request: ${names.target} ${us(s.serverUs)} µs${s.dbUs !== undefined && s.dbUs > 0 ? `, PostgreSQL ${us(s.dbUs)} µs` : ''}, ${names.baseline} ${us(s.baselineServerUs)} µs; ` +
    `${LOAD.generator} ${(100 * s.generator).toFixed(0)}% of a core; load average ${s.loadAverage.toFixed(2)}`
  );
}

/** Prints a warning for every run with non-2xx answers, errors or timeouts, and sets exit code 1. */
export function failOnBadRuns(results: Measured[]): void {
  for (const r of results.filter((x) => x.non2xx > 0 || x.errors > 0 || x.timeouts > 0)) {
    console.log(
      `WARNING: round ${r.round} ${r.target}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`,
    );
    process.exitCode = 1;
  }
}

export const usPerRequest = (v: number | undefined) => (v === undefined ? 'n/a' : v.toFixed(0));
export const share = (v: number | undefined) => (v === undefined ? 'n/a' : `${(100 * v).toFixed(0)}%`);

/** POSTs the form fields in order, then the file as the part `file`, streamed from disk; returns the status and answer. */
export async function upload(
  url: string,
  fields: Record<string, string>,
  file: string,
  size: number,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  const boundary = `----audience-bench-${Date.now().toString(16)}`;
  let head = '';
  for (const [name, value] of Object.entries(fields))
    head += `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.csv"\r\nContent-Type: text/csv\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const target = new URL(url);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(target.hostname))
    throw new Error(`the upload URL ${url} is not on loopback`);
  return within(
    timeoutMs,
    'upload',
    new Promise((resolve, reject) => {
      const req = http.request(
        target,
        {
          method: 'POST',
          headers: {
            'content-type': `multipart/form-data; boundary=${boundary}`,
            'content-length': Buffer.byteLength(head) + size + Buffer.byteLength(tail),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          res.on('error', reject);
        },
      );
      req.setTimeout(timeoutMs, () => req.destroy(new Error('upload timed out')));
      req.on('error', reject);
      pipeline(async function* () {
        yield Buffer.from(head);
        yield* createReadStream(file, { highWaterMark: 256 * 1024 });
        yield Buffer.from(tail);
      }, req).catch(reject);
    }),
  );
}

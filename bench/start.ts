/**
 * `npm run bench:start`: how long `audience serve` and `audience emulate` take to be ready, and what
 * the operator commands cost (issue 35, docs/benchmarks.md "Start"). The machine is shared and its
 * load changes from one minute to the next, so every figure is set beside the CPU time Node.js takes
 * to start an empty script (`node -e ''`), measured in the same rounds: a ratio that the load moves
 * far less than the figures themselves.
 *
 * Each round, in turn: the empty script (BENCH_START_EMPTY, 3 times); `serve` on a data directory
 * that an untimed first start made (the database exists, the demo account too: the start an
 * operator sees every day), timed from the spawn to its "listening" line; then, against that
 * server, each operator command of COMMANDS (the command line calling /admin) from its spawn to its
 * exit; `emulate` (PORT=0) from the spawn to its "ready" line. `serve` and `emulate` run as an
 * operator runs them (the bundle of src/bundle.js, Node's compile cache of src/core/compile-cache.ts),
 * then without the compile cache (NODE_DISABLE_COMPILE_CACHE=1), then from the sources
 * (AUDIENCE_BUNDLE=0, with the compile cache).
 * The CPU time is the program's Node process's (all its threads; the embedded PostgreSQL's
 * processes are apart), read from /proc when the line comes (user and system, in 1/100 s ticks);
 * an exited process's, from this process's children's times. BENCH_START_RUNS rounds (5).
 */
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { freePort } from '../src/store/embedded.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const PROGRAM = path.join(ROOT, 'bin', 'audience');
const NODE = path.join(ROOT, 'node_modules', '.bin', 'node');
const RUNS = Number(process.env.BENCH_START_RUNS ?? 5);
const EMPTY = Number(process.env.BENCH_START_EMPTY ?? 3);
/** Commands that only call the operator API of the running server. */
const COMMANDS = [
  ['account', 'list'],
  ['key', 'list', '--account', 'ACCOUNT'],
  ['manifest', '--account', 'ACCOUNT'],
];

/** How the program is started: as an operator starts it, then without one of what makes it fast. */
const VARIANTS = {
  '': {},
  'no compile cache': { NODE_DISABLE_COMPILE_CACHE: '1' },
  'sources (AUDIENCE_BUNDLE=0)': { AUDIENCE_BUNDLE: '0' },
};
type Variant = keyof typeof VARIANTS;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summary = (xs: number[]) =>
  `median ${Math.round(median(xs))} ms (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}, n=${xs.length})`;

/** CPU milliseconds of a running process, all its threads: /proc/<pid>/stat, utime and stime. */
function cpuOf(pid: number | 'self', children = false): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 (utime, stime), or 16 and 17 (cutime, cstime: the children waited for).
  const at = children ? 13 : 11;
  return (Number(fields[at]) + Number(fields[at + 1])) * 10;
}

/** Runs a command to its end: its wall time and CPU time (from this process's children's times). */
async function runToEnd(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; cpuMs: number }> {
  const before = cpuOf('self', true);
  const t0 = performance.now();
  const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const ms = performance.now() - t0;
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${code}: ${stderr}`);
  return { ms, cpuMs: cpuOf('self', true) - before };
}

interface Running {
  readyMs: number;
  cpuMs: number;
  line: Record<string, unknown>;
  stop(): Promise<void>;
}

/** Spawns the program and waits for the line that says it is ready. */
async function startProgram(
  args: string[],
  env: NodeJS.ProcessEnv,
  isReady: (line: string) => boolean,
): Promise<Running> {
  const t0 = performance.now();
  const child = spawn(PROGRAM, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on('line', (l) => isReady(l) && resolve(l));
    void exited.then(() => reject(new Error(`${args.join(' ')} exited before it was ready: ${stderr}`)));
  });
  const readyMs = performance.now() - t0;
  const cpuMs = cpuOf(child.pid!);
  return {
    readyMs,
    cpuMs,
    line: JSON.parse(line),
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-bench-start-'));
const results = new Map<string, number[]>();
const record = (name: string, value: number) => results.set(name, [...(results.get(name) ?? []), value]);
const loads: number[] = [];
try {
  const dataDir = path.join(scratch, 'data');
  const serveEnv = (port: number, variant: Variant) => ({
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...VARIANTS[variant],
  });
  const listening = (l: string) => l.includes('"msg":"listening');
  // The first start: the database made and migrated, the demo account; not counted.
  const t = performance.now();
  const first = await startProgram(['serve'], serveEnv(await freePort(), ''), listening);
  await first.stop();
  console.log(`serve, first start on an empty DATA_DIR (not counted): ${Math.round(performance.now() - t)} ms`);
  console.log(execFileSync(PROGRAM, ['emulate', '--prepare'], { encoding: 'utf8' }).trim());
  const emulateEnv = (variant: Variant) => ({
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ...VARIANTS[variant],
  });
  const emulatorReady = (l: string) => l.includes('"emulator":"ready"');
  const account = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8')).account_id;
  for (let round = 1; round <= RUNS; round++) {
    for (let i = 0; i < EMPTY; i++) record('empty script', (await runToEnd(NODE, ['-e', ''], process.env)).cpuMs);
    for (const variant of Object.keys(VARIANTS) as Variant[]) {
      const label = variant && `, ${variant}`;
      const port = await freePort();
      const serve = await startProgram(['serve'], serveEnv(port, variant), listening);
      record(`serve${label}: CPU to ready`, serve.cpuMs);
      record(`serve${label}: spawn to ready`, serve.readyMs);
      if (!variant)
        for (const command of COMMANDS) {
          const args = command.map((a) => (a === 'ACCOUNT' ? account : a));
          const env = { ...serveEnv(port, ''), AUDIENCE_URL: `http://127.0.0.1:${port}` };
          const ran = await runToEnd(PROGRAM, args, env);
          record(`audience ${command.slice(0, 2).join(' ')}: spawn to exit`, ran.ms);
          record(`audience ${command.slice(0, 2).join(' ')}: CPU`, ran.cpuMs);
        }
      await serve.stop();
      const emulate = await startProgram(['emulate'], emulateEnv(variant), emulatorReady);
      record(`emulate${label}: CPU to ready`, emulate.cpuMs);
      record(`emulate${label}: spawn to ready`, emulate.readyMs);
      await emulate.stop();
    }
    loads.push(os.loadavg()[0]);
    console.log(`round ${round} of ${RUNS} done, load average ${os.loadavg()[0].toFixed(1)}`);
  }
} finally {
  await fs.rm(scratch, { recursive: true, force: true });
}

const empty = median(results.get('empty script')!);
console.log(
  `\nload average (1 min) at the end of each round: ${loads.map((l) => l.toFixed(1)).join(', ')}; ${os.cpus().length} CPUs`,
);
for (const [name, xs] of results)
  console.log(
    `${name.padEnd(42)} ${summary(xs)}${name.includes('CPU') ? `, ${(median(xs) / empty).toFixed(1)} × the empty script's` : ''}`,
  );

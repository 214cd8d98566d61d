/**
 * `npm run bench:emulator`: how long `audience emulate` takes to serve, and a reset (issue 27,
 * docs/emulator.md). Each run spawns `bin/audience emulate` (PORT=0, its own temporary folder and
 * database copied from the prepared cluster), and times the spawn to its "ready" line (the process's
 * whole start: Node, the modules, the database, the ready account) besides the start the program
 * reports itself (from its call of startEmulator). Then, on the last emulator, it writes
 * BENCH_EMULATOR_PROFILES profiles (20) before each reset and times POST /_emulator/reset
 * (BENCH_EMULATOR_RESETS, 20) as a client sees it. The prepared cluster is made first if missing
 * (`audience emulate --prepare`, timed apart: once per machine and schema). BENCH_EMULATOR_RUNS (5)
 * starts. The load average is printed with the results: the machine is shared; so is the CPU time
 * the program's Node process used to start, which no load adds to.
 */
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

const ROOT = path.resolve(import.meta.dirname, '..');
const PROGRAM = path.join(ROOT, 'bin', 'audience');
const RUNS = Number(process.env.BENCH_EMULATOR_RUNS ?? 5);
const RESETS = Number(process.env.BENCH_EMULATOR_RESETS ?? 20);
const PROFILES = Number(process.env.BENCH_EMULATOR_PROFILES ?? 20);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const summary = (xs: number[]) =>
  `median ${Math.round(quantile(xs, 0.5))} ms, min ${Math.round(Math.min(...xs))}, max ${Math.round(Math.max(...xs))} (n=${xs.length})`;

/** CPU seconds (user and system) a process has used: /proc/<pid>/stat, in clock ticks of 1/100 s. */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Started {
  /** CPU time the program's process (Node; PostgreSQL's processes are apart) used to start. */
  cpuMs: number;
  url: string;
  ready: Record<string, string>;
  spawnToReadyMs: number;
  stop(): Promise<void>;
}

async function start(): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(PROGRAM, ['emulate'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<Record<string, string>>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('"emulator":"ready"')) resolve(JSON.parse(line));
    });
    child.once('exit', (code) => reject(new Error(`emulate exited with ${code}`)));
  });
  return {
    cpuMs: cpuSecondsOf(child.pid!) * 1000,
    url: ready.url,
    ready,
    spawnToReadyMs: performance.now() - t0,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

const t = performance.now();
console.log(execFileSync(PROGRAM, ['emulate', '--prepare'], { encoding: 'utf8' }).trim());
console.log(`prepare (a no-op when prepared before): ${Math.round(performance.now() - t)} ms`);

const spawnToReady: number[] = [];
const reported: number[] = [];
const cpu: number[] = [];
let last: Started | undefined;
for (let i = 0; i < RUNS; i++) {
  await last?.stop();
  last = await start();
  spawnToReady.push(last.spawnToReadyMs);
  reported.push(Number(last.ready.started_ms));
  cpu.push(last.cpuMs);
  console.log(
    `start ${i + 1}: ${Math.round(last.spawnToReadyMs)} ms spawn to ready, ${last.ready.started_ms} ms reported`,
  );
}

const emulator = last!;
const token = async () => {
  const res = await fetch(`${emulator.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: emulator.ready.client_id,
      client_secret: emulator.ready.client_secret,
    }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
};
const vendor = emulator.ready.vendor;
const resets: number[] = [];
for (let i = 0; i < RESETS; i++) {
  const bearer = await token();
  for (let p = 0; p < PROFILES; p++) {
    const res = await fetch(
      `${emulator.url}/audience/keyspaces/com.${vendor}1.keyspaces.email/profiles/p${p}@example.com/sections/com.${vendor}1.sections.user-created.shop/attributes`,
      {
        method: 'PATCH',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/merge-patch+json' },
        body: '{}',
      },
    );
    if (!res.ok) throw new Error(`profile write: ${res.status} ${await res.text()}`);
  }
  const r0 = performance.now();
  const res = await fetch(`${emulator.url}/_emulator/reset`, { method: 'POST' });
  resets.push(performance.now() - r0);
  if (res.status !== 204) throw new Error(`reset: ${res.status} ${await res.text()}`);
}
await emulator.stop();

console.log(
  `\nload average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} on ${os.cpus().length} CPUs`,
);
console.log(`start, spawn to ready:     ${summary(spawnToReady)}`);
console.log(`start, reported by emulate: ${summary(reported)}`);
console.log(`start, CPU time of the Node process (a floor of the start on an idle machine): ${summary(cpu)}`);
console.log(`reset after ${PROFILES} profile writes: ${summary(resets)}`);

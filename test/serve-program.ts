import { spawn, execFile, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, vi } from 'vitest';
import { freePort } from '../src/store/embedded.ts';
import { stopProcess } from './app.ts';
import { atFileEnd, scratchFolder } from './scratch.ts';
import { START_BOUND_MS, until } from './until.ts';

// What the tests of the real program (test/serve-*.test.ts) share: `audience serve` in a process of
// its own, its command line, and one program per test file on a data directory of its own.

export const ROOT = path.resolve(import.meta.dirname, '..');
export const NODE = path.join(ROOT, 'node_modules', '.bin', 'node');
export const run = promisify(execFile);

/** `audience serve` as `npm start` runs it, in its own process, on a data directory of its own. */
export class Program {
  child!: ChildProcess;
  output = '';
  readonly dataDir: string;
  readonly port: number;
  /** The user and group to run as (the tests' own when absent). */
  readonly user: { uid: number; gid: number } | undefined;
  constructor(dataDir: string, port: number, user?: { uid: number; gid: number }) {
    this.dataDir = dataDir;
    this.port = port;
    this.user = user;
  }
  /** Settings of the next start beyond the data directory and port (VENDOR …). */
  settings: Record<string, string> = {};
  get env() {
    return {
      ...process.env,
      DATA_DIR: this.dataDir,
      PORT: String(this.port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DATABASE_URL: '',
      ...this.settings,
    };
  }
  /** Starts the program; `detached`: in a process group of its own, which a test can kill whole. */
  async start(options: { detached?: boolean } = {}): Promise<void> {
    this.output = '';
    const child = spawn(path.join(ROOT, 'bin', 'audience'), ['serve'], {
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.detached ?? false,
      ...this.user,
    });
    this.child = child;
    // A test that ends without stopping it (a failure) leaves no program, nor its database, running.
    atFileEnd(() => stopProcess(child, 'SIGTERM'));
    this.child.stdout!.on('data', (d) => (this.output += d));
    this.child.stderr!.on('data', (d) => (this.output += d));
    // Ready is a state to wait for: a start takes seconds of CPU, which a busy machine spreads over a
    // minute or more; START_BOUND_MS is the outer bound, for a program that never gets there.
    const deadline = Date.now() + START_BOUND_MS;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`serve exited: ${this.output}`);
      const ready = await fetch(`http://127.0.0.1:${this.port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`serve did not become ready in ${START_BOUND_MS / 1000} s: ${this.output}`);
  }
  stop(signal: NodeJS.Signals): Promise<number | null> {
    return new Promise((resolve) => {
      this.child.once('exit', (code) => resolve(code));
      this.child.kill(signal);
    });
  }
  /** The command line, against this server: what it prints as JSON; it fails on a non-zero exit. */
  async cli(...args: string[]): Promise<any> {
    const { stdout } = await run(path.join(ROOT, 'bin', 'audience'), args, { env: this.env });
    return JSON.parse(stdout);
  }
  /** The command line, against this server (or where `env` says), however it exits. */
  async exec(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(path.join(ROOT, 'bin', 'audience'), args, { env: { ...this.env, ...env } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }
  /** The command line with `input` on its standard input, however it exits. */
  execWithInput(args: string[], input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(path.join(ROOT, 'bin', 'audience'), args, { env: this.env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.once('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }
  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }
  /** The whole JSON lines of the output so far, parsed. */
  logLines(): Array<Record<string, any>> {
    return this.output
      .split('\n')
      .slice(0, -1)
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
  }
  /** The log lines, once one matches: the program's output arrives apart from its answers. */
  async logLinesWith(match: (line: Record<string, any>) => boolean): Promise<Array<Record<string, any>>> {
    await until('the log line', () => this.logLines().some(match));
    return this.logLines();
  }
}

export async function tokenFor(program: Program, clientId: string, clientSecret: string): Promise<Response> {
  return fetch(program.url('/oauth/token'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
}

export let dataDir: string;
export let program: Program;

/** Starts the test file's program before its tests; it is stopped and its data directory removed when the file ends. */
export function serveProgram(): void {
  // Every test here starts real programs (a server, command-line runs, each a Node process loading the
  // program), whose seconds of CPU a busy machine stretches into minutes: the bound is an outer one,
  // for a test that hangs, above the program's own START_BOUND_MS, so a start that fails says so.
  vi.setConfig({ testTimeout: 2 * START_BOUND_MS, hookTimeout: START_BOUND_MS + 60_000 });
  beforeAll(async () => {
    dataDir = await scratchFolder('audience-serve-');
    program = new Program(dataDir, await freePort());
    await program.start();
  });
}

/** Whether a program's process runs. */
const runs = (p: Program) => p.child !== undefined && p.child.exitCode === null && p.child.signalCode === null;

/**
 * One program on one data directory for a test file whose tests kill it (one initdb), in a process
 * group of its own as a terminal would start it: answers the function each test calls for the
 * program, which starts it unless it runs. It is stopped when the file ends.
 */
export function detachedProgram(prefix: string): () => Promise<Program> {
  let program: Program;
  // Each test waits for states (a start, a restart after a kill) by until()'s bound: its own is above that.
  vi.setConfig({ testTimeout: 2 * START_BOUND_MS, hookTimeout: START_BOUND_MS + 60_000 });
  beforeAll(async () => {
    program = new Program(await scratchFolder(prefix), await freePort());
  });
  afterAll(async () => {
    if (runs(program)) await program.stop('SIGTERM');
  });
  return async () => {
    if (!runs(program)) await program.start({ detached: true });
    return program;
  };
}

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readableLine } from '../src/core/log.ts';
import { freePort } from '../src/store/embedded.ts';
import { stopProcess, testDatabase } from './app.ts';
import { atFileEnd, scratchFolder } from './scratch.ts';

// The log of the real program (`audience serve`): readable lines when its standard output is a
// terminal (here a pseudo-terminal made by util-linux's `script`), JSON lines through a pipe, and
// in both the same redaction: no address of a profile key in a request line.

const PROGRAM = path.resolve(import.meta.dirname, '..', 'bin', 'audience');
const ADDRESS = 'jane.doe@example.com';

let dataDir: Promise<string> | undefined;

/**
 * `audience serve` on the tests' PostgreSQL (a database of this file's) and one data directory (its
 * secrets seal the database's signing key), with `wrap` around it; its output.
 */
async function serve(wrap: (command: string) => [string, string[]]) {
  const port = await freePort();
  const env = {
    ...process.env,
    DATA_DIR: await (dataDir ??= scratchFolder('audience-log-')),
    DATABASE_URL: await testDatabase(),
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    LOG_FORMAT: '',
  };
  const [command, args] = wrap(PROGRAM);
  // Standard input stays open: `script` ends its terminal's session at the end of its input.
  const child = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  atFileEnd(() => stopProcess(child, 'SIGKILL'));
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const until = async (what: RegExp) => {
    while (!what.test(output)) {
      if (child.exitCode !== null) throw new Error(`the program ended: ${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  await until(/listening/);
  // A request whose path holds an address; it is refused (no token), and logged.
  const res = await fetch(
    `http://127.0.0.1:${port}/audience/keyspaces/com.vendor1.keyspaces.email/profiles/${encodeURIComponent(ADDRESS)}/sections/com.vendor1.sections.user-created.shop/attributes`,
  );
  expect(res.status).toBe(401);
  await until(/request completed|GET \/audience/);
  return { child, exited, output: () => output, until };
}

/** The program's Node process: the child of `script`'s (bin/audience replaces itself with Node). */
async function programUnder(script: ChildProcess): Promise<number> {
  const children = await fs.readFile(`/proc/${script.pid}/task/${script.pid}/children`, 'utf8');
  return Number(children.trim().split(' ')[0]);
}

describe('the log (LOG_FORMAT unset)', () => {
  it('is readable lines on a terminal, with the redaction of the JSON lines', async () => {
    const run = await serve((program) => ['script', ['-qefc', `exec ${program} serve`, '/dev/null']]);
    const node = await programUnder(run.child);
    process.kill(node, 'SIGTERM');
    await run.until(/stopped/);
    await run.exited;
    const lines = run.output().split(/\r?\n/);
    expect(lines.some((l) => /^\d\d:\d\d:\d\d\.\d{3} INFO {2}starting {2}roles=\["api","worker"\]/.test(l))).toBe(true);
    expect(lines.some((l) => /INFO {2}listening: .*\/console/.test(l))).toBe(true);
    const request = lines.find((l) => / GET \/audience\/keyspaces\//.test(l));
    expect(request).toMatch(/INFO {2}GET \/audience\/keyspaces\/\S+ 401 AUD-\d+ \d+\.\d ms/);
    expect(lines.some((l) => /INFO {2}stopped {2}code=0/.test(l))).toBe(true);
    expect(run.output()).not.toContain('{"level"');
    expect(run.output()).not.toContain(ADDRESS);
    expect(run.output()).not.toContain(encodeURIComponent(ADDRESS));
  });

  it('is JSON lines through a pipe', async () => {
    const run = await serve((program) => [program, ['serve']]);
    run.child.kill('SIGTERM');
    await run.exited;
    const lines = run
      .output()
      .split('\n')
      .filter((l) => l !== '');
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    const request = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'request completed');
    expect(request.res.statusCode).toBe(401);
    expect(run.output()).not.toContain(ADDRESS);
    expect(run.output()).not.toContain(encodeURIComponent(ADDRESS));
  });
});

describe('a readable line', () => {
  it('shows the time, level, message and fields, and an error with its stack', () => {
    const time = new Date(2026, 10, 28, 9, 5, 7, 42).getTime();
    expect(readableLine(JSON.stringify({ level: 40, time, pid: 1, hostname: 'h', msg: 'odd', files: 3 }), false)).toBe(
      '09:05:07.042 WARN  odd  files=3\n',
    );
    const err = { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x (y.ts:1:2)' };
    expect(readableLine(JSON.stringify({ level: 50, time, msg: 'job error', err }), false)).toBe(
      '09:05:07.042 ERROR job error\n    Error: boom\n        at x (y.ts:1:2)\n',
    );
    expect(readableLine(JSON.stringify({ level: 50, time, msg: 'x' }), true)).toContain('\x1b[31mERROR\x1b[0m');
    expect(readableLine('not json', false)).toBe('not json\n');
  });

  it('shows a request as method, path, status, code and time', () => {
    const line = {
      level: 30,
      time: Date.now(),
      reqId: 'req-1',
      req: { method: 'GET', url: '/a/:key', route: '/a/:key', remoteAddress: '127.0.0.1' },
      res: { statusCode: 404, code: 'AUD-1', account: 'acc' },
      responseTime: 1.25,
      msg: 'request completed',
    };
    expect(readableLine(JSON.stringify(line), false)).toMatch(
      / INFO {2}GET \/a\/:key 404 AUD-1 1\.3 ms {2}reqId=req-1 account=acc remoteAddress=127\.0\.0\.1\n$/,
    );
  });
});

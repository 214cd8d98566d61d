import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { freePort } from '../src/store/embedded.ts';
import { stopProcess } from './app.ts';
import { scratchFolder } from './scratch.ts';
import { NODE, Program, ROOT, detachedProgram } from './serve-program.ts';
import { START_BOUND_MS } from './until.ts';

// One program for the file: the crash test kills its process group and starts it again.
const started = detachedProgram('audience-crash-');

/**
 * Runs `audience serve` until it exits (a start that must fail): its exit code and output. One
 * that does not exit is killed when the test ends.
 */
function failedStart(
  dataDir: string,
  port: number,
  settings: Record<string, string> = {},
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE, [path.join(ROOT, 'src', 'main.js'), 'serve'], {
      env: { ...new Program(dataDir, port).env, ...settings },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onTestFinished(() => stopProcess(child, 'SIGKILL'));
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** Whether the embedded database of a data directory still runs (its postmaster's pid from postmaster.pid). */
async function databaseRuns(dataDir: string): Promise<boolean> {
  const pid = Number(
    (await fs.readFile(path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid'), 'utf8').catch(() => '')).split(
      '\n',
    )[0],
  );
  if (!pid) return false;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat[stat.lastIndexOf(')') + 2] !== 'Z';
}

describe('crashes, restarts and a data directory in use', () => {
  it(
    'starts again at once after kill -9 of its whole process group, five times, with every acknowledged write kept',
    async () => {
      const crashing = await started();
      const names: string[] = [];
      for (let round = 0; round < 5; round++) {
        const name = `Written before crash ${round}`;
        await crashing.cli('account', 'create', '--name', name);
        names.push(name);
        const exited = new Promise((resolve) => crashing.child.once('exit', resolve));
        process.kill(-crashing.child.pid!, 'SIGKILL');
        await exited;
        await crashing.start({ detached: true });
        const listed = (await crashing.cli('account', 'list')).items.map((a: { name: string }) => a.name);
        expect(listed).toEqual(expect.arrayContaining(names));
      }
      // Six starts, five of them right after the program's death, while its postmaster, signalled by
      // the kernel (setpriv --pdeathsig), shuts down or has just done so. Each start has its own
      // bound (START_BOUND_MS): at a load of 28 six of them took more than the 180 s this test had.
    },
    6 * START_BOUND_MS,
  );

  it('refuses a second program on a data directory in use, naming the owner, and leaves the first one serving', async () => {
    const program = await started();
    const second = await failedStart(program.dataDir, await freePort());
    expect(second.code).toBe(1);
    expect(second.output).toContain(`is in use by the program with pid ${program.child.pid}`);
    expect((await fetch(program.url('/readyz'))).status).toBe(200);
    expect(await program.cli('account', 'list')).toEqual({ items: expect.any(Array) });
  });

  it('refuses a busy port before it creates anything: no database, no secret, no demo account', async () => {
    const program = await started();
    const dir = await scratchFolder('audience-port-');
    const failed = await failedStart(dir, program.port);
    expect(failed.code).toBe(1);
    expect(failed.output).toContain(`PORT ${program.port} is in use on 127.0.0.1 (EADDRINUSE)`);
    expect(await databaseRuns(dir)).toBe(false);
    expect(await fs.readdir(dir)).toEqual([]);
    // The directory is free for the next start.
    const next = new Program(dir, await freePort());
    await next.start();
    expect(await next.stop('SIGTERM')).toBe(0);
  });

  it('refuses at once a DATA_DIR where no folder can be made (under /proc), naming the variable and the path', async () => {
    for (const dir of ['/proc/audience-nope', '/proc/self']) {
      const failed = await failedStart(dir, await freePort());
      expect(failed.code).toBe(1);
      expect(failed.output).toContain(`DATA_DIR ${dir} cannot be used: ENOENT`);
    }
  });

  it('refuses a DATABASE_URL that is not a postgres:// URL, and names it, without its password, when it cannot be reached', async () => {
    const dir = await scratchFolder('audience-database-url-');
    const schemeless = await failedStart(dir, await freePort(), { DATABASE_URL: 'localhost:5432' });
    expect(schemeless.code).toBe(1);
    expect(schemeless.output).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL');
    const closed = await freePort();
    const refused = await failedStart(dir, await freePort(), {
      DATABASE_URL: `postgresql://audience:hunter2@127.0.0.1:${closed}/audience`,
    });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      `DATABASE_URL postgresql://audience@127.0.0.1:${closed}/audience cannot be reached: connect ECONNREFUSED`,
    );
    expect(refused.output).not.toContain('hunter2');
  });
});

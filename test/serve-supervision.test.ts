import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RESTART_DELAYS_MS } from '../src/store/embedded.ts';
import { Program, detachedProgram, tokenFor } from './serve-program.ts';
import { until } from './until.ts';

// One program on one data directory for the whole file (one initdb): each test starts it unless it
// runs; the last test makes its cluster unusable.
const started = detachedProgram('audience-supervised-');

const KEYSPACE = 'com.vendor1.keyspaces.crm-id';
const SHOP = 'com.vendor1.sections.user-created.shop';
/** Kills of the postmaster under writes: 5 in every test run, 20 with KILL_CYCLES=20 (npm run bench:database-kills). */
const CYCLES = Number(process.env.KILL_CYCLES ?? 5);
const EXITED = 'the embedded PostgreSQL exited; starting it again';

/** How many deaths of its postmaster a program has logged so far. */
const deathsSeen = (serving: Program) => serving.output.split(EXITED).length - 1;

/** The pid in the postmaster.pid of a data directory's cluster; undefined when there is none. */
async function postmasterPid(dir: string): Promise<number | undefined> {
  const file = path.join(dir, 'postgres', 'cluster', 'postmaster.pid');
  const pid = Number((await fs.readFile(file, 'utf8').catch(() => '')).split('\n')[0]);
  return pid > 0 ? pid : undefined;
}

/** Whether a process runs (a zombie does not). */
async function processRuns(pid: number): Promise<boolean> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !'ZX'.includes(stat[stat.lastIndexOf(')') + 2]);
}

/** The processes whose parent is `pid`. */
async function childrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fs.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(entry));
  }
  return children;
}

/** The status of a request, 0 when it got no answer (the program not listening). */
const statusOf = (answer: Promise<Response>) =>
  answer.then(
    async (r) => (await r.arrayBuffer(), r.status),
    () => 0,
  );

/** The demo account of a program with a token, its limits lifted for the writers. */
async function demoOf(serving: Program): Promise<{ headers: Record<string, string> }> {
  const demo = JSON.parse(await fs.readFile(path.join(serving.dataDir, 'demo-credentials.json'), 'utf8'));
  await serving.cli(
    'account',
    'update',
    '--account',
    demo.account_id,
    '--limit',
    'requests_per_second=100000',
    '--limit',
    'profile_export_requests_per_second=1000',
  );
  const { access_token } = (await (await tokenFor(serving, demo.client_id, demo.client_secret)).json()) as {
    access_token: string;
  };
  return { headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' } };
}

/** Creates the profile of `key` in the demo shop: the status of the answer. */
function createProfile(serving: Program, headers: Record<string, string>, key: string): Promise<number> {
  return statusOf(
    fetch(serving.url(`/audience/keyspaces/${KEYSPACE}/sections/${SHOP}/profiles`), {
      method: 'POST',
      headers,
      body: JSON.stringify({ profile_key: key }),
    }),
  );
}

/** Kills the program's postmaster with SIGKILL: its pid. */
async function killPostmaster(serving: Program): Promise<number> {
  const pid = (await postmasterPid(serving.dataDir))!;
  process.kill(pid, 'SIGKILL');
  return pid;
}

describe('the embedded database, supervised', () => {
  it(`kill -9 of the postmaster under writes, ${CYCLES} times: serving again after each, every acknowledged write kept`, async () => {
    const program = await started();
    const { headers } = await demoOf(program);
    const acknowledged: string[] = [];
    const refused = new Map<number, number>();
    let writing = true;
    let n = 0;
    // Writers that go on through every kill: a write is acknowledged by its 201 only.
    const writer = async () => {
      while (writing) {
        const key = `w-${n++}`;
        const status = await createProfile(program, headers, key);
        if (status === 201) acknowledged.push(key);
        else refused.set(status, (refused.get(status) ?? 0) + 1);
        // A client that is refused waits a little before it tries again, as one honouring
        // Retry-After would (if for less): the writers must not starve the database's recovery.
        if (status !== 201) await new Promise((r) => setTimeout(r, 100));
      }
    };
    const writers = [writer(), writer(), writer()];
    const recoveries: number[] = [];
    try {
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        const before = acknowledged.length;
        await until('a write before the kill', () => acknowledged.length > before);
        const deaths = deathsSeen(program);
        const killed = performance.now();
        const pid = await killPostmaster(program);
        // The program saw it die, then serves again: ready, and a write of the test's own succeeds.
        await until('the program to see the kill', () => deathsSeen(program) > deaths);
        await until('/readyz 200', async () => (await statusOf(fetch(program.url('/readyz')))) === 200);
        await until('a write after the kill', async () => {
          const key = `after-${cycle}-${n++}`;
          const created = (await createProfile(program, headers, key)) === 201;
          if (created) acknowledged.push(key);
          return created;
        });
        recoveries.push(performance.now() - killed);
        expect(await postmasterPid(program.dataDir)).not.toBe(pid);
      }
    } catch (err) {
      // What the program logged last (its request lines aside) says why it did not come back: in
      // the error, which a run's summary shows (where the test's output may be cut).
      const last = program.output
        .split('\n')
        .filter((l) => !l.includes('request completed'))
        .slice(-40)
        .join('\n');
      throw new Error(`${(err as Error).message}; what the program logged last:\n${last}`, { cause: err });
    } finally {
      writing = false;
      await Promise.all(writers);
    }
    // Only the answer of a database away: 503 (AUD-2, with Retry-After), never a 500.
    expect([...refused.keys()].filter((status) => status !== 503)).toEqual([]);
    for (const key of acknowledged) {
      const res = await fetch(
        program.url(`/audience/keyspaces/${KEYSPACE}/profiles/${key}/sections/${SHOP}/attributes`),
        {
          headers,
        },
      );
      expect(res.status, key).toBe(200);
    }
    const seconds = recoveries.map((ms) => (ms / 1000).toFixed(1));
    const lines = program.logLines();
    const starts = lines.filter((l) => l.msg === 'the embedded PostgreSQL is up again').map((l) => l.attempt);
    console.log(
      `kill -9 of the postmaster to serving again (${CYCLES} kills, ${acknowledged.length} writes acknowledged, ` +
        `load ${os.loadavg()[0].toFixed(1)}): ${seconds.join(' ')} s; max ${(Math.max(...recoveries) / 1000).toFixed(1)} s; ` +
        `the start that came up: ${starts.join(' ')}`,
    );
  }, 600_000);

  it('a process of the dead postmaster that does not go by itself (stopped) is ended by the next start, which comes up at once', async () => {
    const program = await started();
    const { headers } = await demoOf(program);
    expect(await createProfile(program, headers, 'before-the-stopped-backend')).toBe(201);
    const postmaster = (await postmasterPid(program.dataDir))!;
    // A child of the postmaster (a backend, the checkpointer …) holds its shared memory, as one
    // busy in a long system call does on a loaded machine: stopped, it cannot notice the death.
    const children = await childrenOf(postmaster);
    expect(children.length).toBeGreaterThan(0);
    const held = children[0];
    process.kill(held, 'SIGSTOP');
    try {
      const deaths = deathsSeen(program);
      const before = program.logLines().length;
      await killPostmaster(program);
      await until('the program to see the kill', () => deathsSeen(program) > deaths);
      await until('/readyz 200', async () => (await statusOf(fetch(program.url('/readyz')))) === 200);
      expect(await createProfile(program, headers, 'after-the-stopped-backend')).toBe(201);
      expect(await processRuns(held)).toBe(false);
      const lines = program.logLines().slice(before);
      expect(lines.filter((l) => l.msg === 'the embedded PostgreSQL did not start')).toEqual([]);
      expect(lines.find((l) => l.msg === 'the embedded PostgreSQL is up again')).toMatchObject({ attempt: 1 });
    } finally {
      try {
        process.kill(held, 'SIGKILL');
      } catch {
        // Ended by the program, as it should be.
      }
    }
  });

  it("a job across a kill completes in the worker thread's pool, and one enqueued after the restart", async () => {
    const program = await started();
    const { headers } = await demoOf(program);
    const count = async () => {
      const res = await fetch(program.url('/audience/profiles/reports/consents/count'), {
        method: 'POST',
        headers,
        body: JSON.stringify({
          section_discriminator: SHOP,
          topic_discriminators: ['com.vendor1.topics.user-created.weekly-news'],
          channel_discriminator: 'com.vendor1.channels.email',
        }),
      });
      expect(res.status, await res.clone().text()).toBe(201);
      return new URL(((await res.json()) as { poll_url: string }).poll_url).pathname;
    };
    // The v2 poll: 202 while queued or running, 200 with the count once the worker has run it.
    const ready = (poll: string) =>
      until(
        `the count at ${poll}`,
        async () => (await statusOf(fetch(program.url(`/v2${poll}`), { headers }))) === 200,
      );
    const across = await count();
    const deaths = deathsSeen(program);
    await killPostmaster(program);
    await until('the program to see the kill', () => deathsSeen(program) > deaths);
    await ready(across);
    await ready(await count());
  });

  it('audience dump copies the embedded database of the program that serves, online, while it keeps serving', async () => {
    const program = await started();
    const { headers } = await demoOf(program);
    expect(await createProfile(program, headers, 'dumped-online')).toBe(201);
    const deaths = deathsSeen(program);
    const file = path.join(program.dataDir, 'online.dump');
    // DATA_DIR's: the database of the running program, found through its claim on the directory.
    const summary = await program.cli('dump', file);
    expect(summary.dumped).toBe(file);
    expect(summary.tables.profiles).toBeGreaterThan(0);
    expect(summary.tables.accounts).toBeGreaterThan(0);
    expect((await fs.stat(file)).size).toBeGreaterThan(0);
    expect(deathsSeen(program)).toBe(deaths);
    expect(await createProfile(program, headers, 'after-the-dump')).toBe(201);
  });

  it('a terminal Ctrl-C (SIGINT to the whole process group) drains, stops the database last and logs "stopped"', async () => {
    const program = await started();
    const { headers } = await demoOf(program);
    // Work in flight: writes going on while the signal arrives.
    let writing = true;
    const writes = (async () => {
      for (let i = 0; writing; i++) await createProfile(program, headers, `ctrl-c-${i}`);
    })();
    const postmaster = (await postmasterPid(program.dataDir))!;
    // What the program logs from the signal on (earlier tests may have killed its database).
    const before = program.logLines().length;
    const exited = new Promise<number | null>((resolve) => program.child.once('exit', resolve));
    process.kill(-program.child.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    writing = false;
    await writes;
    const lines = program.logLines().slice(before);
    expect(lines.at(-1)).toMatchObject({ msg: 'stopped', code: 0 });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(lines.map((l) => l.msg)).not.toContain(EXITED);
    expect(await processRuns(postmaster)).toBe(false);
    expect(await fs.readdir(path.join(program.dataDir, 'postgres'))).not.toContain('owner.pid');
  });

  it('a program killed with SIGKILL takes its database with it', async () => {
    const program = await started();
    const postmaster = (await postmasterPid(program.dataDir))!;
    expect(await program.stop('SIGKILL')).toBe(null);
    await until('the postmaster to stop', async () => !(await processRuns(postmaster)));
  });

  it('a database that cannot come back: one line per failed start, /healthz up meanwhile, then a fatal line and exit 1', async () => {
    const program = await started();
    // A setting PostgreSQL refuses: every start after the kill fails.
    await fs.appendFile(
      path.join(program.dataDir, 'postgres', 'cluster', 'postgresql.conf'),
      '\nno_such_setting = 1\n',
    );
    const exited = new Promise<number | null>((resolve) => program.child.once('exit', resolve));
    await killPostmaster(program);
    await until('the program to see the kill', () => deathsSeen(program) > 0);
    // Alive while it tries: a liveness probe must not restart a program that may recover.
    expect(await statusOf(fetch(program.url('/healthz')))).toBe(200);
    expect(await exited).toBe(1);
    const lines = program.logLines();
    const failed = lines.filter((l) => l.msg === 'the embedded PostgreSQL did not start');
    expect(failed.map((l) => l.attempt)).toEqual(RESTART_DELAYS_MS.map((_, i) => i + 1));
    expect(failed[0].reason).toMatch(/postgresql\.conf" contains errors/);
    const fatal = lines.find((l) => l.level === 60)!;
    expect(fatal.msg).toContain('the embedded database cannot come back');
    expect(fatal.err.message).toContain(`after ${RESTART_DELAYS_MS.length} attempts`);
    expect(lines.at(-1)).toMatchObject({ msg: 'stopped', code: 1 });
  });
});

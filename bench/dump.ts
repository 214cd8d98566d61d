/**
 * `npm run bench:dump`: `audience dump` and `audience restore` against `pg_dump -Fc` and
 * `pg_restore` (Debian's PostgreSQL 15 client) of the same database on one PostgreSQL 15, in one
 * run (docs/benchmarks.md "Dump and restore").
 *
 * A plain PostgreSQL 15 (scripts/citus.sh plain) on BENCH_DUMP_PORT (9960); the program
 * (`node src/main.js serve`, DATABASE_URL at it) makes the schema and the demo account, and stops;
 * BENCH_PROFILES (1,000,000) profiles are loaded into the account set-based (bench/profile-load.ts),
 * then VACUUM (ANALYZE). Then, BENCH_ROUNDS (1) rounds, the order of the two tools swapped every
 * round: a dump to a file by each (`bin/audience dump FILE`; `pg_dump -Fc`, whose compression is
 * zlib at its default level, as the program's gzip), and a restore of each file into a new empty
 * database of the same server (`bin/audience restore FILE`; `pg_restore --no-owner`, one job, as
 * the program's one connection). Each: wall time, the CPU time and peak RSS of the client
 * process (GNU time), the CPU time of the PostgreSQL server (its postmaster and every backend, ended
 * ones included), the file's size; the 1-minute load average at its end. The restored databases' row counts are
 * checked against the source's. Needs root and the workplace's cluster script (scripts/citus.sh available).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../src/store/embedded.ts';
import {
  log,
  median,
  onCleanup,
  postmasterCpuMs,
  request,
  ROOT,
  runBench,
  sleep,
  table,
  tempDir,
  track,
} from './harness.ts';
import { definitionsOf, loadProfiles } from './profile-load.ts';

const PROFILES = Number(process.env.BENCH_PROFILES ?? 1_000_000);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const PORT = Number(process.env.BENCH_DUMP_PORT ?? 9960);
const PG_BIN = '/usr/lib/postgresql/15/bin';
const DEADLINE_MS = 60 * 60 * 1000;

interface Timed {
  s: number;
  clientS: number;
  rssMb: number;
  serverS: number;
  bytes: number;
  load: number;
}

/** Runs a command to its end under GNU time: wall seconds, the client's CPU seconds and its peak RSS in MB. */
async function timed(
  command: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ s: number; clientS: number; rssMb: number }> {
  const started = performance.now();
  const child = spawn('/usr/bin/time', ['-f', '%U %S %M', ...command], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  track(child, command[0]);
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${command.join(' ')} exited with ${code}: ${err.slice(-2000)}`);
  // Its last line: user and system seconds, peak RSS in KB.
  const [user, system, kb] = err.trim().split('\n').at(-1)!.split(' ').map(Number);
  return { s: (performance.now() - started) / 1000, clientS: user + system, rssMb: kb / 1024 };
}

await runBench(DEADLINE_MS, async () => {
  const dir = await tempDir('audience-bench-dump-');
  await fs.chmod(dir, 0o755);
  const cluster = path.join(dir, 'pg15');
  onCleanup(async () => {
    execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), 'down', cluster], { stdio: 'ignore' });
  });
  const out = execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), 'plain', cluster, String(PORT)], {
    encoding: 'utf8',
  });
  const server = out
    .split('\n')
    .find((l) => l.startsWith('DATABASE_URL='))!
    .slice('DATABASE_URL='.length);
  const pidFile = path.join(cluster, 'node0', 'postmaster.pid');
  const url = (database: string) => {
    const u = new URL(server);
    u.pathname = `/${database}`;
    return u.toString();
  };
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  // The cluster may stop before a client ends (clean-up after a failure): its goodbye is no failure.
  admin.on('error', () => {});
  onCleanup(() => admin.end());
  const version = (await admin.query<{ v: string }>('select version() as v')).rows[0].v;
  console.log(`${version}; ${PROFILES} profiles; ${ROUNDS} round(s); ${os.cpus().length} cores`);
  await admin.query('create database source');

  // The schema and the demo account, by the program itself.
  const dataDir = await tempDir('audience-bench-dump-data-');
  const port = await freePort();
  const program = spawn(path.join(ROOT, 'bin', 'audience'), ['serve'], {
    env: { ...process.env, DATABASE_URL: url('source'), DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  track(program, 'audience serve');
  while ((await request(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status !== 200) await sleep(250);
  const { account_id: accountId } = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
  program.kill('SIGTERM');
  await new Promise((resolve) => program.once('exit', resolve));

  const db = new pg.Client({ connectionString: url('source') });
  await db.connect();
  db.on('error', () => {});
  onCleanup(() => db.end());
  const loaded = await loadProfiles(db, accountId, await definitionsOf(db, accountId), PROFILES);
  log(`loaded ${PROFILES} profiles in ${loaded.loadS.toFixed(1)} s (VACUUM (ANALYZE) ${loaded.analyzeS.toFixed(1)} s)`);
  const counts = async (c: pg.ClientBase) =>
    (
      await c.query<{ name: string; n: string }>(
        `select relname as name, (xpath('/row/n/text()', query_to_xml(format('select count(*) as n from %I', relname), false, true, '')))[1]::text as n
         from pg_class where relnamespace = 'public'::regnamespace and relkind = 'r' and relname <> 'schema_migrations' order by 1`,
      )
    ).rows;
  const expected = await counts(db);
  const sourcePid = (await db.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
  const { size } = (
    await db.query<{ size: string }>('select pg_size_pretty(pg_database_size(current_database())) as size')
  ).rows[0];
  log(`source database: ${size}`);

  /**
   * Until the client's backends have ended and been reaped, so that their CPU time is the
   * postmaster's children's: they leave pg_stat_activity before their process exits.
   */
  const settled = async () => {
    const others = async () =>
      (
        await admin.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid() and pid <> $1`,
          [sourcePid],
        )
      ).rows[0].n;
    while ((await others()) > 0) await sleep(100);
    await sleep(1000);
  };

  /** One measured command: wall, client and server CPU, the size of `file`, the load average at its end. */
  const measure = async (command: string[], file: string, env?: NodeJS.ProcessEnv): Promise<Timed> => {
    const serverBefore = await postmasterCpuMs(pidFile);
    const { s, clientS, rssMb } = await timed(command, env);
    await settled();
    const serverS = ((await postmasterCpuMs(pidFile)) - serverBefore) / 1000;
    return { s, clientS, rssMb, serverS, bytes: (await fs.stat(file)).size, load: os.loadavg()[0] };
  };
  const results: Record<string, Timed[]> = { 'audience dump': [], pg_dump: [], 'audience restore': [], pg_restore: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const audienceFile = path.join(dir, `audience-${round}.dump`);
    const pgFile = path.join(dir, `pg-${round}.dump`);
    const connection = ['-h', '127.0.0.1', '-p', String(PORT), '-U', 'postgres'];
    const dumps = [
      () =>
        measure([path.join(ROOT, 'bin', 'audience'), 'dump', audienceFile], audienceFile, {
          ...process.env,
          DATABASE_URL: url('source'),
        }).then((t) => results['audience dump'].push(t)),
      () =>
        measure([`${PG_BIN}/pg_dump`, ...connection, '-Fc', '-f', pgFile, 'source'], pgFile).then((t) =>
          results.pg_dump.push(t),
        ),
    ];
    const restores = [
      async () => {
        await admin.query(`create database restored_audience_${round}`);
        results['audience restore'].push(
          await measure([path.join(ROOT, 'bin', 'audience'), 'restore', audienceFile], audienceFile, {
            ...process.env,
            DATABASE_URL: url(`restored_audience_${round}`),
          }),
        );
      },
      async () => {
        await admin.query(`create database restored_pg_${round}`);
        results.pg_restore.push(
          await measure(
            [`${PG_BIN}/pg_restore`, ...connection, '--no-owner', '-d', `restored_pg_${round}`, pgFile],
            pgFile,
          ),
        );
      },
    ];
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) await dumps[i]();
    for (const i of order) await restores[i]();
    for (const database of [`restored_audience_${round}`, `restored_pg_${round}`]) {
      const c = new pg.Client({ connectionString: url(database) });
      await c.connect();
      const got = await counts(c).finally(() => c.end());
      if (JSON.stringify(got) !== JSON.stringify(expected))
        throw new Error(`${database} has other row counts than the source: ${JSON.stringify(got)}`);
      await admin.query(`drop database ${database}`);
    }
    log(`round ${round + 1}: both restores have the source's row counts`);
  }

  const m = (name: string, pick: (t: Timed) => number) => median(results[name].map(pick));
  const rows = [['measure', 'audience', 'pg_dump / pg_restore', 'audience / pg', 'load avg (audience; pg)']];
  for (const [what, ours, theirs] of [
    ['dump', 'audience dump', 'pg_dump'],
    ['restore', 'audience restore', 'pg_restore'],
  ]) {
    for (const [label, pick, digits] of [
      ['wall, s', (t: Timed) => t.s, 1],
      ['client CPU, s', (t: Timed) => t.clientS, 1],
      ['PostgreSQL CPU, s', (t: Timed) => t.serverS, 1],
      ['client peak RSS, MB', (t: Timed) => t.rssMb, 0],
    ] as const)
      rows.push([
        `${what} ${label}`,
        m(ours, pick).toFixed(digits),
        m(theirs, pick).toFixed(digits),
        (m(ours, pick) / m(theirs, pick)).toFixed(2),
        `${m(ours, (t) => t.load).toFixed(2)}; ${m(theirs, (t) => t.load).toFixed(2)}`,
      ]);
  }
  rows.push([
    'file, MB',
    (m('audience dump', (t) => t.bytes) / 1e6).toFixed(1),
    (m('pg_dump', (t) => t.bytes) / 1e6).toFixed(1),
    (m('audience dump', (t) => t.bytes) / m('pg_dump', (t) => t.bytes)).toFixed(2),
    '',
  ]);
  console.log(table(rows));
});

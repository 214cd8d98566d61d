/**
 * `npm run bench:citus`: the program on a Citus cluster against the same program on one
 * PostgreSQL, both Debian's PostgreSQL 15, on this machine in one run (docs/benchmarks.md "Citus
 * cluster against one PostgreSQL (issue 23)").
 *
 * Two databases: one plain PostgreSQL (scripts/citus.sh plain) and a Citus coordinator with two
 * workers (scripts/citus.sh up), each with the program (`node src/main.js serve`, DATABASE_URL at
 * it, the demo account, its limits lifted). Then, on both:
 *
 * 1. Throughput: BENCH_PROFILES (100,000) profiles of the demo account loaded set-based
 *    (bench/profile-load.ts, the load of bench:profiles, one INSERT … SELECT generate_series
 *    through the coordinator), then authenticated GET …/attributes and v2 PATCH …/attributes (first
 *    name) of random loaded profiles with wrk, the two databases alternately (the order swapped
 *    every round), BENCH_ROUNDS rounds; the CPU per request of the program and of each PostgreSQL
 *    node (coordinator, workers), from /proc.
 * 2. Import: BENCH_IMPORT_ROWS rows (300,000) of email, first and last name into the demo
 *    account's Shop section through the import API (create, multipart upload, poll until
 *    completed), single first, then cluster; with the CPU time of the program and of each node.
 * 3. Segments: a new account (the demo manifest, then the two-term segment of bench:segments:
 *    loyalty points > 500 && a page view in the last 30 days) with BENCH_SEGMENT_PROFILES
 *    (1,000,000) profiles loaded set-based as in 1, and a page view for every third profile within
 *    the last 90 days (one INSERT … SELECT); VACUUM (ANALYZE). Then the count
 *    (POST …/reports/segments/count) and the 25-point trend (every 14 days back from now) through
 *    the API, one warm-up and BENCH_SEGMENT_RUNS (3) timed runs each, the databases alternately.
 * 4. Many accounts: BENCH_ACCOUNTS (20) new accounts (operator API, demo manifest) on each,
 *    loaded at once with BENCH_ACCOUNT_PROFILES (50,000) profiles each: with BENCH_ACCOUNTS_BY=load
 *    (default) one set-based load per account on a connection of its own, all at once; with
 *    BENCH_ACCOUNTS_BY=import one import per account through the API, all at once. The time until
 *    the last is done.
 *
 * Every timed figure carries the 1-minute load average at its end, every wrk run the generator's
 * CPU. A failing request is recorded, not fatal: the bench goes on and prints the coordinator's
 * last ERROR lines. The machine is shared and noisy: what counts is the ratio cluster/single of the
 * same run. Settings: those of bench/harness.ts (BENCH_WARMUP_S, BENCH_DURATION_S, BENCH_ROUNDS,
 * BENCH_CONNECTIONS), the ones above, BENCH_ONLY or BENCH_PARTS (throughput,import,segments,accounts:
 * the parts to run, each on its own data) and
 * BENCH_CITUS_PORT (9780: the coordinator; workers on the next two ports, the single PostgreSQL
 * on +10). Needs root, wrk and the workplace's cluster script (scripts/citus.sh available).
 */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../src/store/embedded.ts';
import {
  cpuMsOf,
  log,
  LOAD,
  N_MARK,
  median,
  onCleanup,
  postmasterCpuMs,
  printSetting,
  R_MARK,
  request,
  ROOT,
  runBench,
  runWrk,
  sleep,
  summariseEvents,
  table,
  tempDir,
  track,
  upload,
  within,
  type Load,
} from './harness.ts';
import { definitionsOf, loadedEmail, loadProfiles, type Ids } from './profile-load.ts';

const PROFILES = Math.max(1000, Number(process.env.BENCH_PROFILES ?? 100_000));
const IMPORT_ROWS = Math.max(1000, Number(process.env.BENCH_IMPORT_ROWS ?? 300_000));
const SEGMENT_PROFILES = Math.max(1000, Number(process.env.BENCH_SEGMENT_PROFILES ?? 1_000_000));
const ACCOUNTS = Math.max(1, Number(process.env.BENCH_ACCOUNTS ?? 20));
const ACCOUNT_PROFILES = Math.max(100, Number(process.env.BENCH_ACCOUNT_PROFILES ?? 50_000));
const ACCOUNTS_BY = process.env.BENCH_ACCOUNTS_BY === 'import' ? 'import' : 'load';
const SEGMENT_RUNS = Math.max(1, Number(process.env.BENCH_SEGMENT_RUNS ?? 3));
/** The parts to run (all by default); BENCH_PARTS is the same setting under its earlier name. */
const ONLY = new Set(
  (process.env.BENCH_ONLY ?? process.env.BENCH_PARTS ?? 'throughput,import,segments,accounts')
    .split(',')
    .map((s) => s.trim()),
);
const PORT = Number(process.env.BENCH_CITUS_PORT ?? 9780);
const DEADLINE_MS = Number(process.env.BENCH_DEADLINE_S ?? 5400) * 1000;
const TIME_ZONE = 'Europe/Oslo';
const DAY = 86_400_000;
/** The programs started, for the clean-up. */
const programs: number[] = [];

/** The two-term segment of bench:segments (its first), with the placeholders of docs/manifest.md. */
const SEGMENT = {
  name: 'Bench loyal recent visitors',
  query:
    'section({section}).attribute({attribute:com.{vendor}1.attributes.user-created.loyalty-points@2}).gt(500) && section({section}).event({event:com.{vendor}1.events.page-view}).inLast("events.day", 0, 30)',
};

interface Target {
  name: 'single' | 'cluster';
  url: string;
  pid: number;
  token: string;
  adminToken: string;
  accountId: string;
  databaseUrl: string;
  /** The data directory of the nodes (node0 the coordinator, or the one PostgreSQL). */
  dir: string;
  /** postmaster.pid of each node: the coordinator (or the one PostgreSQL) first. */
  pidFiles: string[];
  section: string;
  ns: string;
  db: pg.Client;
}

/** Starts the databases of a target with scripts/citus.sh; answers its DATABASE_URL. */
function startDatabase(args: string[]): string {
  const out = execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), ...args], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.startsWith('DATABASE_URL='));
  if (!line) throw new Error(`scripts/citus.sh ${args.join(' ')} printed no DATABASE_URL: ${out}`);
  return line.slice('DATABASE_URL='.length);
}

async function api<T>(
  t: Pick<Target, 'url'>,
  token: string,
  method: string,
  urlPath: string,
  body?: unknown,
): Promise<T> {
  const res = await request(`${t.url}${urlPath}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${res.text}`);
  return (res.text ? JSON.parse(res.text) : undefined) as T;
}

/** A connection to a target's database; closed at clean-up unless `closedByCaller`. */
async function connect(url: string, what: string, closedByCaller = false): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: url, statement_timeout: 1_800_000 });
  db.on('error', (err) => log(`${what}: ${err.message}`));
  await within(15_000, what, db.connect());
  if (!closedByCaller) onCleanup(() => db.end());
  return db;
}

/** The program on `databaseUrl`, with the demo account's limits lifted and a token of it. */
async function startTarget(name: Target['name'], databaseUrl: string, dir: string, nodes: number): Promise<Target> {
  const dataDir = await tempDir('audience-bench-citus-');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['src/main.js', 'serve'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      MALLOC_ARENA_MAX: '2',
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    },
  });
  track(child, `audience on ${name}`);
  programs.push(child.pid!);
  const started = Date.now();
  while ((await request(`${url}/readyz`).catch(() => undefined))?.status !== 200) {
    if (child.exitCode !== null) throw new Error(`audience on ${name} exited with ${child.exitCode}`);
    if (Date.now() - started > 120_000) throw new Error(`audience on ${name} not ready in 120 s`);
    await sleep(250);
  }
  log(`audience on ${name} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8')) as {
    account_id: string;
    client_id: string;
    client_secret: string;
  };
  const token = await accountToken({ url }, adminToken, demo);
  const sections = await api<{ items: { discriminator: string }[] }>({ url }, token, 'GET', '/audience/sections');
  const section = sections.items.find((s) => s.discriminator.endsWith('.sections.user-created.shop'))!.discriminator;
  const db = await connect(databaseUrl, `database of ${name}`);
  return {
    name,
    url,
    pid: child.pid!,
    token,
    adminToken,
    accountId: demo.account_id,
    databaseUrl,
    dir,
    db,
    pidFiles: Array.from({ length: nodes }, (_, i) => path.join(dir, `node${i}/postmaster.pid`)),
    section,
    ns: section.replace(/\.sections\.user-created\.shop$/, ''),
  };
}

/** Lifts an account's request limits and answers a bearer token of its API key. */
async function accountToken(
  t: Pick<Target, 'url'>,
  adminToken: string,
  key: { account_id: string; client_id: string; client_secret: string },
): Promise<string> {
  await api(t, adminToken, 'PATCH', `/admin/accounts/${key.account_id}`, {
    limits: {
      requests_per_second: null,
      token_requests_per_minute: null,
      import_requests_per_minute: null,
      profile_key_operations_per_second: null,
      profile_export_requests_per_second: null,
    },
  });
  const issued = await request(`${t.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: key.client_id,
      client_secret: key.client_secret,
    }),
  });
  if (issued.status !== 200) throw new Error(`token: ${issued.status} ${issued.text}`);
  return (JSON.parse(issued.text) as { access_token: string }).access_token;
}

/** A new account through the operator API with the demo manifest (and `extra`, a second manifest): its id and a token. */
async function newAccount(
  t: Target,
  name: string,
  manifest: unknown,
  extra?: unknown,
): Promise<{ accountId: string; token: string }> {
  const account = await api<{ id?: string; account_id?: string }>(t, t.adminToken, 'POST', '/admin/accounts', { name });
  const accountId = (account.account_id ?? account.id)!;
  await api(t, t.adminToken, 'PUT', `/admin/accounts/${accountId}/manifest`, manifest);
  if (extra !== undefined) await api(t, t.adminToken, 'PUT', `/admin/accounts/${accountId}/manifest`, extra);
  const key = await api<{ client_id: string; client_secret: string }>(
    t,
    t.adminToken,
    'POST',
    `/admin/accounts/${accountId}/keys`,
    { name: 'bench' },
  );
  return { accountId, token: await accountToken(t, t.adminToken, { account_id: accountId, ...key }) };
}

/** A CSV of `rows` profiles `prefix1@bench.example.com`… with first and last names. */
async function writeCsv(file: string, prefix: string, rows: number): Promise<number> {
  const handle = await fs.open(file, 'w');
  let text = 'email,first_name,last_name\n';
  for (let n = 1; n <= rows; n++) {
    text += `${prefix}${n}@bench.example.com,First${n % 997},Last${n % 991}\n`;
    if (text.length > 1 << 20) {
      await handle.write(text);
      text = '';
    }
  }
  await handle.write(text);
  await handle.close();
  return (await fs.stat(file)).size;
}

/** One import of `file` into an account's Shop section, from its creation to completed: seconds. */
async function runImport(t: Target, token: string, file: string, size: number, rows: number): Promise<number> {
  const attributes = await api<{
    items: { discriminator: string; versions: { id: string; deprecated_at?: string | null }[] }[];
  }>(t, token, 'GET', `/audience/sections/${t.section}/attributes`);
  const version = (name: string) =>
    attributes.items
      .find((a) => a.discriminator === `${t.ns}.attributes.${name}`)!
      .versions.filter((v) => !v.deprecated_at)
      .at(-1)!.id;
  const started = performance.now();
  const created = await api<{ import_id: string; file_upload_url: string; file_upload_body: Record<string, string> }>(
    t,
    token,
    'POST',
    `/v2/audience/sections/${t.section}/imports`,
    {
      keyspace_mapping: { keyspace_discriminator: `${t.ns}.keyspaces.email`, field_selector: 'email' },
      attribute_mappings: [
        { field_selector: 'first_name', attribute_version_id: version('firstname') },
        { field_selector: 'last_name', attribute_version_id: version('lastname') },
      ],
    },
  );
  const uploaded = await upload(
    t.url + new URL(created.file_upload_url).pathname,
    created.file_upload_body,
    file,
    size,
    300_000,
  );
  if (uploaded.status !== 204) throw new Error(`upload: ${uploaded.status} ${uploaded.text}`);
  for (;;) {
    const s = await api<{ result: { status: string; profiles_processed: number; message?: string } }>(
      t,
      token,
      'GET',
      `/audience/sections/${t.section}/imports/${created.import_id}`,
    );
    if (s.result.status === 'completed') {
      if (s.result.profiles_processed !== rows)
        throw new Error(`import on ${t.name}: ${s.result.profiles_processed} of ${rows} rows processed`);
      return (performance.now() - started) / 1000;
    }
    if (s.result.status === 'error') throw new Error(`import on ${t.name}: ${s.result.message}`);
    if (performance.now() - started > 1_200_000) throw new Error(`import on ${t.name} not done in 20 minutes`);
    await sleep(200);
  }
}

/** CPU time (ms) so far of the program and of each database node of a target. */
async function cpuOf(t: Target): Promise<{ program: number; nodes: number[] }> {
  return {
    program: (await cpuMsOf(t.pid))?.own ?? NaN,
    nodes: await Promise.all(t.pidFiles.map((f) => postmasterCpuMs(f))),
  };
}

/** A timed piece of work on a target: seconds, CPU seconds of the program and of each node, the load average at its end. */
interface Timed {
  s: number;
  programS: number;
  nodesS: number[];
  load: number;
}

async function timedWork(t: Target, work: () => Promise<unknown>): Promise<Timed> {
  const before = await cpuOf(t);
  const started = performance.now();
  await work();
  const s = (performance.now() - started) / 1000;
  const after = await cpuOf(t);
  return {
    s,
    programS: (after.program - before.program) / 1000,
    nodesS: after.nodes.map((n, i) => (n - before.nodes[i]) / 1000),
    load: os.loadavg()[0],
  };
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  generator: number;
  programUs: number;
  nodesUs: number[];
  load: number;
}

async function throughput(t: Target, load: Load, what: string): Promise<Figures> {
  await runWrk(`${t.url}/`, load, LOAD.warmupS, `${t.name} ${what} warm-up`);
  const before = await cpuOf(t);
  const r = await runWrk(`${t.url}/`, load, LOAD.durationS, `${t.name} ${what}`);
  const after = await cpuOf(t);
  const us = (ms: number) => (ms * 1000) / r.total;
  const f = {
    rps: r.rps,
    p50: r.p50,
    p99: r.p99,
    bad: r.non2xx + r.errors + r.timeouts,
    generator: r.generatorCpuShare,
    programUs: us(after.program - before.program),
    nodesUs: after.nodes.map((n, i) => us(n - before.nodes[i])),
    load: os.loadavg()[0],
  };
  log(
    `${t.name} ${what}: ${f.rps.toFixed(0)} req/s, p99 ${f.p99} ms, ${f.bad} bad, program ${f.programUs.toFixed(0)} µs/req, nodes ${f.nodesUs.map((n) => n.toFixed(0)).join(' + ')} µs/req, wrk ${(100 * f.generator).toFixed(0)}% of a core, load ${f.load.toFixed(2)}`,
  );
  if (f.bad > 0) failures.push(`${t.name} ${what}: ${f.bad} requests answered non-2xx or failed`);
  return f;
}

/** What failed, reported at the end with the coordinator's errors; the bench goes on. */
const failures: string[] = [];

/** The last ERROR lines of a node's log, with the statement each names. */
async function nodeErrors(t: Target): Promise<string[]> {
  const text = await fs.readFile(path.join(t.dir, 'node0.log'), 'utf8').catch(() => '');
  const lines = text.split('\n');
  const out: string[] = [];
  lines.forEach((l, i) => {
    if (/\b(ERROR|FATAL):/.test(l))
      out.push(l, ...lines.slice(i + 1, i + 4).filter((x) => /\b(STATEMENT|DETAIL|HINT|CONTEXT):/.test(x)));
  });
  return out.slice(-40);
}

await runBench(DEADLINE_MS, async () => {
  if (LOAD.generator !== 'wrk') throw new Error('bench:citus needs wrk on the PATH (apt-get install wrk)');
  printSetting();
  console.log(
    `throughput over ${PROFILES} profiles; import of ${IMPORT_ROWS} rows; segments over ${SEGMENT_PROFILES} profiles (${SEGMENT_RUNS} timed runs each); ${ACCOUNTS} accounts × ${ACCOUNT_PROFILES} profiles at once (${ACCOUNTS_BY}); only ${[...ONLY].join(',')}`,
  );
  const dir = await tempDir('audience-bench-citus-db-');
  await fs.chmod(dir, 0o755);
  onCleanup(async () => {
    // The programs first, so that none is left working against a database that has gone.
    for (const pid of programs) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // gone
      }
    }
    await sleep(3000);
    for (const d of ['single', 'cluster'])
      execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), 'down', path.join(dir, d)], { stdio: 'ignore' });
  });
  const single = await startTarget(
    'single',
    startDatabase(['plain', path.join(dir, 'single'), String(PORT + 10)]),
    path.join(dir, 'single'),
    1,
  );
  const cluster = await startTarget(
    'cluster',
    startDatabase(['up', path.join(dir, 'cluster'), '2', String(PORT)]),
    path.join(dir, 'cluster'),
    3,
  );
  const targets = [single, cluster];
  const versions = Object.fromEntries(
    await Promise.all(
      targets.map(async (t) => [t.name, (await t.db.query<{ v: string }>('select version() as v')).rows[0].v] as const),
    ),
  );
  const citus = (
    await cluster.db.query<{ v: string }>("select extversion as v from pg_extension where extname = 'citus'")
  ).rows[0]?.v;
  console.log(
    `single: ${versions.single}; cluster: ${versions.cluster}, Citus ${citus}, coordinator + 2 workers on loopback`,
  );
  const rows = [['measure', 'single', 'cluster', 'cluster/single', 'load avg (single; cluster)']];
  const detail = [
    ['measure', 'target', 'value', 'program CPU', 'coordinator/PostgreSQL CPU', 'workers CPU', 'wrk CPU', 'load avg'],
  ];
  const fmtNodes = (nodes: number[], unit: string, digits = 0) => [
    nodes[0].toFixed(digits) + unit,
    nodes.length > 1
      ? nodes
          .slice(1)
          .map((n) => n.toFixed(digits))
          .join(' + ') + unit
      : '',
  ];
  const addTimed = (what: string, by: Record<string, Timed>) => {
    rows.push([
      `${what}, s`,
      by.single.s.toFixed(1),
      by.cluster.s.toFixed(1),
      (by.cluster.s / by.single.s).toFixed(2),
      `${by.single.load.toFixed(2)}; ${by.cluster.load.toFixed(2)}`,
    ]);
    for (const t of targets)
      detail.push([
        what,
        t.name,
        `${by[t.name].s.toFixed(2)} s`,
        `${by[t.name].programS.toFixed(1)} s`,
        ...fmtNodes(by[t.name].nodesS, ' s', 1),
        '',
        by[t.name].load.toFixed(2),
      ]);
  };

  // ---- 1. Throughput over PROFILES loaded profiles ----
  if (ONLY.has('throughput')) {
    const ids: Record<string, Ids> = {};
    const loads: Record<string, Timed> = {};
    for (const t of targets) {
      ids[t.name] = await definitionsOf(t.db, t.accountId);
      let loaded: unknown;
      loads[t.name] = await timedWork(t, async () => {
        loaded = await loadProfiles(t.db, t.accountId, ids[t.name], PROFILES);
      });
      log(
        `${t.name}: ${PROFILES} profiles loaded set-based in ${loads[t.name].s.toFixed(1)} s: ${JSON.stringify(loaded)}`,
      );
    }
    addTimed(`set-based load of ${PROFILES} profiles (+ VACUUM ANALYZE)`, loads);
    const base = (t: Target, n: number | string) =>
      `/audience/keyspaces/${encodeURIComponent(`${t.ns}.keyspaces.email`)}/profiles/${encodeURIComponent(loadedEmail(n))}/sections/${encodeURIComponent(t.section)}/attributes`;
    for (const t of targets) {
      const sample = await request(`${t.url}${base(t, PROFILES)}`, { headers: { authorization: `Bearer ${t.token}` } });
      if (sample.status !== 200 || !sample.text.includes(loadedEmail(PROFILES)))
        failures.push(`${t.name}: GET ${base(t, PROFILES)}: ${sample.status} ${sample.text}`);
    }
    const ops = {
      GET: (t: Target): Load => ({
        path: base(t, N_MARK),
        headers: { authorization: `Bearer ${t.token}` },
        randomUpTo: PROFILES,
      }),
      PATCH: (t: Target): Load => ({
        method: 'PATCH',
        path: `/v2${base(t, N_MARK)}`,
        randomUpTo: PROFILES,
        headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ [`${t.ns}.attributes.firstname`]: `F${R_MARK}` }),
      }),
    };
    const rounds: Record<string, Record<string, Figures[]>> = {
      GET: { single: [], cluster: [] },
      PATCH: { single: [], cluster: [] },
    };
    for (let round = 1; round <= LOAD.rounds; round++) {
      for (const op of ['GET', 'PATCH'] as const) {
        for (const t of round % 2 ? targets : [...targets].reverse())
          rounds[op][t.name].push(await throughput(t, ops[op](t), `${op} round ${round}`));
      }
    }
    for (const op of ['GET', 'PATCH'] as const) {
      const m = (name: string, f: (x: Figures) => number) => median(rounds[op][name].map(f));
      const ratios = rounds[op].cluster.map((c, i) => c.rps / rounds[op].single[i].rps);
      rows.push([
        `${op} …/attributes req/s (median of ${LOAD.rounds}; aim ≥ 0.6)`,
        m('single', (x) => x.rps).toFixed(0),
        m('cluster', (x) => x.rps).toFixed(0),
        `${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(', ')})`,
        `${m('single', (x) => x.load).toFixed(2)}; ${m('cluster', (x) => x.load).toFixed(2)}`,
      ]);
      for (const t of targets) {
        rounds[op][t.name].forEach((f, i) =>
          detail.push([
            `${op} round ${i + 1}`,
            t.name,
            `${f.rps.toFixed(0)} req/s, p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms${f.bad ? `, ${f.bad} bad` : ''}`,
            `${f.programUs.toFixed(0)} µs/req`,
            ...fmtNodes(f.nodesUs, ' µs/req'),
            `${(100 * f.generator).toFixed(0)}%`,
            f.load.toFixed(2),
          ]),
        );
        const med = (f: (x: Figures) => number) => m(t.name, f);
        detail.push([
          `${op} median`,
          t.name,
          `${med((x) => x.rps).toFixed(0)} req/s`,
          `${med((x) => x.programUs).toFixed(0)} µs/req`,
          ...fmtNodes(
            rounds[op][t.name][0].nodesUs.map((_, i) => med((x) => x.nodesUs[i])),
            ' µs/req',
          ),
          `${(100 * med((x) => x.generator)).toFixed(0)}%`,
          med((x) => x.load).toFixed(2),
        ]);
      }
    }
  }

  // ---- 2. An import of IMPORT_ROWS rows ----
  if (ONLY.has('import')) {
    const file = path.join(dir, 'import.csv');
    const size = await writeCsv(file, 'i', IMPORT_ROWS);
    const imports: Record<string, Timed> = {};
    for (const t of targets) {
      try {
        imports[t.name] = await timedWork(t, () => runImport(t, t.token, file, size, IMPORT_ROWS));
        log(`${t.name}: imported ${IMPORT_ROWS} rows in ${imports[t.name].s.toFixed(1)} s`);
      } catch (err) {
        failures.push(`${t.name} import: ${(err as Error).message}`);
      }
    }
    if (imports.single && imports.cluster)
      addTimed(`import of ${IMPORT_ROWS} rows (${(size / 1e6).toFixed(1)} MB; aim cluster ≤ 2× single)`, imports);
  }

  const manifest = JSON.parse(await fs.readFile(path.join(ROOT, 'manifests/demo.json'), 'utf8')) as unknown;

  // ---- 3. Segments over SEGMENT_PROFILES profiles of one account ----
  if (ONLY.has('segments')) {
    const segmentManifest = {
      segments: [
        {
          name: SEGMENT.name,
          description: 'bench/citus.ts',
          section: 'com.{vendor}1.sections.user-created.shop',
          versions: [{ query: SEGMENT.query }],
        },
      ],
    };
    const loads: Record<string, Timed> = {};
    const accounts: Record<string, { accountId: string; token: string; segment: string }> = {};
    for (const t of targets) {
      const account = await newAccount(t, 'Segments', manifest, segmentManifest);
      const ids = await definitionsOf(t.db, account.accountId);
      const segments = await api<{ items: { discriminator: string; name?: string }[] }>(
        t,
        account.token,
        'GET',
        '/audience/segments',
      );
      const segment = segments.items.find((s) =>
        s.discriminator.endsWith('.segments.user-created.bench-loyal-recent-visitors'),
      )?.discriminator;
      if (!segment)
        throw new Error(
          `${t.name}: the segment was not created: ${JSON.stringify(segments.items.map((s) => s.discriminator))}`,
        );
      accounts[t.name] = { ...account, segment };
      let events = 0;
      loads[t.name] = await timedWork(t, async () => {
        // With VACUUM (ANALYZE): without statistics of the new account's identifiers, the planner
        // takes them for one row and joins generate_series to them the quadratic way round.
        await loadProfiles(t.db, account.accountId, ids, SEGMENT_PROFILES, { prefix: 's' });
        // A page view for every third profile, on one of the last 90 days.
        events =
          (
            await t.db.query(
              `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
           select $1::bigint, i.profile_id, $2::bigint, $3::bigint, now() - (g.n % 90) * interval '1 day' - interval '1 hour', now(), 'bench-' || g.n,
             jsonb_build_object('url', 'https://shop.example.com/p/' || g.n, 'device', 'desktop', 'title', 'Page ' || g.n)
           from generate_series(1, $4::int) g(n)
           join profile_identifiers i on i.account_id = $1::bigint and i.keyspace_id = $5::bigint and i.profile_key = 's' || g.n || '@bench.example.com'
           where g.n % 3 = 0`,
              [account.accountId, ids.shop.id, ids.pageView, SEGMENT_PROFILES, ids.emailKeyspace.id],
            )
          ).rowCount ?? 0;
        await summariseEvents(t.db, account.accountId);
        await t.db.query('vacuum (analyze) profile_events, profile_event_summaries');
      });
      await t.db.query('checkpoint');
      log(
        `${t.name}: ${SEGMENT_PROFILES} profiles and ${events} page views loaded set-based with VACUUM (ANALYZE) in ${loads[t.name].s.toFixed(1)} s`,
      );
    }
    addTimed(`set-based load of ${SEGMENT_PROFILES} profiles + page views (+ VACUUM ANALYZE)`, loads);
    const points = Array.from({ length: 25 }, (_, i) =>
      new Date(Math.floor(Date.now() / 1000) * 1000 - (24 - i) * 14 * DAY).toISOString().replace('.000Z', 'Z'),
    );
    const calls = {
      count: (t: Target) => ({
        path: '/audience/profiles/reports/segments/count',
        body: {
          section_discriminator: t.section,
          segment: { timezone: TIME_ZONE, segment_discriminator: accounts[t.name].segment },
        },
      }),
      trend: (t: Target) => ({
        path: `/audience/sections/${encodeURIComponent(t.section)}/segments/${encodeURIComponent(accounts[t.name].segment)}/trend`,
        body: { sampling_points: points, timezone: TIME_ZONE },
      }),
    };
    const answers: Record<string, unknown> = {};
    const times: Record<string, Record<string, Timed[]>> = {
      count: { single: [], cluster: [] },
      trend: { single: [], cluster: [] },
    };
    for (let run = 0; run <= SEGMENT_RUNS; run++) {
      for (const op of ['count', 'trend'] as const) {
        for (const t of run % 2 ? targets : [...targets].reverse()) {
          const { path: p, body } = calls[op](t);
          try {
            let answer: unknown;
            const r = await timedWork(t, async () => {
              answer = await api(t, accounts[t.name].token, 'POST', p, body);
            });
            answers[`${op} ${t.name}`] = answer;
            // Run 0 is the warm-up.
            if (run > 0) times[op][t.name].push(r);
            log(
              `${t.name} ${op} run ${run}: ${r.s.toFixed(3)} s, nodes ${r.nodesS.map((n) => n.toFixed(2)).join(' + ')} s CPU`,
            );
          } catch (err) {
            failures.push(`${t.name} ${op}: ${(err as Error).message}`);
            break;
          }
        }
      }
    }
    const count = (name: string) => (answers[`count ${name}`] as { profile_count?: number } | undefined)?.profile_count;
    console.log(`segment ${accounts.cluster.segment}: count single ${count('single')}, cluster ${count('cluster')}`);
    if (count('single') !== count('cluster'))
      failures.push(`the counts differ: single ${count('single')}, cluster ${count('cluster')}`);
    const trendNow = (name: string) =>
      JSON.stringify(
        (answers[`trend ${name}`] as { matching_profile_count?: Record<string, unknown> } | undefined)
          ?.matching_profile_count?.[points.at(-1)!],
      );
    console.log(`trend at the last point: single ${trendNow('single')}, cluster ${trendNow('cluster')}`);
    for (const op of ['count', 'trend'] as const) {
      if (times[op].single.length === 0 || times[op].cluster.length === 0) continue;
      const med = (name: string): Timed => {
        const xs = times[op][name];
        return {
          s: median(xs.map((x) => x.s)),
          programS: median(xs.map((x) => x.programS)),
          nodesS: xs[0].nodesS.map((_, i) => median(xs.map((x) => x.nodesS[i]))),
          load: median(xs.map((x) => x.load)),
        };
      };
      addTimed(
        `${op === 'count' ? 'two-term segment count' : '25-point trend'} over ${SEGMENT_PROFILES} profiles (median of ${SEGMENT_RUNS})`,
        { single: med('single'), cluster: med('cluster') },
      );
    }
  }

  // ---- 4. ACCOUNTS accounts loaded at once ----
  if (ONLY.has('accounts')) {
    const by: Record<string, Timed> = {};
    const file = path.join(dir, 'account.csv');
    const size = ACCOUNTS_BY === 'import' ? await writeCsv(file, 'a', ACCOUNT_PROFILES) : 0;
    for (const t of targets) {
      const accounts: { accountId: string; token: string }[] = [];
      for (let i = 0; i < ACCOUNTS; i++) accounts.push(await newAccount(t, `bench ${i}`, manifest));
      const ids: Ids[] = [];
      for (const a of accounts) ids.push(await definitionsOf(t.db, a.accountId));
      const dbs =
        ACCOUNTS_BY === 'load'
          ? await Promise.all(accounts.map((_, i) => connect(t.databaseUrl, `${t.name} load connection ${i}`, true)))
          : [];
      try {
        by[t.name] = await timedWork(t, () =>
          Promise.all(
            accounts.map((a, i) =>
              ACCOUNTS_BY === 'load'
                ? loadProfiles(dbs[i], a.accountId, ids[i], ACCOUNT_PROFILES, { prefix: 'a', vacuum: false })
                : runImport(t, a.token, file, size, ACCOUNT_PROFILES),
            ),
          ),
        );
        log(
          `${t.name}: ${ACCOUNTS} accounts × ${ACCOUNT_PROFILES} profiles (${ACCOUNTS_BY}) at once in ${by[t.name].s.toFixed(1)} s`,
        );
        const n = (
          await t.db.query<{ n: number }>(
            'select count(*)::int as n from profiles where account_id = any($1::bigint[])',
            [accounts.map((a) => a.accountId)],
          )
        ).rows[0].n;
        if (n !== ACCOUNTS * ACCOUNT_PROFILES)
          failures.push(`${t.name}: ${n} profiles in the ${ACCOUNTS} accounts, not ${ACCOUNTS * ACCOUNT_PROFILES}`);
      } catch (err) {
        failures.push(`${t.name} ${ACCOUNTS} accounts at once: ${(err as Error).message}`);
      }
      for (const db of dbs) await db.end().catch(() => {});
    }
    if (by.single && by.cluster)
      addTimed(
        `${ACCOUNTS} accounts × ${ACCOUNT_PROFILES} profiles at once (${ACCOUNTS_BY === 'load' ? 'set-based loads, one connection each' : 'imports through the API'})`,
        by,
      );
  }

  // ---- Report ----
  console.log('');
  console.log(table(rows));
  console.log('');
  console.log(
    "CPU: the program's, the coordinator's (or the one PostgreSQL's) and the two workers', from /proc; per request for the wrk runs, seconds for the timed work.",
  );
  console.log(table(detail));
  console.log(
    `load average at the end: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  if (failures.length > 0) {
    console.log('');
    console.log('FAILURES:');
    for (const f of failures) console.log(`  ${f}`);
    console.log("the coordinator's last errors (cluster/node0.log):");
    for (const l of await nodeErrors(cluster)) console.log(`  ${l}`);
    process.exitCode = 1;
  }
});

/**
 * `npm run bench:citus`: the program on a Citus cluster against the same program on one
 * PostgreSQL, both Debian's PostgreSQL 15, on this machine in one run (docs/benchmarks.md "Citus
 * cluster against one PostgreSQL").
 *
 * Two databases: one plain PostgreSQL (scripts/citus.sh plain) and a coordinator with two workers
 * (scripts/citus.sh up), each with the program (`node src/main.ts serve`, DATABASE_URL at it, the
 * demo account, its limits lifted). On each, in turn:
 *
 * 1. Import: BENCH_PROFILES rows (300,000) of email, first and last name into the demo account's
 *    Shop section through the import API (create, multipart upload, poll until completed).
 * 2. Throughput: authenticated GET …/attributes and v2 PATCH …/attributes (first name) of random
 *    imported profiles, with wrk, the two databases alternately, BENCH_ROUNDS rounds; the CPU per
 *    request of the program and of each PostgreSQL node.
 * 3. Segments: a count of a two-term segment and a 25-point trend of it, over those profiles
 *    (after VACUUM ANALYZE), BENCH_SEGMENT_RUNS times each.
 * 4. Many accounts: BENCH_ACCOUNTS accounts (20) created through the operator API, each importing
 *    BENCH_ACCOUNT_ROWS rows (50,000) at once; the time until the last completes.
 *
 * The machine is shared and noisy: what counts is the ratio cluster/single of the same run.
 * Needs root and the workplace's cluster script (scripts/citus.sh available).
 */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../src/store/embedded.ts';
import {
  cpuMsOf, log, LOAD, N_MARK, median, onCleanup, postmasterCpuMs, R_MARK, request, ROOT, runBench, runWrk, sleep, table, tempDir, track, upload, type Load,
} from './harness.ts';

const PROFILES = Math.max(1000, Number(process.env.BENCH_PROFILES ?? 300_000));
const ACCOUNTS = Math.max(1, Number(process.env.BENCH_ACCOUNTS ?? 20));
const ACCOUNT_ROWS = Math.max(100, Number(process.env.BENCH_ACCOUNT_ROWS ?? 50_000));
const SEGMENT_RUNS = Math.max(1, Number(process.env.BENCH_SEGMENT_RUNS ?? 3));
/** The parts to run (all by default): import (which the next two need), throughput, segments, accounts. */
const PARTS = new Set((process.env.BENCH_PARTS ?? 'import,throughput,segments,accounts').split(','));
const PORT = Number(process.env.BENCH_CITUS_PORT ?? 9780);
const DEADLINE_MS = 3_600_000;
const TIME_ZONE = 'Europe/Oslo';
/** The programs started, for the clean-up. */
const programs: number[] = [];

interface Target {
  name: 'single' | 'cluster';
  url: string;
  pid: number;
  token: string;
  adminToken: string;
  databaseUrl: string;
  /** postmaster.pid of each node: the coordinator (or the one PostgreSQL) first. */
  pidFiles: string[];
  section: string;
  ns: string;
}

/** Starts the databases of a target with scripts/citus.sh; answers its DATABASE_URL. */
function startDatabase(args: string[]): string {
  const out = execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), ...args], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.startsWith('DATABASE_URL='));
  if (!line) throw new Error(`scripts/citus.sh ${args.join(' ')} printed no DATABASE_URL: ${out}`);
  return line.slice('DATABASE_URL='.length);
}

async function api<T>(t: Pick<Target, 'url'>, token: string, method: string, urlPath: string, body?: unknown): Promise<T> {
  const res = await request(`${t.url}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${res.text}`);
  return (res.text ? JSON.parse(res.text) : undefined) as T;
}

/** The program on `databaseUrl`, with the demo account's limits lifted and a token of it. */
async function startTarget(name: Target['name'], databaseUrl: string, pidFiles: string[]): Promise<Target> {
  const dataDir = await tempDir('audience-bench-citus-');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['src/main.ts', 'serve'], {
    cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, MALLOC_ARENA_MAX: '2', DATABASE_URL: databaseUrl, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
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
  const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8')) as { account_id: string; client_id: string; client_secret: string };
  const token = await accountToken({ url }, adminToken, demo);
  const sections = await api<{ items: { discriminator: string }[] }>({ url }, token, 'GET', '/audience/sections');
  const section = sections.items.find((s) => s.discriminator.endsWith('.sections.user-created.shop'))!.discriminator;
  return { name, url, pid: child.pid!, token, adminToken, databaseUrl, pidFiles, section, ns: section.replace(/\.sections\.user-created\.shop$/, '') };
}

/** Lifts an account's request limits and answers a bearer token of its API key. */
async function accountToken(t: Pick<Target, 'url'>, adminToken: string, key: { account_id: string; client_id: string; client_secret: string }): Promise<string> {
  await api(t, adminToken, 'PATCH', `/admin/accounts/${key.account_id}`, { limits: { requests_per_second: null, token_requests_per_minute: null, import_requests_per_minute: null, profile_key_operations_per_second: null, profile_export_requests_per_second: null } });
  const issued = await request(`${t.url}/oauth/token`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: key.client_id, client_secret: key.client_secret }),
  });
  if (issued.status !== 200) throw new Error(`token: ${issued.status} ${issued.text}`);
  return (JSON.parse(issued.text) as { access_token: string }).access_token;
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
  const attributes = await api<{ items: { discriminator: string; versions: { id: string; deprecated_at?: string | null }[] }[] }>(t, token, 'GET', `/audience/sections/${t.section}/attributes`);
  const version = (name: string) => attributes.items.find((a) => a.discriminator === `${t.ns}.attributes.${name}`)!.versions.filter((v) => !v.deprecated_at).at(-1)!.id;
  const started = performance.now();
  const created = await api<{ import_id: string; file_upload_url: string; file_upload_body: Record<string, string> }>(t, token, 'POST', `/v2/audience/sections/${t.section}/imports`, {
    keyspace_mapping: { keyspace_discriminator: `${t.ns}.keyspaces.email`, field_selector: 'email' },
    attribute_mappings: [{ field_selector: 'first_name', attribute_version_id: version('firstname') }, { field_selector: 'last_name', attribute_version_id: version('lastname') }],
  });
  const uploaded = await upload(t.url + new URL(created.file_upload_url).pathname, created.file_upload_body, file, size, 300_000);
  if (uploaded.status !== 204) throw new Error(`upload: ${uploaded.status} ${uploaded.text}`);
  for (;;) {
    const s = await api<{ result: { status: string; profiles_processed: number; message?: string } }>(t, token, 'GET', `/audience/sections/${t.section}/imports/${created.import_id}`);
    if (s.result.status === 'completed') {
      if (s.result.profiles_processed !== rows) throw new Error(`import on ${t.name}: ${s.result.profiles_processed} of ${rows} rows processed`);
      return (performance.now() - started) / 1000;
    }
    if (s.result.status === 'error') throw new Error(`import on ${t.name}: ${s.result.message}`);
    if (performance.now() - started > 1_200_000) throw new Error(`import on ${t.name} not done in 20 minutes`);
    await sleep(200);
  }
}

/** CPU time (ms) so far of the program and of each database node of a target. */
async function cpuOf(t: Target): Promise<{ program: number; nodes: number[] }> {
  return { program: (await cpuMsOf(t.pid))?.own ?? NaN, nodes: await Promise.all(t.pidFiles.map((f) => postmasterCpuMs(f))) };
}

interface Figures { rps: number; p99: number; non2xx: number; generator: number; programUs: number; nodesUs: number[]; load: number }

async function throughput(t: Target, load: Load, what: string): Promise<Figures> {
  await runWrk(`${t.url}/`, load, LOAD.warmupS, `${t.name} ${what} warm-up`);
  const before = await cpuOf(t);
  const r = await runWrk(`${t.url}/`, load, LOAD.durationS, `${t.name} ${what}`);
  const after = await cpuOf(t);
  const us = (ms: number) => (ms * 1000) / r.total;
  const f = { rps: r.rps, p99: r.p99, non2xx: r.non2xx + r.errors, generator: r.generatorCpuShare, programUs: us(after.program - before.program), nodesUs: after.nodes.map((n, i) => us(n - before.nodes[i])), load: os.loadavg()[0] };
  log(`${t.name} ${what}: ${f.rps.toFixed(0)} req/s, p99 ${f.p99} ms, ${f.non2xx} non-2xx, program ${f.programUs.toFixed(0)} µs/req, nodes ${f.nodesUs.map((n) => n.toFixed(0)).join(' + ')} µs/req, wrk ${(100 * f.generator).toFixed(0)}% of a core, load ${f.load.toFixed(2)}`);
  if (f.non2xx > 0) throw new Error(`${t.name} ${what}: ${f.non2xx} failed requests`);
  return f;
}

/** Seconds of `runs` timed POSTs of `body` (after one warm-up), their median. */
async function timed(t: Target, urlPath: string, body: unknown, runs: number): Promise<{ median: number; answer: unknown }> {
  let answer: unknown = await api(t, t.token, 'POST', urlPath, body);
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    answer = await api(t, t.token, 'POST', urlPath, body);
    times.push((performance.now() - started) / 1000);
  }
  return { median: median(times), answer };
}

await runBench(DEADLINE_MS, async () => {
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
    for (const d of ['single', 'cluster']) execFileSync('bash', [path.join(ROOT, 'scripts/citus.sh'), 'down', path.join(dir, d)], { stdio: 'ignore' });
  });
  const single = await startTarget('single', startDatabase(['plain', path.join(dir, 'single'), String(PORT + 10)]), [path.join(dir, 'single/node0/postmaster.pid')]);
  const cluster = await startTarget('cluster', startDatabase(['up', path.join(dir, 'cluster'), '2', String(PORT)]),
    [0, 1, 2].map((i) => path.join(dir, `cluster/node${i}/postmaster.pid`)));
  const targets = [single, cluster];

  // 1. The import, which also loads the profiles of the throughput and the segments.
  const file = path.join(dir, 'profiles.csv');
  const size = await writeCsv(file, 'p', PROFILES);
  const importS: Record<string, number> = {};
  for (const t of PARTS.has('import') ? targets : []) {
    importS[t.name] = await runImport(t, t.token, file, size, PROFILES);
    log(`${t.name}: imported ${PROFILES} rows in ${importS[t.name].toFixed(1)} s`);
    const db = new pg.Client({ connectionString: t.databaseUrl });
    await db.connect();
    await db.query('vacuum analyze');
    await db.end();
  }

  // 2. Throughput, the targets alternately.
  const path0 = (t: Target) => `/audience/keyspaces/${encodeURIComponent(`${t.ns}.keyspaces.email`)}/profiles/p${N_MARK}%40bench.example.com/sections/${encodeURIComponent(t.section)}/attributes`;
  const loads = {
    get: (t: Target): Load => ({ path: path0(t), headers: { authorization: `Bearer ${t.token}` }, randomUpTo: PROFILES }),
    patch: (t: Target): Load => ({
      method: 'PATCH', path: `/v2${path0(t)}`, randomUpTo: PROFILES,
      headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ [`${t.ns}.attributes.firstname`]: R_MARK }),
    }),
  };
  const rounds: Record<string, Record<string, Figures[]>> = { get: { single: [], cluster: [] }, patch: { single: [], cluster: [] } };
  for (let round = 1; PARTS.has('throughput') && round <= LOAD.rounds; round++) {
    for (const op of ['get', 'patch'] as const) {
      for (const t of round % 2 ? targets : [...targets].reverse()) rounds[op][t.name].push(await throughput(t, loads[op](t), `${op} round ${round}`));
    }
  }

  // 3. Segments: the demo account's two segments (an attribute term and an event term), counted
  // together as one two-term query; the trend of the first. The imported profiles match neither:
  // each term is judged over all of them.
  const segmentS: Record<string, { count: number; trend: number; profiles: unknown }> = {};
  for (const t of PARTS.has('segments') ? targets : []) {
    const stored = await api<{ items: { discriminator: string; versions: { query: string }[] }[] }>(t, t.token, 'GET', '/audience/segments');
    const [first, second] = stored.items;
    const query = `(${first.versions.at(-1)!.query}) || (${second.versions.at(-1)!.query})`;
    const count = await timed(t, '/audience/profiles/reports/segments/count', { section_discriminator: t.section, segment: { timezone: TIME_ZONE, segment_definition: query } }, SEGMENT_RUNS);
    const points = Array.from({ length: 25 }, (_, i) => new Date(Math.floor(Date.now() / 1000) * 1000 - (24 - i) * 86_400_000).toISOString().replace('.000Z', 'Z'));
    const trend = await timed(t, `/audience/sections/${encodeURIComponent(t.section)}/segments/${encodeURIComponent(first.discriminator)}/trend`, { sampling_points: points, timezone: TIME_ZONE }, SEGMENT_RUNS);
    segmentS[t.name] = { count: count.median, trend: trend.median, profiles: count.answer };
    log(`${t.name}: count ${count.median.toFixed(3)} s (${JSON.stringify(count.answer)}), trend ${trend.median.toFixed(3)} s`);
  }

  // 4. Many accounts importing at once.
  const accountFile = path.join(dir, 'account.csv');
  const accountSize = await writeCsv(accountFile, 'a', ACCOUNT_ROWS);
  const manyS: Record<string, number> = {};
  const manifest = JSON.parse(await fs.readFile(path.join(ROOT, 'manifests/demo.json'), 'utf8')) as unknown;
  for (const t of PARTS.has('accounts') ? targets : []) {
    const keys = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await api<{ id: string }>(t, t.adminToken, 'POST', '/admin/accounts', { name: `bench ${i}` });
      await api(t, t.adminToken, 'PUT', `/admin/accounts/${account.id}/manifest`, manifest);
      const key = await api<{ client_id: string; client_secret: string }>(t, t.adminToken, 'POST', `/admin/accounts/${account.id}/keys`, { name: 'bench' });
      keys.push({ account_id: account.id, ...key });
    }
    const tokens = await Promise.all(keys.map((k) => accountToken(t, t.adminToken, k)));
    const started = performance.now();
    await Promise.all(tokens.map((token) => runImport(t, token, accountFile, accountSize, ACCOUNT_ROWS)));
    manyS[t.name] = (performance.now() - started) / 1000;
    log(`${t.name}: ${ACCOUNTS} accounts × ${ACCOUNT_ROWS} rows imported at once in ${manyS[t.name].toFixed(1)} s`);
  }

  // The figures.
  const m = (op: string, name: string, f: (x: Figures) => number) => median(rounds[op][name].map(f));
  const rows = [['measure', 'single', 'cluster', 'cluster/single']];
  for (const op of PARTS.has('throughput') ? ['get', 'patch'] : []) {
    const s = m(op, 'single', (x) => x.rps);
    const c = m(op, 'cluster', (x) => x.rps);
    rows.push([`${op} req/s (median of ${LOAD.rounds})`, s.toFixed(0), c.toFixed(0), (c / s).toFixed(2)]);
    rows.push([`${op} program µs/req`, m(op, 'single', (x) => x.programUs).toFixed(0), m(op, 'cluster', (x) => x.programUs).toFixed(0), '']);
    rows.push([`${op} database µs/req (coordinator; workers)`, m(op, 'single', (x) => x.nodesUs[0]).toFixed(0),
      `${m(op, 'cluster', (x) => x.nodesUs[0]).toFixed(0)}; ${m(op, 'cluster', (x) => x.nodesUs[1] + x.nodesUs[2]).toFixed(0)}`, '']);
    rows.push([`${op} wrk CPU`, `${(100 * m(op, 'single', (x) => x.generator)).toFixed(0)}%`, `${(100 * m(op, 'cluster', (x) => x.generator)).toFixed(0)}%`, '']);
  }
  const ratio = (label: string, f: Record<string, number> | undefined, digits = 1) => {
    if (f?.single !== undefined && f.cluster !== undefined) rows.push([label, f.single.toFixed(digits), f.cluster.toFixed(digits), (f.cluster / f.single).toFixed(2)]);
  };
  ratio(`import of ${PROFILES} rows, s`, importS);
  if (segmentS.single && segmentS.cluster) {
    ratio(`two-term count over ${PROFILES}, s`, { single: segmentS.single.count, cluster: segmentS.cluster.count }, 3);
    ratio(`25-point trend over ${PROFILES}, s`, { single: segmentS.single.trend, cluster: segmentS.cluster.trend }, 3);
  }
  ratio(`${ACCOUNTS} accounts × ${ACCOUNT_ROWS} rows at once, s`, manyS);
  console.log('');
  console.log(table(rows));
  console.log(`load average at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
});

/**
 * `npm run bench:idle-rss`: the resident memory of the program at idle, after a start on a fresh
 * DATA_DIR and a few requests, of the program's own process (not its PostgreSQL), for the roles
 * `serve` (API and worker thread, what `npm start` runs), `api` and `worker`; and, in the same run,
 * what a bare `node` and a trivial TypeScript file measure, the floor under any program.
 *
 * Each run starts every role in turn (`node src/main.js <role>` with its own temp DATA_DIR and
 * embedded PostgreSQL, on a free loopback port), waits for /readyz, makes the requests of a client
 * that has just connected (a token, the sections, a metrics scrape), waits BENCH_IDLE_SETTLE_S for
 * the heap to settle, reads VmRSS and VmHWM (the peak since the start) from /proc/<pid>/status and
 * stops it. Runs alternate the roles, so that a slower stretch of the shared machine hits them all.
 *
 * Settings from the environment: BENCH_IDLE_RUNS (5; 0 for the load-and-idle run alone), BENCH_IDLE_SETTLE_S (10), BENCH_IDLE_ROLES
 * (serve,api,worker), BENCH_SERVER_ARGS (extra node flags for the program, e.g.
 * "--max-semi-space-size=8"), and BENCH_IDLE_LOAD_S (0): seconds of load (autocannon, 10
 * connections, GET /audience/sections with the demo account's request limit lifted) before the
 * wait, for the idle memory of a server that has had traffic. Needs Linux (/proc).
 *
 * With BENCH_IDLE_MIXED_S (0: off), the load-and-idle run follows: `serve` with BENCH_IDLE_PROFILES
 * (20000) profiles loaded set-based (bench/profile-load.ts), then BENCH_IDLE_MIXED_S seconds of
 * mixed traffic at BENCH_IDLE_RATE (60) requests a second, sent at a steady pace whatever the
 * answers take (attribute GETs of random profiles, PATCHes, the sections), with a profile in
 * segment export of every profile every BENCH_IDLE_EXPORT_EVERY_S (10) s, polled, and downloaded as
 * CSV, Excel and JSON; then BENCH_IDLE_AFTER_S (120) s without requests. VmRSS is read every second,
 * and /proc/<pid>/smaps_rollup and the V8 heap (from /metrics) before the load, at its end, and at
 * 10 s, 60 s and the end of the idle time. BENCH_IDLE_MIXED_ENV runs it once per variant of the
 * program's environment, `;`-separated (e.g. "-;MALLOC_ARENA_MAX=8": `-` is the environment as given).
 * During the load, where the memory is (/proc/<pid>/smaps, as at the end) is logged every
 * BENCH_IDLE_PLACES_EVERY_S (150; 0: off) s, to see whether malloc's part levels off; BENCH_IDLE_MIX
 * (all) sends `exports` alone or the `requests` alone, to tell which of them its growth comes from.
 * The allocator mapped into the program (an LD_PRELOAD that took) is logged at its start.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { definitionsOf, loadedEmail, loadProfiles } from './profile-load.ts';
import {
  demoToken,
  embeddedDatabaseUrl,
  envPairs,
  log,
  onCleanup,
  request,
  runBench,
  sleep,
  startAudience,
  startProgram,
  stopProgram,
  table,
  within,
  type Audience,
  type Autocannon,
  type Program,
} from './harness.ts';

const RUNS = Math.max(0, Number(process.env.BENCH_IDLE_RUNS ?? 5));
const SETTLE_S = Number(process.env.BENCH_IDLE_SETTLE_S ?? 10);
const LOAD_S = Number(process.env.BENCH_IDLE_LOAD_S ?? 0);
const ROLES = (process.env.BENCH_IDLE_ROLES ?? 'serve,api,worker').split(',').map((r) => r.trim()) as (
  'serve' | 'api' | 'worker'
)[];
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
/** The baselines hold nothing that settles: a short wait is enough. */
const BASELINE_WAIT_S = 2;
const MIXED_S = Number(process.env.BENCH_IDLE_MIXED_S ?? 0);
const MIXED_PROFILES = Math.max(100, Number(process.env.BENCH_IDLE_PROFILES ?? 20_000));
const RATE = Math.max(1, Number(process.env.BENCH_IDLE_RATE ?? 60));
const EXPORT_EVERY_S = Math.max(1, Number(process.env.BENCH_IDLE_EXPORT_EVERY_S ?? 10));
const AFTER_S = Math.max(60, Number(process.env.BENCH_IDLE_AFTER_S ?? 120));
const VARIANTS = (process.env.BENCH_IDLE_MIXED_ENV ?? '-').split(';').map((v) => v.trim());
const MIX = process.env.BENCH_IDLE_MIX ?? 'all';
if (!['all', 'exports', 'requests'].includes(MIX))
  throw new Error(`BENCH_IDLE_MIX: all, exports or requests, not ${MIX}`);
const PLACES_EVERY_S = Math.max(0, Number(process.env.BENCH_IDLE_PLACES_EVERY_S ?? 150));
const DEADLINE_MS =
  60_000 +
  RUNS * (ROLES.length * (40 + SETTLE_S + LOAD_S * 1.5) + 2 * (10 + BASELINE_WAIT_S)) * 1000 +
  (MIXED_S > 0 ? VARIANTS.length * (180 + MIXED_S * 1.5 + AFTER_S) * 1000 : 0);

interface Sample {
  rss: number;
  hwm: number;
  anon: number;
  file: number;
}

/** VmRSS, VmHWM, RssAnon and RssFile of a process, in MB (/proc/<pid>/status gives kB). */
async function memoryOf(pid: number): Promise<Sample> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]) / 1024;
  };
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** What a client that has just connected does: a token, the sections a few times, and a metrics scrape. */
async function requests(program: Program, role: string): Promise<void> {
  const expect = async (what: string, answer: Promise<{ status: number; text: string }>) => {
    const { status, text } = await answer;
    if (status !== 200) throw new Error(`${role}: ${what}: ${status} ${text.slice(0, 200)}`);
  };
  if (role !== 'worker') {
    const token = await demoToken(program);
    for (let i = 0; i < 5; i++)
      await expect(
        'GET /audience/sections',
        request(`${program.url}/audience/sections`, { headers: { authorization: `Bearer ${token}` } }),
      );
  }
  await expect(
    'GET /metrics',
    request(`${program.url}/metrics`, { headers: { authorization: `Bearer ${program.adminToken}` } }),
  );
}

/** LOAD_S seconds of GET /audience/sections, with the demo account's request limit lifted. */
async function load(autocannon: Autocannon, program: Program): Promise<void> {
  const demo = JSON.parse(await fs.readFile(path.join(program.dataDir, 'demo-credentials.json'), 'utf8')) as {
    account_id: string;
  };
  const lifted = await request(`${program.url}/admin/accounts/${encodeURIComponent(demo.account_id)}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${program.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ limits: { requests_per_second: null } }),
  });
  if (lifted.status !== 200)
    throw new Error(`lifting the demo account's request limit: ${lifted.status} ${lifted.text}`);
  const token = await demoToken(program);
  const run = autocannon({
    url: `${program.url}/audience/sections`,
    headers: { authorization: `Bearer ${token}` },
    connections: 10,
    pipelining: 1,
    duration: LOAD_S,
    timeout: 10,
  });
  const result = await within(LOAD_S * 1000 + 30_000, 'load', run).catch((err: Error) => {
    run.stop();
    throw err;
  });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`load: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  log(`load: ${result.requests.total} requests in ${LOAD_S} s`);
}

/** A node process running `args` until it is stopped: its memory after BASELINE_WAIT_S. */
async function baseline(args: string[]): Promise<Sample> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  onCleanup(stop);
  try {
    await sleep(BASELINE_WAIT_S * 1000);
    if (child.exitCode !== null) throw new Error(`node ${args.join(' ')} exited with ${child.exitCode}`);
    return await memoryOf(child.pid!);
  } finally {
    await stop();
  }
}

/** Rss, Anonymous and the like of /proc/<pid>/smaps_rollup, in MB. */
async function rollupOf(pid: number): Promise<Record<string, number>> {
  const text = await fs.readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^(\w+):\s+(\d+) kB/gm)) out[m[1]] = Number(m[2]) / 1024;
  return out;
}

/**
 * Where the resident memory is, from /proc/<pid>/smaps, in MB: the main malloc arena ([heap]), the
 * other anonymous mappings by size (glibc's other arenas reserve 64 MB each; V8's pages and large
 * objects are smaller mappings), and files.
 */
async function placesOf(pid: number): Promise<Record<string, number>> {
  const text = await fs.readFile(`/proc/${pid}/smaps`, 'utf8');
  const out: Record<string, number> = {};
  let place = '';
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2], 16) - parseInt(head[1], 16)) / 2 ** 20;
      const name = head[3].trim();
      place =
        name === '[heap]'
          ? '[heap]'
          : name.startsWith('/')
            ? 'files'
            : name !== ''
              ? name
              : size >= 32
                ? 'anonymous ≥ 32 MB'
                : 'anonymous < 32 MB';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[place] = (out[place] ?? 0) + Number(rss[1]) / 1024;
  }
  return out;
}

/** The V8 heap of the program's main thread, from its /metrics (prom-client's default metrics), in MB. */
async function heapOf(program: Program): Promise<{ used: number; total: number; newSpace: number; external: number }> {
  const { text } = await request(`${program.url}/metrics`, {
    headers: { authorization: `Bearer ${program.adminToken}` },
  });
  const value = (name: string) => Number(new RegExp(`^${name} ([\\d.e+]+)`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20;
  return {
    used: value('nodejs_heap_size_used_bytes'),
    total: value('nodejs_heap_size_total_bytes'),
    newSpace: value('nodejs_heap_space_size_total_bytes\\{space="new"\\}'),
    external: value('nodejs_external_memory_bytes'),
  };
}

const placesLine = (places: Record<string, number>) =>
  Object.entries(places)
    .filter(([, v]) => v >= 0.5)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${mb(v)} MB`)
    .join(', ') + ` (all ${mb(Object.values(places).reduce((a, b) => a + b, 0))} MB)`;

/** The allocator libraries mapped into a process (an LD_PRELOAD that took), from /proc/<pid>/maps. */
async function allocatorsOf(pid: number): Promise<string> {
  const maps = await fs.readFile(`/proc/${pid}/maps`, 'utf8');
  const found = new Set(maps.match(/\/\S*(jemalloc|mimalloc|tcmalloc)\S*/g) ?? []);
  return found.size > 0 ? [...found].join(', ') : "glibc's malloc (no other allocator mapped)";
}

interface Point {
  at: string;
  rss: number;
  rollup: Record<string, number>;
  heap: Awaited<ReturnType<typeof heapOf>>;
}

/** Reads a body to its end; throws unless the status is `status`. */
async function drain(url: string, init: RequestInit, status: number, what: string): Promise<number> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(120_000) });
  let bytes = 0;
  for await (const chunk of res.body ?? []) bytes += (chunk as Uint8Array).length;
  if (res.status !== status) throw new Error(`${what}: ${res.status}`);
  return bytes;
}

/**
 * The load-and-idle run of one environment variant: a server with profiles, mixed traffic at RATE
 * requests a second with an export downloaded in three forms every EXPORT_EVERY_S, then AFTER_S
 * seconds idle; VmRSS every second and the points of `Point`.
 */
async function mixedRun(
  variant: string,
): Promise<{ points: Point[]; peak: number; sent: number; late: number; exports: number }> {
  const saved = { ...process.env };
  if (variant !== '-') Object.assign(process.env, envPairs(variant));
  let audience: Audience;
  try {
    audience = await startAudience([
      'requests_per_second',
      'token_requests_per_minute',
      'profile_key_operations_per_second',
      'profile_export_requests_per_second',
      'export_downloads_per_minute',
    ]);
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  }
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(audience.dataDir) });
  db.on('error', (err) => log(`database connection: ${err.message}`));
  await db.connect();
  onCleanup(() => db.end().catch(() => {}));
  const ids = await definitionsOf(db, audience.accountId);
  const loaded = await loadProfiles(db, audience.accountId, ids, MIXED_PROFILES);
  log(`${variant}: ${MIXED_PROFILES} profiles loaded in ${loaded.loadS.toFixed(1)} s`);
  await db.end();
  const pid = audience.pid!;
  log(`${variant}: allocator ${await allocatorsOf(pid)}`);
  const points: Point[] = [];
  const point = async (at: string) => {
    const p = { at, rss: (await memoryOf(pid)).rss, rollup: await rollupOf(pid), heap: await heapOf(audience) };
    points.push(p);
    log(
      `${variant} ${at}: VmRSS ${mb(p.rss)} MB (anonymous ${mb(p.rollup.Anonymous)}), V8 heap used ${mb(p.heap.used)} of ${mb(p.heap.total)} MB (new space ${mb(p.heap.newSpace)}), external ${mb(p.heap.external)} MB`,
    );
  };
  await sleep(SETTLE_S * 1000);
  await point('before the load');

  const auth = { authorization: `Bearer ${audience.token}` };
  const section = encodeURIComponent(ids.shop.discriminator);
  const attributes = (n: number) =>
    `${audience.url}/audience/keyspaces/${encodeURIComponent(ids.emailKeyspace.discriminator)}/profiles/${encodeURIComponent(loadedEmail(n))}/sections/${section}/attributes`;
  const random = () => 1 + Math.floor(Math.random() * MIXED_PROFILES);
  const firstname = `${ids.ns}.attributes.firstname`;
  const points_ = ids.versions.get(`${ids.ns}.attributes.user-created.loyalty-points`);
  if (!points_) throw new Error('the Shop section has no loyalty points attribute');
  let peak = 0;
  const sampling = setInterval(() => {
    void memoryOf(pid).then(
      (m) => (peak = Math.max(peak, m.rss)),
      () => {},
    );
  }, 1000);
  let sent = 0;
  let late = 0;
  let exportsDone = 0;
  const failures: Error[] = [];
  const inFlight = new Set<Promise<unknown>>();
  const send = (what: string, work: () => Promise<unknown>) => {
    const p = work()
      .catch((err: Error) => failures.push(new Error(`${what}: ${err.message}`)))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  /** An export of every profile, polled until ready, then downloaded as CSV (gzip), Excel and JSON. */
  const exportCycle = async () => {
    const created = await fetch(`${audience.url}/audience/profiles/reports/segments`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        section_discriminator: ids.shop.discriminator,
        segment: {
          timezone: 'UTC',
          segment_definition: `section(${ids.shop.id}).attribute(${points_}).gte(0)`,
        },
        attributes: [
          { field_name: 'email', attribute_version_id: ids.versions.get(`${ids.ns}.attributes.email`) },
          { field_name: 'points', attribute_version_id: points_ },
        ],
      }),
    });
    const body = (await created.json()) as { file_download_url?: string };
    if (created.status !== 201 || !body.file_download_url)
      throw new Error(`export: ${created.status} ${JSON.stringify(body)}`);
    const poll = `${audience.url}/v2${new URL(body.file_download_url).pathname}`;
    for (;;) {
      const res = await fetch(poll, { headers: auth });
      await res.arrayBuffer();
      if (res.status === 200) break;
      if (res.status !== 202) throw new Error(`poll: ${res.status}`);
      await sleep(500);
    }
    const file = `${audience.url}${new URL(body.file_download_url).pathname}`;
    await drain(file, { headers: { ...auth, 'accept-encoding': 'gzip' } }, 200, 'CSV download');
    await drain(file, { headers: { ...auth, accept: XLSX } }, 200, 'Excel download');
    await drain(file, { headers: { ...auth, accept: 'application/json' } }, 200, 'JSON download');
    exportsDone++;
  };
  const started = performance.now();
  // Where the memory is as the load goes on: whether malloc's part levels off.
  const placing =
    PLACES_EVERY_S > 0
      ? setInterval(() => {
          void placesOf(pid).then(
            (places) =>
              log(`${variant}, load ${((performance.now() - started) / 1000).toFixed(0)} s: ${placesLine(places)}`),
            () => {},
          );
        }, PLACES_EVERY_S * 1000)
      : undefined;
  for (let i = 0; performance.now() - started < MIXED_S * 1000; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -1000) late++;
    if (i % (EXPORT_EVERY_S * RATE) === 0) {
      if (MIX === 'requests') continue;
      sent++;
      send('export', exportCycle);
      continue;
    }
    if (MIX === 'exports') continue;
    sent++;
    if (i % 10 === 8)
      send('sections', () => drain(`${audience.url}/audience/sections`, { headers: auth }, 200, 'sections'));
    else if (i % 10 === 9)
      send('PATCH', () =>
        drain(
          `${audience.url}/v2${new URL(attributes(random())).pathname}`,
          {
            method: 'PATCH',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ [firstname]: `F${i}` }),
          },
          204,
          'PATCH',
        ),
      );
    else send('GET', () => drain(attributes(random()), { headers: auth }, 200, 'GET'));
  }
  await Promise.all(inFlight);
  clearInterval(sampling);
  clearInterval(placing);
  if (failures.length > 0) throw new Error(`${failures.length} failed requests, e.g. ${failures[0].message}`);
  await point('end of the load');
  let idle = 0;
  for (const after of [...new Set([10, 60, AFTER_S])]) {
    await sleep((after - idle) * 1000);
    idle = after;
    await point(`idle ${after} s`);
  }
  log(`${variant}, where the memory is at the end: ${placesLine(await placesOf(pid))}`);
  await stopProgram(audience);
  return { points, peak, sent, late, exports: exportsDone };
}

const mb = (v: number) => v.toFixed(0);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

await runBench(DEADLINE_MS, async (autocannon) => {
  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; ${(os.totalmem() / 2 ** 30).toFixed(0)} GB; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `node ${process.version}; ${RUNS} runs; roles ${ROLES.join(', ')}; ${LOAD_S > 0 ? `${LOAD_S} s of load, then ` : ''}${SETTLE_S} s to settle after the requests${process.env.BENCH_SERVER_ARGS ? `; program flags: ${process.env.BENCH_SERVER_ARGS}` : ''}`,
  );
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-idle-'));
  onCleanup(() => fs.rm(scratch, { recursive: true, force: true }));
  // The floor of any TypeScript program run by type stripping: Node loads its transpiler for it.
  const trivial = path.join(scratch, 'idle.ts');
  await fs.writeFile(trivial, 'const forever: number = 2 ** 30;\nsetInterval(() => {}, forever);\nexport {};\n');

  const samples = new Map<string, Sample[]>();
  const add = (target: string, sample: Sample) => {
    samples.set(target, [...(samples.get(target) ?? []), sample]);
    log(
      `${target}: VmRSS ${mb(sample.rss)} MB, VmHWM ${mb(sample.hwm)} MB (anonymous ${mb(sample.anon)}, file ${mb(sample.file)})`,
    );
  };
  for (let run = 1; run <= RUNS; run++) {
    log(`run ${run} of ${RUNS}`);
    for (const role of ROLES) {
      const program = await startProgram(role);
      await requests(program, role);
      if (LOAD_S > 0 && role !== 'worker') await load(autocannon, program);
      await sleep(SETTLE_S * 1000);
      add(role, await memoryOf(program.pid!));
      await stopProgram(program);
    }
    add('bare node', await baseline(['-e', 'setInterval(() => {}, 2 ** 30)']));
    add('trivial .ts', await baseline([trivial]));
  }

  const rows = [
    [
      'target',
      'runs',
      'VmRSS min',
      'VmRSS median',
      'VmRSS max',
      'VmHWM min',
      'VmHWM median',
      'VmHWM max',
      'RssAnon median',
      'RssFile median',
    ],
  ];
  for (const [target, list] of samples) {
    const of = (pick: (s: Sample) => number) => list.map(pick);
    const rss = of((s) => s.rss);
    const hwm = of((s) => s.hwm);
    rows.push([
      target,
      String(list.length),
      mb(Math.min(...rss)),
      mb(median(rss)),
      mb(Math.max(...rss)),
      mb(Math.min(...hwm)),
      mb(median(hwm)),
      mb(Math.max(...hwm)),
      mb(median(of((s) => s.anon))),
      mb(median(of((s) => s.file))),
    ]);
  }
  console.log('');
  console.log("MB (MiB), the program's process only (not its PostgreSQL):");
  console.log(table(rows));
  const serve = samples.get('serve');
  if (serve) console.log(`\nserve, VmRSS median: ${mb(median(serve.map((s) => s.rss)))} MB (aim: under 150 MB)`);

  if (MIXED_S <= 0) return;
  console.log(
    `\nload and idle: serve with ${MIXED_PROFILES} profiles; ${MIXED_S} s at ${RATE} requests/s (attribute GETs, PATCHes, sections) with an export of every profile every ${EXPORT_EVERY_S} s downloaded as CSV, Excel and JSON; then ${AFTER_S} s idle. MB:`,
  );
  const mixedRows = [
    ['environment', 'at', 'VmRSS', 'Anonymous', 'File', 'V8 heap used', 'V8 heap total', 'new space', 'external'],
  ];
  for (const variant of VARIANTS) {
    const r = await mixedRun(variant);
    for (const p of r.points)
      mixedRows.push([
        variant,
        p.at,
        mb(p.rss),
        mb(p.rollup.Anonymous),
        mb(p.rss - p.rollup.Anonymous),
        mb(p.heap.used),
        mb(p.heap.total),
        mb(p.heap.newSpace),
        mb(p.heap.external),
      ]);
    mixedRows.push([variant, 'peak during the load', mb(r.peak), '', '', '', '', '', '']);
    log(
      `${variant}: ${r.sent} requests sent (${r.late} over a second late), ${r.exports} exports downloaded in three forms`,
    );
  }
  console.log(table(mixedRows));
});

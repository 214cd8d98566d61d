/**
 * `npm run bench:imports`: a profile import of a file just under the 50 MB limit (about 300,000
 * rows), from the start of its upload to `completed`, and the memory of the server process while
 * it runs; then the same with a file a fifth of the size, to show that memory does not grow with
 * the file.
 *
 * 1. Generates the CSV files, streamed to a temp file (never whole in memory): an email key, five
 *    attributes of the demo account's Shop section (first name, last name padded with filler text
 *    to reach the file size, birthday as a Date, loyalty points as a Number with decimal,
 *    newsletter reader as True/False) and a consent column for the topic "Weekly news" on the
 *    email channel; every key is new.
 * 2. Starts the real server (`node src/main.js serve`, API and worker, embedded PostgreSQL) with
 *    bench/harness.ts, with the demo account's request limits lifted.
 * 3. Per file: creates a version 2 import (the five attribute mappings, two tag mappings, one
 *    consent mapping), uploads the file with a streamed multipart body (node:http, the form fields
 *    in order, then `file`), and polls the import's status every 100 ms until `completed`.
 *    Meanwhile VmRSS of the server process is sampled from /proc/<pid>/status every 100 ms; VmHWM
 *    is read at the end. The server's CPU time and that of its PostgreSQL come from /proc/<pid>/stat.
 *
 * The small file runs first, so that the large one starts with a server that has already imported
 * once (caches, pools, JIT warm) and its peak shows any growth with the file size.
 *
 * With BENCH_LIVE_SEGMENTS (e.g. "0,1,10"), what live segments (docs/aql.md "Live segments") cost an
 * import, for docs/benchmarks.md "Live segments": the small file only, as a warm-up; then per round
 * (BENCH_ROUNDS), for each number of live segments in turn (the order reversed in every other
 * round), makes that many of bench/live.ts's segments live (and waits until the job computed them),
 * generates a new file of BENCH_IMPORT_ROWS rows (new keys), imports it and waits until the
 * membership caught up (no marked profile nor due run of the job left). Reported per import: its
 * time and the time until caught up, each as a ratio of the 0-live import of the same round, the
 * PostgreSQL CPU per row (the import's and the catch-up's), the server's peak RSS, and the load
 * average.
 *
 * Everything is bounded in time and cleaned up (child processes, temp dirs with the generated
 * files) on failure too. Settings from the environment: BENCH_IMPORT_ROWS (300000),
 * BENCH_IMPORT_BYTES (52000000, just under the limit of 52428800), BENCH_IMPORT_SMALL (5: the small
 * file is 1/5 of the large one; 0 skips it), BENCH_LIVE_SEGMENTS and BENCH_ROUNDS (above), BENCH_SERVER_ARGS (extra node flags for the server,
 * e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" or "--max-semi-space-size=8"), and for profiling
 * BENCH_DB_SAMPLE and BENCH_HEAP_SNAPSHOT (below).
 */
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import pg from 'pg';
import {
  embeddedDatabaseUrl,
  log,
  memoryOf,
  onCleanup,
  request,
  ROUNDS,
  runBench,
  sampleMemory,
  sleep,
  startAudience,
  table,
  upload,
  within,
  type Audience,
} from './harness.ts';
import { CATCH_UP_MS, liveSettings, storeLiveSegments } from './live.ts';

const ROWS = Math.max(100, Number(process.env.BENCH_IMPORT_ROWS ?? 300_000));
const BYTES = Number(process.env.BENCH_IMPORT_BYTES ?? 52_000_000);
const SMALL = Math.max(0, Number(process.env.BENCH_IMPORT_SMALL ?? 5));
/** The server's limit on an uploaded file (src/imports/imports.ts MAX_FILE_BYTES). */
const LIMIT_BYTES = 50 * 1024 * 1024;
const AIM_S = 15;
const AIM_RSS_MB = 300;
/** Upload, and ingestion, of one file. */
const UPLOAD_TIMEOUT_MS = 120_000;
const IMPORT_TIMEOUT_MS = 300_000;
/** The numbers of live segments of the live rounds (BENCH_LIVE_SEGMENTS); none without it. */
const LIVE = process.env.BENCH_LIVE_SEGMENTS === undefined ? undefined : liveSettings([]);
const DEADLINE_MS =
  180_000 +
  2 * (UPLOAD_TIMEOUT_MS + IMPORT_TIMEOUT_MS) +
  (LIVE ? ROUNDS * LIVE.length * (UPLOAD_TIMEOUT_MS + IMPORT_TIMEOUT_MS + 2 * CATCH_UP_MS) : 0);
const SAMPLE_MS = 100;
/** BENCH_DB_SAMPLE=1: also samples pg_stat_activity every 20 ms and prints what the database spent its time on. */
const DB_SAMPLE = process.env.BENCH_DB_SAMPLE === '1';
/**
 * BENCH_HEAP_SNAPSHOT=mid or end: sends the server SIGUSR2 when an import is half done, or after it,
 * which writes a heap snapshot when BENCH_SERVER_ARGS has "--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<dir>".
 */
const HEAP_SNAPSHOT = process.env.BENCH_HEAP_SNAPSHOT;
// Without the flag, SIGUSR2 would end the server.
if (HEAP_SNAPSHOT && !(process.env.BENCH_SERVER_ARGS ?? '').includes('--heapsnapshot-signal=SIGUSR2')) {
  throw new Error('BENCH_HEAP_SNAPSHOT needs BENCH_SERVER_ARGS="--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<dir>"');
}
const POLL_MS = 100;

const FIRST = [
  'Anna',
  'Bjørn',
  'Chloé',
  'David',
  'Eva',
  'Finn',
  'Greta',
  'Hassan',
  'Ingrid',
  'Jonas',
  'Kari',
  'Lars',
  'Maja',
  'Nils',
  'Olivia',
  'Per',
];
const LAST = [
  'Hansen',
  'Johansen',
  'Olsen',
  'Larsen',
  'Andersen',
  'Pedersen',
  'Nilsen',
  'Kristiansen',
  'Jensen',
  'Karlsen',
  'Müller',
  'García',
];
const FILLER =
  'Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua '.repeat(
    8,
  );
const HEADER = 'email,first_name,last_name,birthday,points,newsletter,weekly_news\n';

// ---- The file ----

/** Row n of a file whose keys start with `prefix`, padded to `width` bytes (line end included) where it can be. */
function csvRow(prefix: string, n: number, width: number): string {
  const year = 1950 + (n % 55);
  const month = 1 + (n % 12);
  const day = 1 + (n % 28);
  const two = (v: number) => String(v).padStart(2, '0');
  // Mostly ISO dates, every third one day first, as people send them.
  const birthday = n % 3 === 0 ? `${two(day)}.${two(month)}.${year}` : `${year}-${two(month)}-${two(day)}`;
  const points = (((n * 7919) % 100_000) / 10).toFixed(1);
  const newsletter = ['true', 'false', 'yes', 'no'][n % 4];
  const consent = n % 5 === 0 ? '0' : '1';
  const last = `${LAST[n % LAST.length]}-${n}`;
  const base = `${prefix}${n}@bench.example.com,${FIRST[n % FIRST.length]},"${last}, ",${birthday},${points},${newsletter},${consent}\n`;
  // Multi-byte letters: pad by bytes, not characters.
  const pad = Math.max(0, width - Buffer.byteLength(base));
  return `${prefix}${n}@bench.example.com,${FIRST[n % FIRST.length]},"${last}, ${FILLER.slice(0, pad)}",${birthday},${points},${newsletter},${consent}\n`;
}

/** Writes `rows` rows of about `bytes` in total to `file`, streamed with back-pressure; returns its size. */
async function writeCsv(file: string, prefix: string, rows: number, bytes: number): Promise<number> {
  const width = Math.floor((bytes - HEADER.length) / rows);
  const out = createWriteStream(file);
  const done = new Promise<void>((resolve, reject) => {
    out.once('finish', resolve);
    out.once('error', reject);
  });
  if (!out.write(HEADER)) await once(out, 'drain');
  for (let n = 1; n <= rows;) {
    let chunk = '';
    for (const end = Math.min(rows, n + 999); n <= end; n++) chunk += csvRow(prefix, n, width);
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await done;
  return (await fs.stat(file)).size;
}

// ---- The server's process ----

/** CPU ms (user + system) of a process and, apart, of its descendants (the embedded PostgreSQL, with its ended backends), from /proc. */
async function cpuMs(pid: number): Promise<{ own: number; descendants: number }> {
  const pids = (await fs.readdir('/proc')).filter((d) => /^\d+$/.test(d));
  const all = (
    await Promise.all(
      pids.map(async (p) => {
        const stat = await fs.readFile(`/proc/${p}/stat`, 'utf8').catch(() => undefined);
        if (!stat) return undefined;
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        // utime + stime, and cutime + cstime: the children it has reaped (PostgreSQL's ended backends), in 1/100 s.
        return [
          Number(p),
          Number(f[1]),
          (Number(f[11]) + Number(f[12])) * 10,
          (Number(f[13]) + Number(f[14])) * 10,
        ] as const;
      }),
    )
  ).filter((r) => r !== undefined);
  const tree = new Set([pid]);
  let descendants = 0;
  for (let grown = true; grown;) {
    grown = false;
    for (const [p, parent, cpu, reaped] of all) {
      if (!tree.has(p) && tree.has(parent)) {
        tree.add(p);
        descendants += cpu + reaped;
        grown = true;
      }
    }
  }
  return { own: all.find(([p]) => p === pid)?.[2] ?? NaN, descendants };
}

/**
 * A sampling profile of the database: every 20 ms, the state (and for active backends the
 * statement, its first line) of the server's connections, from pg_stat_activity.
 */
async function sampleDatabase(server: Audience) {
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await within(10_000, 'database connection', db.connect());
  onCleanup(() => db.end());
  const counts = new Map<string, number>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await db.query<{ type: string; state: string | null; query: string; wait: string | null }>(
        `select backend_type as type, state, query, wait_event_type || ':' || wait_event as wait from pg_stat_activity
         where pid <> pg_backend_pid() and (backend_type = 'client backend' and state <> 'idle' or backend_type in ('autovacuum worker', 'checkpointer') and wait_event_type is distinct from 'Activity')`,
      );
      samples++;
      for (const r of rows) {
        const what =
          r.type !== 'client backend'
            ? `${r.type}${r.wait ? ` (${r.wait})` : ''}${r.type === 'autovacuum worker' ? `: ${r.query.slice(0, 80)}` : ''}`
            : r.state === 'active'
              ? `active${r.wait ? ` (${r.wait})` : ''}: ${r.query.replace(/\s+/g, ' ').slice(0, 110)}`
              : r.state!;
        counts.set(what, (counts.get(what) ?? 0) + 1);
      }
      await sleep(20);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      console.log(`database samples (${samples}, every 20 ms; share of samples in which a connection was so):`);
      for (const [what, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 30))
        console.log(`  ${((100 * n) / samples).toFixed(1).padStart(5)}%  ${what}`);
    },
  };
}

// ---- The API ----

async function api<T>(server: Audience, method: string, urlPath: string, body?: unknown): Promise<T> {
  const res = await request(`${server.url}${urlPath}`, {
    method,
    headers: {
      authorization: `Bearer ${server.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${res.text}`);
  return JSON.parse(res.text) as T;
}

interface Setting {
  section: string;
  ns: string;
  versions: Record<string, string>;
}

/** The demo account's Shop section and the current versions of the attributes the file maps. */
async function settingOf(server: Audience): Promise<Setting> {
  const sections = await api<{ items: { discriminator: string }[] }>(server, 'GET', '/audience/sections');
  const section = sections.items.find((s) => s.discriminator.endsWith('.sections.user-created.shop'))?.discriminator;
  if (!section) throw new Error('the demo account has no Shop section');
  const ns = section.replace(/\.sections\.user-created\.shop$/, '');
  const attributes = await api<{
    items: { discriminator: string; versions: { id: string; deprecated_at?: string | null }[] }[];
  }>(server, 'GET', `/audience/sections/${section}/attributes`);
  const current = (name: string) => {
    const a = attributes.items.find((x) => x.discriminator === `${ns}.attributes.${name}`);
    const v = a?.versions.filter((x) => !x.deprecated_at).at(-1);
    if (!v) throw new Error(`the Shop section has no current version of ${ns}.attributes.${name}`);
    return v.id;
  };
  const versions = Object.fromEntries(
    (
      [
        ['first_name', 'firstname'],
        ['last_name', 'lastname'],
        ['birthday', 'user-created.birthday'],
        ['points', 'user-created.loyalty-points'],
        ['newsletter', 'user-created.newsletter-reader'],
      ] as const
    ).map(([column, name]) => [column, current(name)]),
  );
  return { section, ns, versions };
}

interface Status {
  result: {
    status: string;
    profiles_found: number;
    profiles_processed: number;
    profiles_failed: number;
    message?: string;
  };
  report: {
    profiles_new: number;
    profiles_updated: number;
    profiles_not_changed: number;
    profiles_failed: number;
    failures: { line: number; reason: string }[];
  };
}

interface Figures {
  label: string;
  rows: number;
  bytes: number;
  uploadS: number;
  queuedS: number;
  totalS: number;
  rssBeforeKb: number;
  peakKb: number;
  peakUploadKb: number;
  peakIngestKb: number;
  rssAfterKb: number;
  hwmKb: number;
  samples: number;
  serverCpuS: number;
  dbCpuS: number;
  status: Status;
}

/** One import of `file` (rows with keys `prefix…`): create, upload, poll until done; the figures. */
async function runImport(
  server: Audience,
  setting: Setting,
  label: string,
  file: string,
  rows: number,
  bytes: number,
): Promise<Figures> {
  const { section, ns, versions } = setting;
  const created = await api<{ import_id: string; file_upload_url: string; file_upload_body: Record<string, string> }>(
    server,
    'POST',
    `/v2/audience/sections/${section}/imports`,
    {
      keyspace_mapping: { keyspace_discriminator: `${ns}.keyspaces.email`, field_selector: 'email' },
      attribute_mappings: Object.entries(versions).map(([column, id]) => ({
        field_selector: column,
        attribute_version_id: id,
      })),
      tag_mappings: [
        { tag_discriminator: `${ns}.tags.user-created.vip` },
        { tag_discriminator: `${ns}.tags.user-created.newsletter` },
      ],
      consent_mappings: [
        {
          consents: [
            {
              field_selector: 'weekly_news',
              topic_discriminator: `${ns}.topics.user-created.weekly-news`,
              channel_discriminator: `${ns}.channels.email`,
              type: 'opt-in',
            },
          ],
        },
      ],
    },
  );
  const pid = server.pid!;
  // The upload goes to the server we started, on loopback, whatever host the form names.
  const uploadUrl = server.url + new URL(created.file_upload_url).pathname;
  await sleep(500);
  const rssBefore = (await memoryOf(pid))!.rssKb;
  const cpuBefore = await cpuMs(pid);
  const sampler = sampleMemory(pid, SAMPLE_MS);
  sampler.phase('upload');
  log(`${label}: uploading ${(bytes / 1e6).toFixed(1)} MB (import ${created.import_id})`);
  const started = performance.now();
  let figures: Omit<
    Figures,
    | 'rssBeforeKb'
    | 'peakKb'
    | 'peakUploadKb'
    | 'peakIngestKb'
    | 'rssAfterKb'
    | 'hwmKb'
    | 'samples'
    | 'serverCpuS'
    | 'dbCpuS'
  >;
  let memory: ReturnType<ReturnType<typeof sampleMemory>['stop']>;
  try {
    const uploaded = await upload(uploadUrl, created.file_upload_body, file, bytes, UPLOAD_TIMEOUT_MS);
    if (uploaded.status !== 204) throw new Error(`upload: ${uploaded.status} ${uploaded.text}`);
    const uploadS = (performance.now() - started) / 1000;
    log(`${label}: uploaded in ${uploadS.toFixed(2)} s`);
    sampler.phase('ingest');
    let queuedS = NaN;
    let status: Status;
    let lastLog = performance.now();
    let snapshot = HEAP_SNAPSHOT === 'mid';
    for (;;) {
      status = await api<Status>(server, 'GET', `/audience/sections/${section}/imports/${created.import_id}`);
      const now = performance.now();
      if (Number.isNaN(queuedS) && status.result.status !== 'queued') queuedS = (now - started) / 1000 - uploadS;
      if (status.result.status === 'completed' || status.result.status === 'error') break;
      if (snapshot && status.result.profiles_found >= rows / 2) {
        snapshot = false;
        process.kill(pid, 'SIGUSR2');
      }
      if (now - started > IMPORT_TIMEOUT_MS)
        throw new Error(`${label}: not done within ${IMPORT_TIMEOUT_MS / 1000} s (${JSON.stringify(status.result)})`);
      if (now - lastLog > 3000) {
        lastLog = now;
        log(
          `${label}: ${status.result.status}, ${status.result.profiles_found} rows after ${((now - started) / 1000).toFixed(1)} s`,
        );
      }
      await sleep(POLL_MS);
    }
    const totalS = (performance.now() - started) / 1000;
    figures = { label, rows, bytes, uploadS, queuedS, totalS, status };
  } finally {
    memory = sampler.stop();
  }
  const cpuAfter = await cpuMs(pid);
  const after = (await memoryOf(pid))!;
  return {
    ...figures,
    rssBeforeKb: rssBefore,
    peakKb: memory.peakKb,
    peakUploadKb: memory.peaks.get('upload') ?? NaN,
    peakIngestKb: memory.peaks.get('ingest') ?? NaN,
    rssAfterKb: after.rssKb,
    hwmKb: after.hwmKb,
    samples: memory.samples,
    serverCpuS: (cpuAfter.own - cpuBefore.own) / 1000,
    dbCpuS: Math.max(0, cpuAfter.descendants - cpuBefore.descendants) / 1000,
  };
}

/** The import did what the file says: every row new, nothing failed; one profile's values and consent. */
async function check(server: Audience, setting: Setting, f: Figures, prefix: string): Promise<void> {
  const r = f.status.result;
  if (r.status !== 'completed') throw new Error(`${f.label}: ${r.status}: ${r.message ?? ''}`);
  const want = { profiles_found: f.rows, profiles_processed: f.rows, profiles_failed: 0 };
  if (
    r.profiles_found !== want.profiles_found ||
    r.profiles_processed !== want.profiles_processed ||
    r.profiles_failed !== 0 ||
    f.status.report.profiles_new !== f.rows
  ) {
    throw new Error(
      `${f.label}: expected ${JSON.stringify(want)} and ${f.rows} new, got ${JSON.stringify(f.status)}`.slice(0, 2000),
    );
  }
  const n = Math.max(1, Math.floor(f.rows / 2) - (Math.floor(f.rows / 2) % 5) + 1); // consent cell "1"
  const key = `${prefix}${n}@bench.example.com`;
  const base = `/audience/keyspaces/${setting.ns}.keyspaces.email/profiles/${encodeURIComponent(key)}/sections/${setting.section}`;
  const values = await api<Record<string, unknown>>(server, 'GET', `${base}/attributes`);
  const expected = csvRow(prefix, n, 0).split(',');
  const birthday = /^\d\d\.\d\d\.\d{4}$/.test(expected[4]) ? expected[4].split('.').reverse().join('-') : expected[4];
  if (
    values[setting.versions.first_name] !== expected[1] ||
    values[setting.versions.birthday] !== birthday ||
    values[setting.versions.points] !== Number(expected[5]) ||
    typeof values[setting.versions.points] !== 'number' ||
    typeof values[setting.versions.newsletter] !== 'boolean'
  ) {
    throw new Error(`${f.label}: profile ${key} has ${JSON.stringify(values).slice(0, 500)}`);
  }
  const consents = await api<{ items: { topic_discriminator: string; type: string; source: string }[] }>(
    server,
    'GET',
    `/v2${base}/consents`,
  );
  if (
    !consents.items.some(
      (c) => c.topic_discriminator.endsWith('.weekly-news') && c.type === 'opt-in' && c.source === 'Profile import',
    )
  ) {
    throw new Error(`${f.label}: profile ${key} has no weekly-news opt-in: ${JSON.stringify(consents)}`);
  }
}

/**
 * The live rounds (BENCH_LIVE_SEGMENTS): per round, for each number of live segments, a new file of
 * ROWS rows imported with that many live, and the wait until their membership caught up.
 */
async function liveRounds(server: Audience, setting: Setting, dir: string, settings: number[]): Promise<void> {
  const pid = server.pid!;
  const live = await storeLiveSegments(server, setting.ns);
  const rows = [
    [
      'live segments',
      'round',
      'upload→completed s',
      'x the 0-live import',
      'caught up after s',
      'x the 0-live, to caught up',
      'PostgreSQL CPU µs per row',
      'server CPU s',
      'peak RSS ingest MB',
      'RSS caught up MB',
      'load average',
    ],
  ];
  for (let round = 1; round <= ROUNDS; round++) {
    const figures = new Map<number, { totalS: number; caughtUpS: number; row: string[] }>();
    for (const n of round % 2 === 1 ? settings : [...settings].reverse()) {
      await live.setLive(n);
      const prefix = `r${round}x${n}-`;
      const file = path.join(dir, `${prefix}.csv`);
      const size = await writeCsv(file, prefix, ROWS, BYTES);
      if (size >= LIMIT_BYTES) throw new Error(`${file} is ${size} bytes, over the limit`);
      const f = await runImport(server, setting, `round ${round}, ${n} live`, file, ROWS, size);
      await fs.rm(file);
      const cpuBefore = await cpuMs(pid);
      const caughtUpS = (await live.caughtUp(n)) / 1000;
      const cpuAfter = await cpuMs(pid);
      const rss = (await memoryOf(pid))!.rssKb;
      await check(server, setting, f, prefix);
      const dbCpuS = f.dbCpuS + Math.max(0, cpuAfter.descendants - cpuBefore.descendants) / 1000;
      const serverCpuS = f.serverCpuS + (cpuAfter.own - cpuBefore.own) / 1000;
      log(
        `round ${round}, ${n} live: completed in ${f.totalS.toFixed(2)} s, caught up ${caughtUpS.toFixed(2)} s after (${await live.members(n)} members); load ${os.loadavg()[0].toFixed(1)}`,
      );
      figures.set(n, {
        totalS: f.totalS,
        caughtUpS,
        row: [
          String(n),
          String(round),
          f.totalS.toFixed(2),
          '',
          caughtUpS.toFixed(2),
          '',
          ((dbCpuS * 1e6) / ROWS).toFixed(0),
          serverCpuS.toFixed(1),
          mb(f.peakIngestKb),
          mb(rss),
          os.loadavg()[0].toFixed(1),
        ],
      });
    }
    const baseline = figures.get(0)!;
    for (const n of settings) {
      const { totalS, caughtUpS, row } = figures.get(n)!;
      row[3] = (totalS / baseline.totalS).toFixed(2);
      row[5] = ((totalS + caughtUpS) / (baseline.totalS + baseline.caughtUpS)).toFixed(2);
      rows.push(row);
    }
  }
  console.log(`${ROWS}-row imports with ${settings.join(', ')} live segments, ${ROUNDS} rounds:`);
  console.log(table(rows));
  const cpu = process.cpuUsage();
  console.log(
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(
        ' ',
      )}; load generator CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms (the files' generation included)`,
  );
}

const mb = (kb: number) => (Number.isFinite(kb) ? (kb / 1024).toFixed(0) : 'n/a');

await runBench(DEADLINE_MS, async () => {
  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `node ${process.version}; ${ROWS} rows in about ${(BYTES / 1e6).toFixed(1)} MB${SMALL > 0 ? `, and a file of 1/${SMALL} of that first` : ''}`,
  );
  if (BYTES >= LIMIT_BYTES) throw new Error(`BENCH_IMPORT_BYTES must be under the server's limit of ${LIMIT_BYTES}`);

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-bench-imports-'));
  onCleanup(() => fs.rm(dir, { recursive: true, force: true }));
  const files = [
    ...(SMALL > 0
      ? [{ label: `1/${SMALL} file`, prefix: 's', rows: Math.round(ROWS / SMALL), bytes: Math.round(BYTES / SMALL) }]
      : []),
    // With live rounds, their files are the large ones.
    ...(LIVE ? [] : [{ label: 'large file', prefix: 'l', rows: ROWS, bytes: BYTES }]),
  ];
  const generated = [];
  for (const f of files) {
    const file = path.join(dir, `${f.prefix}.csv`);
    const t = performance.now();
    const size = await writeCsv(file, f.prefix, f.rows, f.bytes);
    if (size >= LIMIT_BYTES) throw new Error(`${file} is ${size} bytes, over the limit`);
    log(`generated ${f.label}: ${f.rows} rows, ${size} bytes in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    generated.push({ ...f, file, size });
  }

  const server = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'import_requests_per_minute',
  ]);
  if (server.pid === undefined) throw new Error('no pid of the audience server');
  const setting = await settingOf(server);
  const startHwm = (await memoryOf(server.pid))!;
  console.log(`server after start-up: VmRSS ${mb(startHwm.rssKb)} MB, VmHWM ${mb(startHwm.hwmKb)} MB`);

  const results: Figures[] = [];
  for (const g of generated) {
    const dbSampler = DB_SAMPLE ? await sampleDatabase(server) : undefined;
    const f = await runImport(server, setting, g.label, g.file, g.rows, g.size);
    await dbSampler?.stop();
    if (HEAP_SNAPSHOT === 'end') {
      process.kill(server.pid, 'SIGUSR2');
      await sleep(15_000);
    }
    await check(server, setting, f, g.prefix);
    log(
      `${g.label}: completed in ${f.totalS.toFixed(2)} s (upload ${f.uploadS.toFixed(2)} s), peak RSS ${mb(f.peakKb)} MB`,
    );
    results.push(f);
  }

  const rows = [
    [
      'file',
      'rows',
      'MB',
      'upload s',
      'queued s',
      'upload→completed s',
      'rows/s',
      'RSS before MB',
      'peak RSS upload MB',
      'peak RSS ingest MB',
      'RSS after MB',
      'VmHWM MB',
      'server CPU s',
      'PostgreSQL CPU s',
    ],
  ];
  for (const f of results) {
    rows.push([
      f.label,
      String(f.rows),
      (f.bytes / 1e6).toFixed(1),
      f.uploadS.toFixed(2),
      f.queuedS.toFixed(1),
      f.totalS.toFixed(2),
      (f.rows / f.totalS).toFixed(0),
      mb(f.rssBeforeKb),
      mb(f.peakUploadKb),
      mb(f.peakIngestKb),
      mb(f.rssAfterKb),
      mb(f.hwmKb),
      f.serverCpuS.toFixed(1),
      f.dbCpuS.toFixed(1),
    ]);
  }
  console.log('');
  console.log(table(rows));
  console.log('');
  if (LIVE) {
    await liveRounds(server, setting, dir, LIVE);
    return;
  }
  const large = results.at(-1)!;
  const peakAll = Math.max(...results.map((r) => r.peakKb), large.hwmKb);
  const timeOk = large.totalS < AIM_S;
  const memoryOk = peakAll / 1024 < AIM_RSS_MB;
  console.log(
    `large file, upload start → completed: ${large.totalS.toFixed(2)} s (upload ${large.uploadS.toFixed(2)} s, ${(large.rows / large.totalS).toFixed(0)} rows/s); aim: under ${AIM_S} s: ${timeOk ? 'met' : 'MISSED'}`,
  );
  console.log(
    `server process peak memory: sampled VmRSS ${mb(Math.max(...results.map((r) => r.peakKb)))} MB, VmHWM ${mb(large.hwmKb)} MB (${results.map((r) => r.samples).reduce((a, b) => a + b)} samples every ${SAMPLE_MS} ms); aim: under ${AIM_RSS_MB} MB: ${memoryOk ? 'met' : 'MISSED'}`,
  );
  if (results.length > 1) {
    const small = results[0];
    console.log(
      `peak VmRSS during ingestion: ${small.label} ${mb(small.peakIngestKb)} MB, large file ${mb(large.peakIngestKb)} MB (${(large.bytes / small.bytes).toFixed(1)} × the size)`,
    );
  }
});

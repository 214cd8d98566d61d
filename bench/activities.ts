/**
 * `npm run bench:activities`: the ingestion of activity events through the operator endpoint, and
 * the statistics of one activity (docs/activities.md, docs/benchmarks.md "Activities").
 *
 * 1. Starts the real server (`node src/main.js serve`, embedded PostgreSQL) with bench/harness.ts.
 * 2. Creates BENCH_ACTIVITIES email activities in the demo account's Shop section through the
 *    operator API, and loads BENCH_ACTIVITY_PROFILES profiles with email keys straight into the
 *    database (INSERT … SELECT over generate_series).
 * 3. Ingestion: BENCH_ACTIVITY_EVENTS events (a fifth of them of the first activity, the rest
 *    spread over the others; SENT, DELIVERED, OPENED, CLICKED, BOUNCED, UNSUBSCRIBED, ABUSE in
 *    proportions of a real sending) as JSON arrays of BENCH_ACTIVITY_BATCH events, posted by
 *    BENCH_ACTIVITY_CONCURRENCY concurrent senders to POST /admin/accounts/{id}/activity-events.
 *    Reports events per second, and the CPU share of the server, its PostgreSQL and this process
 *    (the load generator).
 * 4. The baseline, in the same run: PostgreSQL COPY of the same rows (profile ids resolved) into a
 *    table shaped and indexed like activity_events; the ratio of the two rates.
 * 5. Statistics: GET /emails/sections/{s}/activities/{first}?include_statistics=true under
 *    autocannon (BENCH_CONNECTIONS, BENCH_DURATION_S): p50 and p99 latency.
 * 6. The email event export of the window holding the first BENCH_EMAIL_EXPORT_ROWS events
 *    (1000000, at most the events ingested): POST /emails/reports, status calls until completed,
 *    the file downloaded and its rows counted; the server's VmRSS sampled every 100 ms. Baseline in
 *    the same run: COPY … TO STDOUT (CSV) of the same rows of activity_events, gzip-compressed by
 *    this process.
 *
 * Settings from the environment: BENCH_ACTIVITY_EVENTS (5000000), BENCH_ACTIVITY_PROFILES (200000),
 * BENCH_ACTIVITIES (50), BENCH_ACTIVITY_BATCH (5000), BENCH_ACTIVITY_CONCURRENCY (3), and those of
 * bench/harness.ts.
 */
import os from 'node:os';
import zlib from 'node:zlib';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import {
  cpuMsOf,
  embeddedDatabaseUrl,
  log,
  measure,
  memoryOf,
  onCleanup,
  restartProgram,
  runBench,
  sampleMemory,
  sampleWaits,
  sleep,
  startAudience,
  table,
  type Audience,
} from './harness.ts';

const EVENTS = Math.max(1000, Number(process.env.BENCH_ACTIVITY_EVENTS ?? 5_000_000));
const PROFILES = Math.max(100, Number(process.env.BENCH_ACTIVITY_PROFILES ?? 200_000));
const ACTIVITIES = Math.max(2, Number(process.env.BENCH_ACTIVITIES ?? 50));
const BATCH = Math.max(100, Number(process.env.BENCH_ACTIVITY_BATCH ?? 5000));
const CONCURRENCY = Math.max(1, Number(process.env.BENCH_ACTIVITY_CONCURRENCY ?? 3));
const EXPORT_ROWS = Math.min(EVENTS, Math.max(1000, Number(process.env.BENCH_EMAIL_EXPORT_ROWS ?? 1_000_000)));
const SHOP = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';
/**
 * Start-up and load, the statistics and the export, then ingestion at no less than 2,000 events a
 * second and the baselines at no less than 5,000 (a machine shared with other work is slow).
 */
const DEADLINE_MS = 600_000 + EVENTS * 0.7;

/** Of 100 events of a sending: the type of each. */
const TYPES = [
  ...Array(32).fill('SENT'),
  ...Array(30).fill('DELIVERED'),
  ...Array(20).fill('OPENED'),
  ...Array(10).fill('CLICKED'),
  ...Array(4).fill('BOUNCED'),
  ...Array(3).fill('UNSUBSCRIBED'),
  'ABUSE',
] as string[];
const TYPE_NAMES = [...new Set(TYPES)];

/** Event n: its activity (a fifth are of the first), its profile, its type. */
function eventOf(n: number) {
  const activity = n % 5 === 0 ? 0 : 1 + (n % (ACTIVITIES - 1));
  // A multiplicative hash spreads consecutive events over the profiles.
  const profile = Number((BigInt(n) * 2654435761n) % BigInt(PROFILES));
  const type = TYPES[Math.floor(n / 7) % TYPES.length];
  return { activity, profile, type };
}

function body(from: number, to: number): string {
  const items = [];
  for (let n = from; n < to; n++) {
    const e = eventOf(n);
    items.push({
      activity_id: `bench-${e.activity}`,
      type: e.type,
      keyspace_discriminator: EMAIL,
      profile_key: `p${e.profile}@bench.example.com`,
      correlation_id: `e${n}`,
      event_time: new Date(Date.UTC(2026, 0, 1) + n).toISOString(),
      ...(e.type === 'OPENED' || e.type === 'CLICKED' ? { device: 'MOBILE', location: 'NO' } : {}),
      ...(e.type === 'CLICKED' ? { link_id: 'l1', link_url: 'https://shop.example/sale', link_title: 'Sale' } : {}),
      ...(e.type === 'BOUNCED' ? { bounce_code: 2001 } : {}),
    });
  }
  return JSON.stringify(items);
}

async function admin(server: Audience, method: string, path: string, payload: string): Promise<any> {
  const res = await fetch(`${server.url}/admin/accounts/${server.accountId}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: payload,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

/**
 * The server's V8 heaps (its API thread and worker thread together) from /metrics, in MB: their
 * total size and what is used of it, the new (young generation) space's size, and the memory V8
 * accounts as external (Buffers and the like), beside the VmRSS of the process.
 */
async function heapOf(server: Audience): Promise<{ total: number; used: number; young: number; external: number }> {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.adminToken}` } });
  const text = await res.text();
  const mb = (name: string) =>
    Number(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} ([0-9.e+]+)`, 'm').exec(text)?.[1] ?? NaN) / 1048576;
  return {
    total: mb('nodejs_heap_size_total_bytes'),
    used: mb('nodejs_heap_size_used_bytes'),
    young: mb('nodejs_heap_space_size_total_bytes{space="new"}'),
    external: mb('nodejs_external_memory_bytes'),
  };
}

const cpuShare = (ms: number, wallMs: number) => `${((100 * ms) / wallMs).toFixed(0)}%`;
const perEvent = (ms: number) => `${((1000 * ms) / EVENTS).toFixed(0)} µs/event`;

await runBench(DEADLINE_MS, async (autocannon) => {
  let server = await startAudience();
  const connect = async () => {
    const client = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
    await client.connect();
    return client;
  };
  let db = await connect();
  onCleanup(() => db.end());

  for (let a = 0; a < ACTIVITIES; a++) {
    await admin(
      server,
      'PUT',
      `/activities/bench-${a}`,
      JSON.stringify({
        kind: 'email',
        section_discriminator: SHOP,
        name: `Bench ${a}`,
        status: 'sent',
        email_subject: `Subject ${a}`,
      }),
    );
  }
  const account = server.accountId;
  const keyspace = (
    await db.query('select keyspace_id::text from keyspaces where account_id = $1::bigint and discriminator = $2', [
      account,
      EMAIL,
    ])
  ).rows[0].keyspace_id as string;
  const loadStarted = Date.now();
  await db.query(
    `insert into profiles (account_id, export_key, created_at) select $1::bigint, 'bench-' || n, now() from generate_series(0, $2::int - 1) n`,
    [account, PROFILES],
  );
  await db.query(
    `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
     select account_id, $2::bigint, 'p' || substr(export_key, 7) || '@bench.example.com', profile_id from profiles where account_id = $1::bigint and export_key like 'bench-%'`,
    [account, keyspace],
  );
  // Each profile's address in the Shop section (the attribute the email keyspace maps to), as the
  // email event export reads it.
  const addresses = await db.query(
    `insert into profile_sections (account_id, profile_id, section_id, attributes)
     select p.account_id, p.profile_id, a.section_id, jsonb_build_object(v.version_id::text, 'p' || substr(p.export_key, 7) || '@bench.example.com')
     from profiles p
     join keyspaces k on k.account_id = p.account_id and k.keyspace_id = $2::bigint
     join sections s on s.account_id = p.account_id and s.discriminator = $3
     join attributes a on a.account_id = p.account_id and a.section_id = s.section_id and a.discriminator = k.mapped_attribute
     join lateral (select max(version_id) as version_id from attribute_versions v where v.account_id = a.account_id and v.attribute_id = a.attribute_id) v on true
     where p.account_id = $1::bigint and p.export_key like 'bench-%'`,
    [account, keyspace, SHOP],
  );
  if (addresses.rowCount !== PROFILES)
    throw new Error(`addresses of ${addresses.rowCount} of ${PROFILES} profiles written`);
  await db.query('analyze');
  log(`${ACTIVITIES} activities, ${PROFILES} profiles loaded in ${((Date.now() - loadStarted) / 1000).toFixed(1)} s`);

  // ---- Ingestion through the endpoint ----
  const startKb = (await memoryOf(server.pid!))!.rssKb;
  const ingestMemory = sampleMemory(server.pid!, 250);
  const waits = await sampleWaits(server);
  const loadBefore = os.loadavg()[0];
  const serverCpu = await cpuMsOf(server.pid);
  const clientCpu = process.cpuUsage();
  const started = Date.now();
  let next = 0;
  let recorded = 0;
  let lastLog = started;
  const sender = async () => {
    for (;;) {
      const from = next;
      if (from >= EVENTS) return;
      next = Math.min(EVENTS, from + BATCH);
      const result = await admin(server, 'POST', '/activity-events', body(from, next));
      recorded += result.recorded;
      if (Date.now() - lastLog > 15_000) {
        lastLog = Date.now();
        log(`${next} events sent, ${Math.round(next / ((Date.now() - started) / 1000))} events/s`);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, sender));
  const ingestMs = Date.now() - started;
  const waitRows = await waits.stop();
  const ingestPeakKb = ingestMemory.stop().peakKb;
  const serverAfter = await cpuMsOf(server.pid);
  const ingestedKb = (await memoryOf(server.pid!))!.rssKb;
  const heap = await heapOf(server);
  const client = process.cpuUsage(clientCpu);
  if (recorded !== EVENTS) throw new Error(`recorded ${recorded} of ${EVENTS} events`);
  const ingestRate = EVENTS / (ingestMs / 1000);
  log(`ingested ${EVENTS} events in ${(ingestMs / 1000).toFixed(1)} s: ${Math.round(ingestRate)} events/s`);

  // ---- The baseline: COPY of the same rows ----
  await db.query(
    'create table bench_copy (like activity_events including defaults including identity including indexes)',
  );
  const ids = (
    await db.query<{ export_key: string; profile_id: string }>(
      `select export_key, profile_id::text from profiles where account_id = $1::bigint and export_key like 'bench-%'`,
      [account],
    )
  ).rows;
  const profileIds: string[] = [];
  for (const r of ids) profileIds[Number(r.export_key.slice(6))] = r.profile_id;
  const sectionId = (
    await db.query('select section_id::text from sections where account_id = $1::bigint and discriminator = $2', [
      account,
      SHOP,
    ])
  ).rows[0].section_id as string;
  function* rows() {
    for (let from = 0; from < EVENTS; from += 10_000) {
      const lines: string[] = [];
      for (let n = from; n < Math.min(EVENTS, from + 10_000); n++) {
        const e = eventOf(n);
        const time = new Date(Date.UTC(2026, 0, 1) + n).toISOString();
        const opened = e.type === 'OPENED' || e.type === 'CLICKED';
        const clicked = e.type === 'CLICKED';
        lines.push(
          [
            account,
            `bench-${e.activity}`,
            e.type,
            `e${n}`,
            sectionId,
            profileIds[e.profile],
            time,
            time,
            time,
            '\\N',
            '\\N',
            opened ? 'MOBILE' : '\\N',
            opened ? 'NO' : '\\N',
            clicked ? 'l1' : '\\N',
            clicked ? 'https://shop.example/sale' : '\\N',
            clicked ? 'Sale' : '\\N',
            e.type === 'BOUNCED' ? '2001' : '\\N',
            '\\N',
          ].join('\t'),
        );
      }
      yield `${lines.join('\n')}\n`;
    }
  }
  const copyStarted = Date.now();
  await pipeline(
    Readable.from(rows()),
    db.query(
      copyFrom(`copy bench_copy (account_id, activity_id, type, correlation_id, section_id, profile_id, event_time, source_time, server_time,
    split_id, variation, device, location, link_id, link_url, link_title, bounce_code, unsubscribe_topic) from stdin`),
    ),
  );
  const copyMs = Date.now() - copyStarted;
  const copyRate = EVENTS / (copyMs / 1000);
  await db.query('drop table bench_copy');
  log(`COPY of the same rows: ${(copyMs / 1000).toFixed(1)} s, ${Math.round(copyRate)} rows/s`);

  // The physical work of ingestion: COPY of every row the endpoint writes (the event rows above,
  // the recipient rows, the profile events), into tables shaped and indexed like its own.
  await db.query(
    'create table bench_copy (like activity_events including defaults including identity including indexes)',
  );
  await db.query('create table bench_copy_recipients (like activity_recipients including indexes)');
  await db.query(
    'create table bench_copy_profile_events (like profile_events including defaults including identity including indexes)',
  );
  const versionId = (
    await db.query(`select version_id::text from profile_events where account_id = $1::bigint limit 1`, [account])
  ).rows[0].version_id as string;
  function* recipientRows() {
    const seen = new Set<number>();
    for (let from = 0; from < EVENTS; from += 10_000) {
      const lines: string[] = [];
      for (let n = from; n < Math.min(EVENTS, from + 10_000); n++) {
        const e = eventOf(n);
        const id = (e.activity * 8 + TYPE_NAMES.indexOf(e.type)) * PROFILES + e.profile;
        if (seen.has(id)) continue;
        seen.add(id);
        lines.push(`${account}\tbench-${e.activity}\t${e.type}\t${profileIds[e.profile]}`);
      }
      yield `${lines.join('\n')}\n`;
    }
  }
  function* profileEventRows() {
    for (let from = 0; from < EVENTS; from += 10_000) {
      const lines: string[] = [];
      for (let n = from; n < Math.min(EVENTS, from + 10_000); n++) {
        const e = eventOf(n);
        const time = new Date(Date.UTC(2026, 0, 1) + n).toISOString();
        const data = {
          activityId: `bench-${e.activity}`,
          type: e.type,
          ...(e.type === 'OPENED' || e.type === 'CLICKED' ? { device: 'MOBILE', location: 'NO' } : {}),
          ...(e.type === 'CLICKED' ? { linkId: 'l1', linkUrl: 'https://shop.example/sale', linkTitle: 'Sale' } : {}),
          ...(e.type === 'BOUNCED' ? { bounceCode: 2001 } : {}),
        };
        lines.push(
          [
            account,
            profileIds[e.profile],
            sectionId,
            versionId,
            time,
            time,
            `e${n}`,
            JSON.stringify(data).replaceAll('\\', '\\\\'),
          ].join('\t'),
        );
      }
      yield `${lines.join('\n')}\n`;
    }
  }
  const copyEvents = () =>
    pipeline(
      Readable.from(rows()),
      db.query(
        copyFrom(`copy bench_copy (account_id, activity_id, type, correlation_id, section_id, profile_id, event_time, source_time, server_time,
    split_id, variation, device, location, link_id, link_url, link_title, bounce_code, unsubscribe_topic) from stdin`),
      ),
    );
  const copyRecipients = () =>
    pipeline(
      Readable.from(recipientRows()),
      db.query(copyFrom('copy bench_copy_recipients (account_id, activity_id, type, profile_id) from stdin')),
    );
  const copyProfileEvents = () =>
    pipeline(
      Readable.from(profileEventRows()),
      db.query(
        copyFrom(
          'copy bench_copy_profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data) from stdin',
        ),
      ),
    );
  const allStarted = Date.now();
  await copyEvents();
  await copyRecipients();
  await copyProfileEvents();
  const allMs = Date.now() - allStarted;
  const allRate = EVENTS / (allMs / 1000);
  await db.query('drop table bench_copy, bench_copy_recipients, bench_copy_profile_events');
  log(`COPY of every row the endpoint writes: ${(allMs / 1000).toFixed(1)} s, ${Math.round(allRate)} events/s`);

  // Storage that would write less per event, judged by COPY of its rows in this run before any code
  // is written for it (BENCH_ACTIVITY_ALTERNATIVES=1): (a) the unique counts read from an index of
  // the events by activity, type and profile instead of recipient rows; (b) the event stored once,
  // as an activity event with an index by profile for the profile events route and segments,
  // without its profile event.
  const alternatives: string[][] = [];
  if (process.env.BENCH_ACTIVITY_ALTERNATIVES === '1') {
    const timed = async (name: string, setup: string[], copies: (() => Promise<void>)[], tables: string) => {
      for (const statement of setup) await db.query(statement);
      const at = Date.now();
      for (const copy of copies) await copy();
      const ms = Date.now() - at;
      await db.query(`drop table ${tables}`);
      log(`COPY, ${name}: ${(ms / 1000).toFixed(1)} s, ${Math.round(EVENTS / (ms / 1000))} events/s`);
      alternatives.push([
        `COPY, ${name}`,
        Math.round(EVENTS / (ms / 1000)).toString(),
        (ms / 1000).toFixed(1),
        '',
        '',
        '',
      ]);
    };
    const like = (table: string, from: string) =>
      `create table ${table} (like ${from} including defaults including identity including indexes)`;
    await timed(
      '(a) no recipient rows: events with an index by activity, type and profile, profile events',
      [
        like('bench_copy', 'activity_events'),
        'create index on bench_copy (account_id, activity_id, type, profile_id)',
        like('bench_copy_profile_events', 'profile_events'),
      ],
      [copyEvents, copyProfileEvents],
      'bench_copy, bench_copy_profile_events',
    );
    await timed(
      '(b) each event once: events with an index by profile, recipients, no profile events',
      [
        like('bench_copy', 'activity_events'),
        'create index on bench_copy (account_id, profile_id, section_id, event_time desc)',
        like('bench_copy_recipients', 'activity_recipients'),
      ],
      [copyEvents, copyRecipients],
      'bench_copy, bench_copy_recipients',
    );
  }

  // ---- Statistics of the activity with a fifth of the events ----
  const first = (
    await db.query(
      `select events::int from activity_counters where account_id = $1::bigint and activity_id = 'bench-0' order by events desc`,
      [account],
    )
  ).rows;
  const firstEvents = first.reduce((sum: number, r: { events: number }) => sum + r.events, 0);
  await db.query('vacuum analyze');
  const stats = await measure(autocannon, 'statistics', 1, server, {
    method: 'GET',
    path: `/emails/sections/${SHOP}/activities/bench-0?include_statistics=true`,
    headers: { authorization: `Bearer ${server.token}` },
  });
  if (stats.non2xx > 0 || stats.errors > 0)
    throw new Error(`statistics: ${stats.non2xx} non-2xx answers, ${stats.errors} errors`);
  // One request at a time: how long one answer takes, without the queueing of many connections.
  const times: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const t = performance.now();
    const res = await fetch(`${server.url}/emails/sections/${SHOP}/activities/bench-0?include_statistics=true`, {
      headers: { authorization: `Bearer ${server.token}` },
    });
    await res.text();
    if (res.status !== 200) throw new Error(`statistics: ${res.status}`);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const [p50, p99] = [times[Math.floor(times.length * 0.5)], times[Math.floor(times.length * 0.99)]];

  // ---- The email event export of the first EXPORT_ROWS events (event n has the source time 2026-01-01 + n ms) ----
  // In a freshly started server on the same data (what an export costs a process, not what the
  // ingestion before it left in this one).
  await db.end();
  server = await restartProgram(server);
  db = await connect();
  const window = {
    start_at: new Date(Date.UTC(2026, 0, 1)).toISOString(),
    end_at: new Date(Date.UTC(2026, 0, 1) + EXPORT_ROWS).toISOString(),
  };
  const api = async (method: string, path: string, payload?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 500)}`);
    return JSON.parse(text);
  };
  const idleKb = (await memoryOf(server.pid!))!.rssKb;
  const sampler = sampleMemory(server.pid!, 100);
  sampler.phase('written');
  const exportCpu = (await cpuMsOf(server.pid))!;
  const exportStarted = Date.now();
  const reportId = (await api('POST', '/emails/reports', window)).report_id as string;
  let status: { result: { status: string; message: string | null; file_download_url: string | null } };
  do {
    await sleep(200);
    status = await api('GET', `/emails/reports/${reportId}`);
  } while (status.result.status === 'requested');
  if (status.result.status !== 'completed') throw new Error(`email event export: ${JSON.stringify(status)}`);
  const writtenMs = Date.now() - exportStarted;
  sampler.phase('downloaded');
  const file = await fetch(status.result.file_download_url!);
  if (file.status !== 200) throw new Error(`email event export download: ${file.status}`);
  const gzipped = Buffer.from(await file.arrayBuffer());
  const exportMs = Date.now() - exportStarted;
  const exportCpuAfter = (await cpuMsOf(server.pid))!;
  const memory = sampler.stop();
  // Header and rows: CRLF line ends, and no field of these rows holds a line break.
  const lines = zlib
    .gunzipSync(gzipped)
    .toString()
    .split('\r\n')
    .filter((l) => l !== '').length;
  if (lines !== EXPORT_ROWS + 1) throw new Error(`email event export: ${lines - 1} rows, ${EXPORT_ROWS} expected`);
  const firstRow = zlib
    .gunzipSync(gzipped.subarray(0, Math.min(gzipped.length, 65536)), { finishFlush: zlib.constants.Z_SYNC_FLUSH })
    .toString()
    .split('\r\n')[1]
    .split(',');
  if (!/^p\d+@bench\.example\.com$/.test(firstRow[6]))
    throw new Error(`email event export: the first row's address is "${firstRow[6]}"`);
  log(
    `email event export: ${EXPORT_ROWS} rows written in ${(writtenMs / 1000).toFixed(1)} s, downloaded by ${(exportMs / 1000).toFixed(1)} s, ${(gzipped.length / 1e6).toFixed(1)} MB; peak VmRSS ${(memory.peakKb / 1024).toFixed(0)} MB`,
  );
  // Baseline: the same rows as CSV straight from PostgreSQL, gzip-compressed here.
  const copyOutStarted = Date.now();
  let copyOutBytes = 0;
  const counted = zlib.createGzip();
  counted.on('data', (c: Buffer) => {
    copyOutBytes += c.length;
  });
  await pipeline(
    db.query(
      copyTo(`copy (select * from activity_events where account_id = ${Number(account)} and section_id = ${Number(sectionId)}
    and event_time >= '${window.start_at}' and event_time < '${window.end_at}' order by event_time, event_id) to stdout with (format csv, header)`),
    ),
    counted,
  );
  const copyOutMs = Date.now() - copyOutStarted;
  log(
    `COPY … TO STDOUT of the same rows, gzip-compressed: ${(copyOutMs / 1000).toFixed(1)} s, ${(copyOutBytes / 1e6).toFixed(1)} MB`,
  );

  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown'}; load average ${loadBefore.toFixed(2)} before the ingestion, after the run ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `${EVENTS} events, ${PROFILES} profiles, ${ACTIVITIES} activities; ${BATCH} events a request, ${CONCURRENCY} concurrent senders\n`,
  );
  console.log(
    table([
      ['ingestion', 'events/s', 'seconds', 'server CPU', 'PostgreSQL CPU', 'load generator CPU'],
      [
        'POST …/activity-events',
        Math.round(ingestRate).toString(),
        (ingestMs / 1000).toFixed(1),
        serverCpu && serverAfter
          ? `${cpuShare(serverAfter.own - serverCpu.own, ingestMs)}, ${perEvent(serverAfter.own - serverCpu.own)}`
          : 'n/a',
        serverCpu && serverAfter
          ? `${cpuShare(serverAfter.descendants - serverCpu.descendants, ingestMs)}, ${perEvent(serverAfter.descendants - serverCpu.descendants)}`
          : 'n/a',
        cpuShare((client.user + client.system) / 1000, ingestMs),
      ],
      ['COPY of the same rows (baseline)', Math.round(copyRate).toString(), (copyMs / 1000).toFixed(1), '', '', ''],
      ['ratio endpoint / COPY', (ingestRate / copyRate).toFixed(2), '', '', '', ''],
      [
        'COPY of every row the endpoint writes: events, recipients, profile events',
        Math.round(allRate).toString(),
        (allMs / 1000).toFixed(1),
        '',
        '',
        '',
      ],
      ['ratio endpoint / COPY of every row', (ingestRate / allRate).toFixed(2), '', '', '', ''],
      ...alternatives,
    ]),
  );
  console.log();
  console.log(
    table([
      ['server connections during ingestion (state or wait event | statement)', 'connections, on average'],
      ...waitRows,
    ]),
  );
  console.log();
  console.log(
    table([
      ['statistics of one activity', 'events counted', 'requests/s', 'p50 ms', 'p99 ms'],
      [
        `GET …/activities/{id}?include_statistics=true, ${stats.total} requests on ${process.env.BENCH_CONNECTIONS ?? 50} connections`,
        String(firstEvents),
        stats.rps.toFixed(0),
        stats.p50.toFixed(1),
        stats.p99.toFixed(1),
      ],
      ['the same, 2000 requests one at a time', String(firstEvents), '', p50.toFixed(1), p99.toFixed(1)],
    ]),
  );
  console.log();
  const mb = (kb: number | undefined) => (kb === undefined ? 'n/a' : (kb / 1024).toFixed(0));
  console.log(
    table([
      ['email event export', 'rows', 'seconds', 'server CPU s', 'peak VmRSS MB', 'file MB'],
      [
        'POST /emails/reports → completed (worker writes the gzip CSV)',
        String(EXPORT_ROWS),
        (writtenMs / 1000).toFixed(1),
        '',
        mb(memory.peaks.get('written')),
        '',
      ],
      [
        '… and downloaded (GET file_download_url)',
        String(EXPORT_ROWS),
        (exportMs / 1000).toFixed(1),
        ((exportCpuAfter.own - exportCpu.own) / 1000).toFixed(1),
        mb(memory.peaks.get('downloaded')),
        (gzipped.length / 1e6).toFixed(1),
      ],
      [
        'COPY … TO STDOUT (CSV) of the same rows, gzip here (baseline)',
        String(EXPORT_ROWS),
        (copyOutMs / 1000).toFixed(1),
        '',
        '',
        (copyOutBytes / 1e6).toFixed(1),
      ],
      ['ratio export / COPY', '', (exportMs / copyOutMs).toFixed(2), '', '', ''],
    ]),
  );
  console.log(
    `server VmRSS: ${mb(startKb)} MB before the ingestion, ${mb(ingestPeakKb)} MB at most during it, ${mb(ingestedKb)} MB after it ` +
      `(V8 heaps ${heap.total.toFixed(0)} MB, ${heap.used.toFixed(0)} MB of it used, young generation ${heap.young.toFixed(0)} MB; external ${heap.external.toFixed(0)} MB); ` +
      `restarted on the same data, ${mb(idleKb)} MB before the export`,
  );
});

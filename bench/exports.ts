/**
 * `npm run bench:exports`: the time and memory of large exports through the real server, for
 * docs/benchmarks.md "Exports" and docs/exports.md "Memory": a profile in segment by consent export
 * (SPEC §4.7: 2 segments and a filter, 5 attributes, 2 tags, consents on 2 topics) against a plain
 * PostgreSQL COPY of the same columns in the same run, and its count; a profile in segment export
 * (its CSV, then downloaded as CSV, as Excel by a fast and by a slow client, and as JSON); an event
 * export of every profile with their events.
 *
 * 1. Starts the real server (`node src/main.js serve`, API and worker, embedded PostgreSQL) with
 *    bench/harness.ts, with the demo account's request and export limits lifted.
 * 2. Loads BENCH_EXPORT_PROFILES profiles into the demo account straight into the embedded
 *    database (INSERT … SELECT over generate_series): each with an export key, a Shop row with
 *    email, birthday, loyalty points, the newsletter flag and a city, the VIP tag on one in three
 *    and the Newsletter tag on one in five, email consents on Weekly news (opt-in for one in two,
 *    opt-out for one in six) and Email offers (opt-in for one in three), one address in a hundred
 *    suppressed, and BENCH_EXPORT_EVENTS page views in the last day for two in three; then ANALYZE.
 * 3. Through the HTTP API, one phase at a time, VmRSS of the server process sampled from
 *    /proc/<pid>/status every 100 ms and its CPU time (and its PostgreSQL's) from /proc/<pid>/stat.
 *    The phases of BENCH_EXPORT_PHASES (a comma-separated list of groups; all by default):
 *    consents: (a) POST /audience/profiles/reports/consents with the demo's two segments (Loyal
 *        customers, Recent visitors) and the filter "loyal | recent", the five attributes, the two
 *        tags, the email channel on both topics, polled until ready; (b) the same columns of the same
 *        profiles by one plain `COPY (SELECT …) TO STDOUT (FORMAT csv, HEADER)` read by a client
 *        (the baseline); (c) the file as Excel, read as fast as it comes; (d) the count of the same
 *        request (POST …/consents/count).
 *    segments: (e) POST /audience/profiles/reports/segments of every profile with four attributes
 *        and a tag, polled until ready; (e') the same rows and columns by one plain `COPY` (the
 *        baseline); (f) the CSV (as stored: Accept-Encoding gzip); (g) the Excel
 *        form read as fast as it comes; (h) the same read at BENCH_EXPORT_SLOW_BPS bytes per
 *        second; (i) the JSON form.
 *    events: (j) POST /audience/profiles/exports of every profile with email and points and the
 *        events of the last two days, polled until ready; (k) its file (gzip).
 *
 * Everything is bounded in time and cleaned up on failure too. Settings from the environment:
 * BENCH_EXPORT_PROFILES (1000000), BENCH_EXPORT_EVENTS (3), BENCH_EXPORT_SLOW_BPS (1000000),
 * BENCH_EXPORT_PHASES (consents,segments,events), BENCH_EXPORT_SEGMENT_DOWNLOADS (1; 0 leaves out the
 * segment export's downloads, for sizes where Excel and a slow client take too long), BENCH_SERVER_ARGS.
 */
import http from 'node:http';
import os from 'node:os';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import {
  cpuMsOf,
  embeddedDatabaseUrl,
  log,
  memoryOf,
  onCleanup,
  runBench,
  sampleMemory,
  sleep,
  startAudience,
  summariseEvents,
  table,
  within,
  type Audience,
} from './harness.ts';
import { setTimes } from '../src/profiles/queries.ts';

const PROFILES = Math.max(100, Number(process.env.BENCH_EXPORT_PROFILES ?? 1_000_000));
const EVENTS = Math.max(0, Number(process.env.BENCH_EXPORT_EVENTS ?? 3));
const SLOW_BPS = Math.max(100_000, Number(process.env.BENCH_EXPORT_SLOW_BPS ?? 1_000_000));
/** Whether the segment export's file is also downloaded, as CSV, Excel (fast and slow) and JSON (1) or not (0). */
const SEGMENT_DOWNLOADS = (process.env.BENCH_EXPORT_SEGMENT_DOWNLOADS ?? '1') !== '0';
const PHASES = new Set((process.env.BENCH_EXPORT_PHASES ?? 'consents,segments,events').split(',').map((p) => p.trim()));
const SAMPLE_MS = 100;
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
const SHOP = 'com.vendor1.sections.user-created.shop';
const PAGE_VIEW = 'com.vendor1.events.page-view';
const CH_EMAIL = 'com.vendor1.channels.email';
const WEEKLY = 'com.vendor1.topics.user-created.weekly-news';
const OFFERS = 'com.vendor1.topics.user-created.email-offers';
/** The whole run: start-up, load, the phases (each well under its own bound), clean-up. */
const DEADLINE_MS = 900_000 + PROFILES * 1.5;

interface Download {
  status: number;
  bytes: number;
  type: string | undefined;
}

/** GETs `path`, reading the body as fast as it comes or at `bps` bytes per second; counts its bytes. */
function download(server: Audience, path: string, headers: Record<string, string>, bps?: number): Promise<Download> {
  return new Promise((resolve, reject) => {
    http
      .get(server.url + path, { headers: { authorization: `Bearer ${server.token}`, ...headers } }, (res) => {
        let bytes = 0;
        const started = Date.now();
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bps === undefined) return;
          // Read no faster than bps: pause until the bytes so far are due.
          const ahead = (bytes / bps) * 1000 - (Date.now() - started);
          if (ahead > 0) {
            res.pause();
            setTimeout(() => res.resume(), ahead);
          }
        });
        res.on('end', () => resolve({ status: res.statusCode!, bytes, type: res.headers['content-type'] }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

async function api(server: Audience, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Polls an export's v2 form every 250 ms until it is ready. */
async function whenReady(server: Audience, pollUrl: string): Promise<void> {
  const path = `/v2${new URL(pollUrl).pathname}`;
  for (;;) {
    const res = await fetch(server.url + path, { headers: { authorization: `Bearer ${server.token}` } });
    await res.arrayBuffer();
    if (res.status === 200) return;
    if (res.status !== 202) throw new Error(`poll ${path}: ${res.status}`);
    await sleep(250);
  }
}

/** The ids of the demo account's definitions the load and the statements use. */
interface Ids {
  section: string;
  email: string;
  birthday: string;
  points: string;
  newsletter: string;
  city: string;
  vip: string;
  newsletterTag: string;
  pageView: string;
  channel: string;
  weekly: string;
  offers: string;
}

/** Loads the profiles, their Shop rows, consents, suppressions and events straight into the database. */
async function load(server: Audience, ids: Ids): Promise<void> {
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await db.connect();
  onCleanup(() => db.end());
  const account = server.accountId;
  const started = Date.now();
  await db.query(
    `insert into profiles (account_id, export_key, created_at) select $1::bigint, 'bench-' || n, now() from generate_series(1, $2::int) n`,
    [account, PROFILES],
  );
  await db.query(
    `insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
     select p.account_id, p.profile_id, $2::bigint, a, t, ${setTimes('null::jsonb', 'null::jsonb', 'a', 'now()')} from profiles p cross join lateral (select
       jsonb_build_object($3::text, 'p' || p.profile_id || '@bench.example.com', $4::text, '1990-01-' || lpad((1 + p.profile_id % 28)::text, 2, '0'), $5::text, p.profile_id % 2000, $6::text, p.profile_id % 2 = 0,
         $7::text, (array['Oslo', 'Bergen', 'Trondheim', 'Stavanger', 'Tromsø'])[1 + p.profile_id % 5]) as a,
       (case when p.profile_id % 3 = 0 then jsonb_build_object($8::text, true) else '{}'::jsonb end) || (case when p.profile_id % 5 = 0 then jsonb_build_object($9::text, true) else '{}'::jsonb end) as t) x
     where p.account_id = $1::bigint and p.export_key like 'bench-%'`,
    [account, ids.section, ids.email, ids.birthday, ids.points, ids.newsletter, ids.city, ids.vip, ids.newsletterTag],
  );
  // Weekly news: opt-in for one in two, opt-out for one in six of the others; Email offers: opt-in for one in three.
  await db.query(
    `insert into consents (account_id, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at)
     select p.account_id, p.profile_id, t.topic_id, $3::bigint, $2::bigint, t.type, 'bench', 'bench', 'p' || p.profile_id || '@bench.example.com', now()
     from profiles p cross join lateral (values
       ($4::bigint, case when p.profile_id % 2 = 0 then 'opt-in' when p.profile_id % 6 = 1 then 'opt-out' end),
       ($5::bigint, case when p.profile_id % 3 = 0 then 'opt-in' end)) t(topic_id, type)
     where p.account_id = $1::bigint and p.export_key like 'bench-%' and t.type is not null`,
    [account, ids.section, ids.channel, ids.weekly, ids.offers],
  );
  await db.query(
    `insert into suppressions (account_id, channel_id, address, reason)
     select p.account_id, $2::bigint, 'p' || p.profile_id || '@bench.example.com', 'Hard bounce'
     from profiles p where p.account_id = $1::bigint and p.export_key like 'bench-%' and p.profile_id % 100 = 7`,
    [account, ids.channel],
  );
  await db.query(
    `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select p.account_id, p.profile_id, $2::bigint, $3::bigint, now() - k * interval '1 hour', now(), gen_random_uuid()::text,
       jsonb_build_object('activityId', 'a' || k, 'device', 'mobile', 'id', p.profile_id::text, 'location', 'NO', 'title', 'Page ' || k, 'url', '/page/' || k)
     from profiles p cross join generate_series(1, $4::int) k where p.account_id = $1::bigint and p.export_key like 'bench-%' and p.profile_id % 3 <> 0`,
    [account, ids.section, ids.pageView, EVENTS],
  );
  await summariseEvents(db, account);
  await db.query('analyze');
  log(
    `loaded ${PROFILES} profiles and ${Math.round((PROFILES * 2) / 3) * EVENTS} events in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}

/** Ids and names as SQL literals, for COPY, which takes no parameters. */
const n = (id: string) => String(BigInt(id));
const t = (text: string) => `'${text.replace(/'/g, "''")}'`;

/**
 * The baseline of the consent export: the same columns of the same profiles, written as plainly as
 * PostgreSQL allows (no merge clusters, the segments' and maySend's conditions inlined).
 */
function consentBaselineSql(server: Audience, ids: Ids): string {
  return `
      select p.export_key as "exportKey",
        ps.attributes ->> ${t(ids.email)} as email, ps.attributes ->> ${t(ids.birthday)} as birthday, ps.attributes ->> ${t(ids.points)} as points,
        ps.attributes ->> ${t(ids.newsletter)} as newsletter, ps.attributes ->> ${t(ids.city)} as city,
        case when ps.tags -> ${t(ids.vip)} = 'true' then '1' else '0' end as vip, case when ps.tags -> ${t(ids.newsletterTag)} = 'true' then '1' else '0' end as newsletter_tag,
        case when s.loyal then '1' else '0' end as loyal, case when s.recent then '1' else '0' end as recent,
        case when exists (select 1 from consents c where c.account_id = p.account_id and c.profile_id = p.profile_id and c.section_id = ${n(ids.section)}
                   and c.channel_id = ${n(ids.channel)} and c.topic_id in (${n(ids.weekly)}, ${n(ids.offers)}) and c.type in ('opt-in', 'confirmed-opt-in'))
              and not exists (select 1 from suppressions x where x.account_id = p.account_id and x.channel_id = ${n(ids.channel)} and x.address = lower(ps.attributes ->> ${t(ids.email)}))
          then ps.attributes ->> ${t(ids.email)} end as "Email"
      from profiles p
      join profile_sections ps on ps.account_id = p.account_id and ps.profile_id = p.profile_id and ps.section_id = ${n(ids.section)}
      cross join lateral (select (ps.attributes -> ${t(ids.points)})::numeric > 100 as loyal,
        exists (select 1 from profile_events e where e.account_id = p.account_id and e.profile_id = p.profile_id and e.section_id = ${n(ids.section)}
          and e.version_id = ${n(ids.pageView)} and e.event_time >= date_trunc('day', now()) - interval '7 days') as recent) s
      where p.account_id = ${n(server.accountId)} and p.canonical_id is null and (s.loyal or s.recent)
      order by p.profile_id`;
}

/**
 * The baseline of the segment export (points >= 0, four attributes and the VIP tag): the same
 * columns of the same profiles, with the segment's condition inlined and no merge clusters.
 */
function segmentBaselineSql(server: Audience, ids: Ids): string {
  return `
      select p.export_key as "exportKey",
        ps.attributes ->> ${t(ids.email)} as email, ps.attributes ->> ${t(ids.birthday)} as birthday, ps.attributes ->> ${t(ids.points)} as points,
        ps.attributes ->> ${t(ids.newsletter)} as newsletter,
        case when ps.tags -> ${t(ids.vip)} = 'true' then '1' else '0' end as tag
      from profiles p
      join profile_sections ps on ps.account_id = p.account_id and ps.profile_id = p.profile_id and ps.section_id = ${n(ids.section)}
      where p.account_id = ${n(server.accountId)} and p.canonical_id is null and (ps.attributes -> ${t(ids.points)})::numeric >= 0
      order by p.profile_id`;
}

/**
 * Runs `COPY (select) TO STDOUT (FORMAT csv, HEADER)` through a client that counts the bytes, as
 * plainly as PostgreSQL allows a file of those rows to be written. Answers rows and bytes, and the
 * CPU time of its backend.
 */
async function copyBaseline(
  server: Audience,
  select: string,
): Promise<{ rows: number; bytes: number; backendCpuS: number }> {
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await db.connect();
  try {
    // Its backend ends with the connection, before the phase's CPU time is read: read here.
    const backend = (await db.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
    const cpuBefore = (await cpuMsOf(backend))?.own ?? 0;
    let bytes = 0;
    let rows = 0;
    await pipeline(
      db.query(copyTo(`copy (${select}) to stdout (format csv, header)`)),
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          bytes += chunk.length;
          for (const byte of chunk) if (byte === 10) rows++;
          done();
        },
      }),
    );
    return { rows: rows - 1, bytes, backendCpuS: (((await cpuMsOf(backend))?.own ?? 0) - cpuBefore) / 1000 };
  } finally {
    await db.end();
  }
}

await runBench(DEADLINE_MS, async () => {
  const loadBefore = os.loadavg();
  const benchCpuBefore = process.cpuUsage();
  const server = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'profile_export_requests_per_second',
    'event_export_requests_per_minute',
    'export_downloads_per_minute',
    'pending_exports',
  ]);
  const pid = server.pid!;
  const attributes = (await api(server, 'GET', `/audience/sections/${SHOP}/attributes`)).items as {
    discriminator: string;
    versions: { id: string }[];
  }[];
  const version = (suffix: string) => attributes.find((a) => a.discriminator.endsWith(suffix))!.versions.at(-1)!.id;
  const sections = (await api(server, 'GET', '/audience/sections')).items as { discriminator: string; id: string }[];
  const tags = (await api(server, 'GET', `/audience/sections/${SHOP}/tags`)).items as {
    discriminator: string;
    name: string;
  }[];
  const tag = (name: string) => tags.find((x) => x.name === name)!.discriminator;
  const events = (await api(server, 'GET', `/audience/sections/${SHOP}/events`)).items as {
    discriminator: string;
    versions: { id: string }[];
  }[];
  const segments = (await api(server, 'GET', '/audience/segments')).items as { discriminator: string; name: string }[];
  const segment = (name: string) => segments.find((x) => x.name === name)!.discriminator;
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await db.connect();
  const idOf = async (table: string, column: string, discriminator: string) =>
    (
      await db.query(
        `select ${column}::text as id from ${table} where account_id = $1::bigint and discriminator = $2`,
        [server.accountId, discriminator],
      )
    ).rows[0].id as string;
  const ids: Ids = {
    section: sections.find((x) => x.discriminator === SHOP)!.id,
    email: version('.attributes.email'),
    birthday: version('birthday'),
    points: version('loyalty-points'),
    newsletter: version('newsletter-reader'),
    city: version('city'),
    vip: await idOf('tags', 'tag_id', tag('VIP')),
    newsletterTag: await idOf('tags', 'tag_id', tag('Newsletter')),
    pageView: events.find((e) => e.discriminator === PAGE_VIEW)!.versions[0].id,
    channel: await idOf('channels', 'channel_id', CH_EMAIL),
    weekly: await idOf('topics', 'topic_id', WEEKLY),
    offers: await idOf('topics', 'topic_id', OFFERS),
  };
  await db.end();
  await within(DEADLINE_MS / 2, 'loading', load(server, ids));

  const rows: string[][] = [];
  const idle = (await memoryOf(pid))!.rssKb;
  /** Runs a phase, sampling the server's memory and CPU time (its own, and its PostgreSQL's). */
  const phase = async <T>(
    name: string,
    work: () => Promise<T>,
    describe: (result: T) => string,
  ): Promise<{ result: T; seconds: number }> => {
    const sampler = sampleMemory(pid, SAMPLE_MS);
    const cpuBefore = (await cpuMsOf(pid))!;
    const started = Date.now();
    const result = await within(600_000, name, work());
    const seconds = (Date.now() - started) / 1000;
    const cpuAfter = (await cpuMsOf(pid))!;
    // A phase shorter than a sample still gets one.
    const peakKb = Math.max(sampler.stop().peakKb, (await memoryOf(pid))!.rssKb);
    // Of the backends alive at both ends of the phase (those of the server's pools); one that ended in between takes its time with it.
    const pgCpu = (cpuAfter.descendants - cpuBefore.descendants) / 1000;
    rows.push([
      name,
      seconds.toFixed(1),
      ((cpuAfter.own - cpuBefore.own) / 1000).toFixed(1),
      pgCpu < 0 ? 'n/a' : pgCpu.toFixed(1),
      (peakKb / 1024).toFixed(0),
      describe(result),
    ]);
    log(`${name}: ${seconds.toFixed(1)} s, ${describe(result)}`);
    return { result, seconds };
  };
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  const check = (d: Download, type: string) => {
    if (d.status !== 200 || !d.type?.startsWith(type)) throw new Error(`download: ${d.status} ${d.type}`);
    return mb(d.bytes);
  };
  const summary: string[] = [];

  if (PHASES.has('consents')) {
    const attributeColumns = [
      ['email', ids.email],
      ['birthday', ids.birthday],
      ['points', ids.points],
      ['newsletter', ids.newsletter],
      ['city', ids.city],
    ];
    const request = {
      section_discriminator: SHOP,
      topic_discriminators: [WEEKLY, OFFERS],
      channel_discriminator: CH_EMAIL,
      segments: {
        timezone: 'UTC',
        segment_discriminators: { loyal: segment('Loyal customers'), recent: segment('Recent visitors') },
        filter: 'loyal | recent',
      },
    };
    const written = await phase(
      'consent export: CSV written (worker)',
      async () => {
        const created = await api(server, 'POST', '/audience/profiles/reports/consents', {
          ...request,
          attributes: attributeColumns.map(([field_name, attribute_version_id]) => ({
            field_name,
            attribute_version_id,
          })),
          tags: [
            { field_name: 'vip', tag_discriminator: tag('VIP') },
            { field_name: 'newsletter_tag', tag_discriminator: tag('Newsletter') },
          ],
        });
        await whenReady(server, created.poll_url);
        return new URL(created.poll_url).pathname;
      },
      () => 'written',
    );
    const csv = await phase(
      'consent export: CSV download (gzip, as stored)',
      () => download(server, written.result, { 'accept-encoding': 'gzip' }),
      (d) => check(d, 'text/csv'),
    );
    const baseline = await phase(
      'baseline: COPY (SELECT …) TO STDOUT, same columns',
      () => copyBaseline(server, consentBaselineSql(server, ids)),
      (b) => `${b.rows} rows, ${mb(b.bytes)}; its backend ${b.backendCpuS.toFixed(1)} s CPU`,
    );
    const excel = await phase(
      'consent export: Excel download, fast client',
      () => download(server, written.result, { accept: XLSX }),
      (d) => check(d, XLSX),
    );
    const count = await phase(
      'count by consent (same request)',
      async () => {
        const created = await api(server, 'POST', '/audience/profiles/reports/consents/count', request);
        await whenReady(server, created.poll_url);
        return api(server, 'GET', new URL(created.poll_url).pathname) as Promise<{ total_profile_count: number }>;
      },
      (r) => `${r.total_profile_count} profiles`,
    );
    if (count.result.total_profile_count !== baseline.result.rows)
      throw new Error(
        `the count (${count.result.total_profile_count}) is not the baseline's rows (${baseline.result.rows})`,
      );
    summary.push(
      `consent export, ${baseline.result.rows} rows: CSV written ${written.seconds.toFixed(1)} s = ${(written.seconds / baseline.seconds).toFixed(2)} x the COPY baseline (${baseline.seconds.toFixed(1)} s);` +
        ` to a CSV in the client's hands ${(written.seconds + csv.seconds).toFixed(1)} s; to an Excel workbook in the client's hands ${(written.seconds + excel.seconds).toFixed(1)} s`,
    );
  }

  let segmentExport = '';
  if (PHASES.has('segments')) {
    const query = `section(${ids.section}).attribute(${ids.points}).gte(0)`;
    const written = await phase(
      'segment export: CSV written',
      async () => {
        const created = await api(server, 'POST', '/audience/profiles/reports/segments', {
          section_discriminator: SHOP,
          segment: { timezone: 'UTC', segment_definition: query },
          attributes: [
            ['email', ids.email],
            ['birthday', ids.birthday],
            ['points', ids.points],
            ['newsletter', ids.newsletter],
          ].map(([field_name, attribute_version_id]) => ({ field_name, attribute_version_id })),
          tags: [{ field_name: 'tag', tag_discriminator: tag('VIP') }],
        });
        await whenReady(server, created.file_download_url);
        return new URL(created.file_download_url).pathname;
      },
      () => `${PROFILES} rows`,
    );
    segmentExport = written.result;
    const baseline = await phase(
      'baseline: COPY (SELECT …) TO STDOUT, same rows and columns',
      () => copyBaseline(server, segmentBaselineSql(server, ids)),
      (b) => `${b.rows} rows, ${mb(b.bytes)}; its backend ${b.backendCpuS.toFixed(1)} s CPU`,
    );
    if (baseline.result.rows !== PROFILES)
      throw new Error(`the baseline has ${baseline.result.rows} rows, not the ${PROFILES} profiles`);
    summary.push(
      `segment export, ${PROFILES} rows: CSV written ${written.seconds.toFixed(1)} s = ${(written.seconds / baseline.seconds).toFixed(2)} x the COPY baseline (${baseline.seconds.toFixed(1)} s)`,
    );
  }
  if (PHASES.has('segments') && SEGMENT_DOWNLOADS) {
    await phase(
      'CSV download (gzip, as stored)',
      () => download(server, segmentExport, { 'accept-encoding': 'gzip' }),
      (d) => check(d, 'text/csv'),
    );
    await phase(
      'Excel download, fast client',
      () => download(server, segmentExport, { accept: XLSX }),
      (d) => check(d, XLSX),
    );
    await phase(
      `Excel download, client at ${mb(SLOW_BPS)}/s`,
      () => download(server, segmentExport, { accept: XLSX }, SLOW_BPS),
      (d) => check(d, XLSX),
    );
    await phase(
      'JSON download, fast client',
      () => download(server, segmentExport, { accept: 'application/json' }),
      (d) => check(d, 'application/json'),
    );
  }

  if (PHASES.has('events')) {
    const { result: eventExport } = await phase(
      'event export: JSON written',
      async () => {
        const created = await api(server, 'POST', '/audience/profiles/exports', {
          attributes: [
            { section_discriminator: SHOP, attribute_version_id: ids.email },
            { section_discriminator: SHOP, attribute_version_id: ids.points },
          ],
          events: {
            start_at: new Date(Date.now() - 2 * 86_400_000).toISOString(),
            types: [{ section_discriminator: SHOP, event_version_id: ids.pageView }],
          },
        });
        await whenReady(server, created.file_download_url);
        return new URL(created.file_download_url).pathname;
      },
      () => `${PROFILES} profiles, ${Math.round((PROFILES * 2) / 3) * EVENTS} events`,
    );
    await phase(
      'event export download (gzip, as stored)',
      () => download(server, eventExport, { 'accept-encoding': 'gzip' }),
      (d) => check(d, 'application/json'),
    );
  }

  const benchCpu = process.cpuUsage(benchCpuBefore);
  console.log(
    `\nserver process: idle VmRSS ${(idle / 1024).toFixed(0)} MB after the load; ${PROFILES} profiles, ${EVENTS} events each for two in three`,
  );
  console.log(
    `load average (1, 5, 15 min): before ${loadBefore.map((x) => x.toFixed(2)).join(', ')}; after ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(', ')}; this bench's own CPU ${((benchCpu.user + benchCpu.system) / 1e6).toFixed(1)} s`,
  );
  for (const line of summary) console.log(line);
  console.log('');
  console.log(table([['phase', 'seconds', 'server CPU s', 'PostgreSQL CPU s', 'peak VmRSS MB', 'size'], ...rows]));
});

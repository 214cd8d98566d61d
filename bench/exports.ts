/**
 * `npm run bench:exports`: the memory and time of large exports through the real server, for
 * docs/exports.md "Memory": a profile in segment export of every profile (its CSV written by the
 * worker, then downloaded as CSV, as Excel by a fast and by a slow client, and as JSON), and an
 * event export of every profile with their events.
 *
 * 1. Starts the real server (`node src/main.ts serve`, API and worker, embedded PostgreSQL) with
 *    bench/harness.ts, with the demo account's request and export limits lifted.
 * 2. Loads BENCH_EXPORT_PROFILES profiles into the demo account straight into the embedded
 *    database (INSERT … SELECT over generate_series): each with an export key, a Shop row with
 *    email, birthday, loyalty points and the newsletter flag, a tag on one in three, and
 *    BENCH_EXPORT_EVENTS page views in the last day; then ANALYZE.
 * 3. Through the HTTP API, one phase at a time, VmRSS of the server process sampled from
 *    /proc/<pid>/status every 100 ms and its CPU time from /proc/<pid>/stat:
 *    (a) POST /audience/profiles/reports/segments of every profile with the four attributes and the
 *        tag, polled until ready; (b) the CSV (as stored: Accept-Encoding gzip); (c) the Excel form
 *        read as fast as it comes; (d) the same read at BENCH_EXPORT_SLOW_BPS bytes per second;
 *        (e) the JSON form; (f) POST /audience/profiles/exports of every profile with email and
 *        points and the events of the last two days, polled until ready; (g) its file (gzip).
 *
 * Everything is bounded in time and cleaned up on failure too. Settings from the environment:
 * BENCH_EXPORT_PROFILES (1000000), BENCH_EXPORT_EVENTS (3), BENCH_EXPORT_SLOW_BPS (1000000),
 * BENCH_SERVER_ARGS.
 */
import http from 'node:http';
import pg from 'pg';
import { cpuMsOf, embeddedDatabaseUrl, log, memoryOf, onCleanup, runBench, sampleMemory, sleep, startAudience, table, within, type Audience } from './harness.ts';

const PROFILES = Math.max(100, Number(process.env.BENCH_EXPORT_PROFILES ?? 1_000_000));
const EVENTS = Math.max(0, Number(process.env.BENCH_EXPORT_EVENTS ?? 3));
const SLOW_BPS = Math.max(100_000, Number(process.env.BENCH_EXPORT_SLOW_BPS ?? 1_000_000));
const SAMPLE_MS = 100;
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
const SHOP = 'com.vendor1.sections.user-created.shop';
const PAGE_VIEW = 'com.vendor1.events.page-view';
/** The whole run: start-up, load, the phases (each well under its own bound), clean-up. */
const DEADLINE_MS = 900_000 + PROFILES * 1.5;

interface Download { status: number; bytes: number; type: string | undefined }

/** GETs `path`, reading the body as fast as it comes or at `bps` bytes per second; counts its bytes. */
function download(server: Audience, path: string, headers: Record<string, string>, bps?: number): Promise<Download> {
  return new Promise((resolve, reject) => {
    http.get(server.url + path, { headers: { authorization: `Bearer ${server.token}`, ...headers } }, (res) => {
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
    }).on('error', reject);
  });
}

async function api(server: Audience, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(server.url + path, { method, headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
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

/** Loads the profiles, their Shop rows and their events straight into the database. */
async function load(server: Audience, ids: { section: string; email: string; birthday: string; points: string; newsletter: string; tag: string; pageView: string }): Promise<void> {
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await db.connect();
  onCleanup(() => db.end());
  const account = server.accountId;
  const started = Date.now();
  await db.query(`insert into profiles (account_id, export_key, created_at) select $1::bigint, 'bench-' || n, now() from generate_series(1, $2::int) n`, [account, PROFILES]);
  await db.query(
    `insert into profile_sections (account_id, profile_id, section_id, attributes, tags)
     select p.account_id, p.profile_id, $2::bigint,
       jsonb_build_object($3::text, 'p' || p.profile_id || '@bench.example.com', $4::text, '1990-01-' || lpad((1 + p.profile_id % 28)::text, 2, '0'), $5::text, p.profile_id % 2000, $6::text, p.profile_id % 2 = 0),
       case when p.profile_id % 3 = 0 then jsonb_build_object($7::text, true) else '{}'::jsonb end
     from profiles p where p.account_id = $1::bigint and p.export_key like 'bench-%'`,
    [account, ids.section, ids.email, ids.birthday, ids.points, ids.newsletter, ids.tag],
  );
  await db.query(
    `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select p.account_id, p.profile_id, $2::bigint, $3::bigint, now() - k * interval '1 hour', now(), gen_random_uuid()::text,
       jsonb_build_object('activityId', 'a' || k, 'device', 'mobile', 'id', p.profile_id::text, 'location', 'NO', 'title', 'Page ' || k, 'url', '/page/' || k)
     from profiles p cross join generate_series(1, $4::int) k where p.account_id = $1::bigint and p.export_key like 'bench-%'`,
    [account, ids.section, ids.pageView, EVENTS],
  );
  await db.query('analyze');
  log(`loaded ${PROFILES} profiles and ${PROFILES * EVENTS} events in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

await runBench(DEADLINE_MS, async () => {
  const server = await startAudience(['requests_per_second', 'token_requests_per_minute', 'profile_export_requests_per_second', 'event_export_requests_per_minute', 'export_downloads_per_minute', 'pending_exports']);
  const pid = server.pid!;
  const attributes = (await api(server, 'GET', `/audience/sections/${SHOP}/attributes`)).items as { discriminator: string; versions: { id: string }[] }[];
  const version = (suffix: string) => attributes.find((a) => a.discriminator.endsWith(suffix))!.versions.at(-1)!.id;
  const sections = (await api(server, 'GET', '/audience/sections')).items as { discriminator: string; id: string }[];
  const tags = (await api(server, 'GET', `/audience/sections/${SHOP}/tags`)).items as { discriminator: string }[];
  const events = (await api(server, 'GET', `/audience/sections/${SHOP}/events`)).items as { discriminator: string; versions: { id: string }[] }[];
  const db = new pg.Client({ connectionString: await embeddedDatabaseUrl(server.dataDir) });
  await db.connect();
  const tagId = (await db.query('select tag_id::text from tags where account_id = $1::bigint and discriminator = $2', [server.accountId, tags[0].discriminator])).rows[0].tag_id as string;
  await db.end();
  const ids = {
    section: sections.find((s) => s.discriminator === SHOP)!.id, email: version('.attributes.email'), birthday: version('birthday'), points: version('loyalty-points'),
    newsletter: version('newsletter-reader'), tag: tagId, pageView: events.find((e) => e.discriminator === PAGE_VIEW)!.versions[0].id,
  };
  await within(DEADLINE_MS / 2, 'loading', load(server, ids));

  const rows: string[][] = [];
  const idle = (await memoryOf(pid))!.rssKb;
  /** Runs a phase, sampling the server's memory and CPU time. */
  const phase = async <T>(name: string, work: () => Promise<T>, describe: (result: T) => string): Promise<T> => {
    const sampler = sampleMemory(pid, SAMPLE_MS);
    const cpuBefore = (await cpuMsOf(pid))!.own;
    const started = Date.now();
    const result = await within(600_000, name, work());
    const seconds = (Date.now() - started) / 1000;
    const cpu = ((await cpuMsOf(pid))!.own - cpuBefore) / 1000;
    // A phase shorter than a sample still gets one.
    const peakKb = Math.max(sampler.stop().peakKb, (await memoryOf(pid))!.rssKb);
    rows.push([name, seconds.toFixed(1), cpu.toFixed(1), (peakKb / 1024).toFixed(0), describe(result)]);
    log(`${name}: ${seconds.toFixed(1)} s, ${describe(result)}`);
    return result;
  };
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  const segment = `section(${ids.section}).attribute(${ids.points}).gte(0)`;

  const segmentExport = await phase('segment export: CSV written', async () => {
    const created = await api(server, 'POST', '/audience/profiles/reports/segments', {
      section_discriminator: SHOP, segment: { timezone: 'UTC', segment_definition: segment },
      attributes: [['email', ids.email], ['birthday', ids.birthday], ['points', ids.points], ['newsletter', ids.newsletter]].map(([field_name, attribute_version_id]) => ({ field_name, attribute_version_id })),
      tags: [{ field_name: 'tag', tag_discriminator: tags[0].discriminator }],
    });
    await whenReady(server, created.file_download_url);
    return new URL(created.file_download_url).pathname;
  }, () => `${PROFILES} rows`);
  const check = (d: Download, type: string) => {
    if (d.status !== 200 || !d.type?.startsWith(type)) throw new Error(`download: ${d.status} ${d.type}`);
    return mb(d.bytes);
  };
  await phase('CSV download (gzip, as stored)', () => download(server, segmentExport, { 'accept-encoding': 'gzip' }), (d) => check(d, 'text/csv'));
  await phase('Excel download, fast client', () => download(server, segmentExport, { accept: XLSX }), (d) => check(d, XLSX));
  await phase(`Excel download, client at ${mb(SLOW_BPS)}/s`, () => download(server, segmentExport, { accept: XLSX }, SLOW_BPS), (d) => check(d, XLSX));
  await phase('JSON download, fast client', () => download(server, segmentExport, { accept: 'application/json' }), (d) => check(d, 'application/json'));
  const eventExport = await phase('event export: JSON written', async () => {
    const created = await api(server, 'POST', '/audience/profiles/exports', {
      attributes: [{ section_discriminator: SHOP, attribute_version_id: ids.email }, { section_discriminator: SHOP, attribute_version_id: ids.points }],
      events: { start_at: new Date(Date.now() - 2 * 86_400_000).toISOString(), types: [{ section_discriminator: SHOP, event_version_id: ids.pageView }] },
    });
    await whenReady(server, created.file_download_url);
    return new URL(created.file_download_url).pathname;
  }, () => `${PROFILES} profiles, ${PROFILES * EVENTS} events`);
  await phase('event export download (gzip, as stored)', () => download(server, eventExport, { 'accept-encoding': 'gzip' }), (d) => check(d, 'application/json'));

  console.log(`\nserver process: idle VmRSS ${(idle / 1024).toFixed(0)} MB after the load; ${PROFILES} profiles, ${EVENTS} events each\n`);
  console.log(table([['phase', 'seconds', 'server CPU s', 'peak VmRSS MB', 'size'], ...rows]));
});

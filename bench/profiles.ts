/**
 * `npm run bench:profiles`: the profile data plane with 100,000 existing profiles, in one run:
 *
 * 1. Bulk load: 100,000 profiles of the demo account straight into the server's embedded
 *    PostgreSQL, set-based (one INSERT … SELECT generate_series with data-modifying CTEs, in one
 *    transaction, foreign key triggers skipped), then VACUUM (ANALYZE): rows in profiles,
 *    profile_identifiers (email keyspace; export keys are in profiles) and profile_sections (the Shop section's
 *    email, first and last name, city, loyalty points, newsletter reader).
 * 2. Throughput: authenticated GET …/attributes and v2 PATCH …/attributes (first name) of random
 *    profiles through the email keyspace, against two references measured alternately in the same
 *    run with wrk (autocannon without wrk): a bare `node:http` server (GET: the same body; PATCH:
 *    204), and the floor (bench/floor.ts: `node:http` and `pg` calling the same query functions
 *    as the routes, findSectionDataByKey and patchSectionDataByKey, so the same named statements
 *    batched per turn in the same way, against the same database, without framework or auth).
 *    floor/bare is what the physical work allows on this machine; audience/floor how much of it
 *    the server reaches. The server logs every request (LOG_LEVEL=info, as `npm start`); beside
 *    it, on the same database, the same server at LOG_LEVEL=warn is measured too: what the
 *    request log costs.
 * 3. Merge and unmerge latency of a profile with 0 events and of one with 100,000 events (added
 *    set-based into profile_events): PUT /audience/profiles/merges with a new web-keyspace
 *    profile, then DELETE /audience/profiles/merges/keyspaces/…web/profiles/{key}.
 *
 * The machine is shared and noisy, so what counts are the ratios of the same run.
 * Everything is bounded in time and cleaned up (child processes, temp dir, database connection)
 * on failure too. Settings from the environment: those of bench/harness.ts (BENCH_GENERATOR,
 * BENCH_CONNECTIONS, BENCH_WARMUP_S, BENCH_DURATION_S, BENCH_ROUNDS, BENCH_SERVER_ARGS), and BENCH_PROFILES
 * (100000), BENCH_EVENTS (100000), BENCH_MERGES (5: timed merge/unmerge pairs per case) and
 * BENCH_ONLY (get,patch,merge: what to measure, e.g. "get" alone when profiling the server).
 */
import pg from 'pg';
import { definitionsOf, loadedEmail, loadProfiles, type Ids } from './profile-load.ts';
import {
  embeddedDatabaseUrl,
  failOnBadRuns,
  LOAD,
  log,
  measure,
  median,
  N_MARK,
  onCleanup,
  printSetting,
  R_MARK,
  request,
  runBench,
  share,
  sleep,
  startAudience,
  startBare,
  startBeside,
  startReference,
  summariseEvents,
  summary,
  summaryLine,
  table,
  usPerRequest,
  within,
  type Audience,
  type Load,
  type Measured,
  type Server,
} from './harness.ts';

const PROFILES = Math.max(10, Number(process.env.BENCH_PROFILES ?? 100_000));
const EVENTS = Math.max(0, Number(process.env.BENCH_EVENTS ?? 100_000));
const MERGES = Math.min(50, Math.max(1, Number(process.env.BENCH_MERGES ?? 5)));
/** What to measure, e.g. "get" when profiling GET alone: any of get, patch, merge (all by default). */
const ONLY = new Set((process.env.BENCH_ONLY ?? 'get,patch,merge').split(',').map((s) => s.trim().toLowerCase()));
/** The whole run: start-up, load, 6 targets per round, merges, clean-up. */
const DEADLINE_MS = 300_000 + LOAD.rounds * 8 * (LOAD.warmupS + LOAD.durationS) * 1000 * 1.5 + MERGES * 4 * 60_000;

/** The key of the n-th loaded profile (1 ≤ n ≤ PROFILES) in the email keyspace. */
const emailOf = (n: number | typeof N_MARK) => loadedEmail(n);

/** Adds EVENTS page-view events to one profile, set-based; returns the seconds it took. */
async function addEvents(db: pg.Client, accountId: string, ids: Ids, key: string): Promise<number> {
  const started = performance.now();
  const { rows } = await db.query<{ profile_id: string }>(
    'select profile_id from profile_identifiers where account_id = $1 and keyspace_id = $2 and profile_key = $3',
    [accountId, ids.emailKeyspace.id, key],
  );
  if (!rows[0]) throw new Error(`no profile ${key}`);
  await db.query(
    `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select $1::bigint, $2::bigint, $3::bigint, $4::bigint, now() - n * interval '1 minute', now(), 'bench-' || n,
       jsonb_build_object('activityId', 'a' || n, 'device', 'desktop', 'id', n::text, 'location', 'Oslo', 'title', 'Page ' || n, 'url', 'https://shop.example.com/p/' || n)
     from generate_series(1, $5::int) n`,
    [accountId, rows[0].profile_id, ids.shop.id, ids.pageView, EVENTS],
  );
  await summariseEvents(db, accountId);
  const inserted = performance.now();
  // Not during the measurements: autovacuum's pass over the new rows, and writing them out.
  await db.query('vacuum (analyze) profile_events');
  await db.query('checkpoint').catch(() => {});
  return (inserted - started) / 1000;
}

/** One timed request that must answer `status`; ms. */
async function timed(url: string, init: RequestInit, status: number, what: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
  const text = await res.text();
  const ms = performance.now() - started;
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${text}`);
  return ms;
}

interface MergeCase {
  label: string;
  key: string;
  merge: number[];
  unmerge: number[];
}

/**
 * Merges the email profile `c.key` with a new web profile and unmerges that one again, timing
 * both; the first (warm-up) pair is not counted and checks that the web key reads the cluster's
 * values after the merge and nothing after the unmerge.
 */
async function mergePair(audience: Audience, ids: Ids, c: MergeCase, warmUp: boolean): Promise<void> {
  const auth = { authorization: `Bearer ${audience.token}` };
  const web = `bench-${c.label.replace(/\W+/g, '-')}-${c.merge.length}-${Date.now()}`;
  const read = () =>
    request(
      `${audience.url}/audience/keyspaces/${encodeURIComponent(ids.webKeyspace)}/profiles/${encodeURIComponent(web)}/sections/${encodeURIComponent(ids.shop.discriminator)}/attributes`,
      { headers: auth },
    );
  const merge = await timed(
    `${audience.url}/audience/profiles/merges`,
    {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        profiles: [
          { keyspace_discriminator: ids.emailKeyspace.discriminator, profile_key: c.key },
          { keyspace_discriminator: ids.webKeyspace, profile_key: web },
        ],
      }),
    },
    204,
    `merge ${c.key} with ${web}`,
  );
  if (warmUp) {
    const merged = await read();
    if (merged.status !== 200 || !merged.text.includes(c.key))
      throw new Error(`after the merge, ${web} reads ${merged.status} ${merged.text}, without ${c.key}`);
  }
  const unmerge = await timed(
    `${audience.url}/audience/profiles/merges/keyspaces/${encodeURIComponent(ids.webKeyspace)}/profiles/${encodeURIComponent(web)}`,
    {
      method: 'DELETE',
      headers: auth,
    },
    204,
    `unmerge ${web}`,
  );
  if (warmUp) {
    const after = await read();
    if (after.status !== 200 || after.text !== '{}')
      throw new Error(`after the unmerge, ${web} reads ${after.status} ${after.text}, not {}`);
    return;
  }
  c.merge.push(merge);
  c.unmerge.push(unmerge);
}

await runBench(DEADLINE_MS, async (autocannon) => {
  printSetting();
  console.log(
    `${PROFILES} profiles; merge/unmerge: ${MERGES} timed pairs per case (after one warm-up pair), ${EVENTS} events in the second case`,
  );

  const audience = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'profile_key_operations_per_second',
  ]);
  const db = new pg.Client({
    connectionString: await embeddedDatabaseUrl(audience.dataDir),
    statement_timeout: 180_000,
  });
  // When the server stops its PostgreSQL (e.g. on a Ctrl-C, which reaches the whole process
  // group), this connection ends with an error event, which must not crash the bench.
  db.on('error', (err) => log(`database connection: ${err.message}`));
  onCleanup(() => db.end());
  await within(15_000, 'database connection', db.connect());
  const ids = await definitionsOf(db, audience.accountId);

  // ---- 1. Load ----
  const load = await loadProfiles(db, audience.accountId, ids, PROFILES);
  const loadLine = `load: ${PROFILES} profiles in ${load.loadS.toFixed(2)} s (one INSERT … SELECT generate_series in one transaction, ${load.foreignKeyChecks ? 'with' : 'without'} foreign key checks; ${Object.entries(
    load.rows,
  )
    .map(([t, n]) => `${n} ${t}`)
    .join(', ')}), then VACUUM (ANALYZE) in ${load.analyzeS.toFixed(2)} s`;
  log(loadLine);

  // ---- 2. GET and PATCH of random profiles ----
  const auth = { authorization: `Bearer ${audience.token}` };
  const base = (n: number | typeof N_MARK) =>
    `/audience/keyspaces/${encodeURIComponent(ids.emailKeyspace.discriminator)}/profiles/${encodeURIComponent(emailOf(n))}/sections/${encodeURIComponent(ids.shop.discriminator)}/attributes`;
  const sample = await request(`${audience.url}${base(PROFILES)}`, { headers: auth });
  if (sample.status !== 200) throw new Error(`GET ${base(PROFILES)}: ${sample.status} ${sample.text}`);
  const attributes = JSON.parse(sample.text) as Record<string, unknown>;
  if (attributes[ids.versions.get(`${ids.ns}.attributes.email`)!] !== emailOf(PROFILES))
    throw new Error(`GET ${base(PROFILES)} does not answer the loaded email: ${sample.text}`);
  const firstname = `${ids.ns}.attributes.firstname`;
  const patched = await request(`${audience.url}/v2${base(1)}`, {
    method: 'PATCH',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ [firstname]: 'Bench' }),
  });
  if (patched.status !== 204) throw new Error(`PATCH /v2${base(1)}: ${patched.status} ${patched.text}`);
  const reread = await request(`${audience.url}${base(1)}`, { headers: auth });
  if (!reread.text.includes('"Bench"')) throw new Error(`the PATCH did not change the first name: ${reread.text}`);
  console.log(
    `GET body: ${Buffer.byteLength(sample.text)} bytes, ${Object.keys(attributes).length} attributes, e.g. ${sample.text}`,
  );
  const bare = await startBare(sample.text);
  // Measured: two servers beside the first one, on its database, the same kind of process
  // differing only in the log level (the first one's own PostgreSQL is its child; theirs is not).
  const logged = await startBeside(audience, audience.logLevel);
  const quiet = await startBeside(audience, 'warn');
  const floor: Server = {
    ...(await startReference('floor server', 'floor.ts', {
      BENCH_DATABASE_URL: await embeddedDatabaseUrl(audience.dataDir),
      BENCH_ACCOUNT_ID: audience.accountId,
      BENCH_KEYSPACE: JSON.stringify({ keyspace_id: ids.emailKeyspace.id, kind: 'email' }),
      BENCH_SECTION_ID: ids.shop.id,
      BENCH_VERSIONS: JSON.stringify(Object.fromEntries(ids.versions)),
    })),
    databaseOf: audience.dataDir,
  };
  // The floor must answer what the server answers, or it measures other work.
  const floorSample = await request(`${floor.url}${base(PROFILES)}`);
  if (floorSample.text !== sample.text)
    throw new Error(`the floor server answers ${floorSample.status} ${floorSample.text}, not ${sample.text}`);
  const floorPatched = await request(`${floor.url}/v2${base(2)}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ [firstname]: 'Floor' }),
  });
  const floorReread = await request(`${audience.url}${base(2)}`, { headers: auth });
  if (floorPatched.status !== 204 || !floorReread.text.includes('"Floor"'))
    throw new Error(
      `the floor server's PATCH did not change the first name: ${floorPatched.status}, ${floorReread.text}`,
    );

  // A random loaded profile in each request, and for PATCH a random first name.
  const get: Load = { method: 'GET', path: base(N_MARK), randomUpTo: PROFILES };
  const patch = (headers: Record<string, string>): Load => ({
    method: 'PATCH',
    path: `/v2${base(N_MARK)}`,
    body: JSON.stringify({ [firstname]: `F${R_MARK}` }),
    randomUpTo: PROFILES,
    headers: { ...headers, 'content-type': 'application/json' },
  });
  const ops: { op: string; bare: Load; audience: Load }[] = [
    { op: 'GET', bare: get, audience: { ...get, headers: auth } },
    { op: 'PATCH', bare: patch({}), audience: patch(auth) },
  ];
  const measured = ops.filter(({ op }) => ONLY.has(op.toLowerCase()));
  const results: Measured[] = [];
  for (let round = 1; round <= LOAD.rounds; round++) {
    for (const { op, bare: bareLoad, audience: audienceLoad } of measured) {
      results.push(await measure(autocannon, `${op} bare node:http`, round, bare, bareLoad));
      results.push(await measure(autocannon, `${op} floor`, round, floor, bareLoad));
      results.push(await measure(autocannon, `${op} audience`, round, logged, audienceLoad));
      results.push(await measure(autocannon, `${op} audience warn`, round, quiet, audienceLoad));
    }
  }

  let writesLine = '';
  if (ONLY.has('patch')) {
    await sleep(1500);
    const w = (
      await db.query<{ relname: string; upd: string; hot: string; ins: string }>(
        `select relname, n_tup_upd as upd, n_tup_hot_upd as hot, n_tup_ins as ins from pg_stat_user_tables where relname in ('profile_sections', 'attribute_history') order by relname`,
      )
    ).rows;
    const of = (t: string) => w.find((r) => r.relname === t);
    writesLine = `writes: profile_sections ${of('profile_sections')?.upd} updates (${of('profile_sections')?.hot} HOT), attribute_history ${of('attribute_history')?.ins} rows`;
    log(writesLine);
  }

  // ---- 3. Merge and unmerge, without and with events ----
  const cases: MergeCase[] = [];
  let eventsLine = '';
  let eventsTouched: { scans: number; tuples: number } | undefined;
  if (ONLY.has('merge')) {
    const plain: MergeCase = { label: '0 events', key: emailOf(PROFILES), merge: [], unmerge: [] };
    const busy: MergeCase = { label: `${EVENTS} events`, key: emailOf(PROFILES - 1), merge: [], unmerge: [] };
    cases.push(plain, busy);
    const eventsS = await addEvents(db, audience.accountId, ids, busy.key);
    eventsLine = `events: ${EVENTS} events added to ${busy.key} in ${eventsS.toFixed(2)} s (one INSERT … SELECT generate_series), then VACUUM (ANALYZE) and CHECKPOINT`;
    log(eventsLine);
    // PostgreSQL's own counters show whether the merges read or wrote profile_events at all.
    // Backends report them when idle, at most once a second. Sequential scans are not counted:
    // (auto)vacuum and analyze add to that counter without reading rows through it, and a query's
    // sequential scan would show in the rows read.
    const eventStats = async () => {
      await sleep(1500);
      const r = (
        await db.query<{ scans: string; tuples: string; detail: string }>(
          `select coalesce(idx_scan, 0) as scans, n_tup_ins + n_tup_upd + n_tup_del + coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as tuples,
           format('seq %s idx %s seq_read %s idx_fetch %s ins %s upd %s del %s', seq_scan, idx_scan, seq_tup_read, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_del) as detail
         from pg_stat_user_tables where relname = 'profile_events'`,
        )
      ).rows[0];
      log(`profile_events counters: ${r.detail}`);
      return r;
    };
    await mergePair(audience, ids, plain, true);
    await mergePair(audience, ids, busy, true);
    const before = await eventStats();
    // The two cases alternate, so that both see the same conditions (noise, autovacuum, checkpoints).
    for (let i = 0; i < MERGES; i++) {
      await mergePair(audience, ids, plain, false);
      await mergePair(audience, ids, busy, false);
    }
    const after = await eventStats();
    eventsTouched = {
      scans: Number(after.scans) - Number(before.scans),
      tuples: Number(after.tuples) - Number(before.tuples),
    };
    for (const c of cases)
      log(
        `${c.label}: merge ${c.merge.map((m) => m.toFixed(1)).join(', ')} ms; unmerge ${c.unmerge.map((m) => m.toFixed(1)).join(', ')} ms`,
      );
    const stored = (
      await db.query<{ n: number }>('select count(*)::int as n from profile_events where account_id = $1', [
        audience.accountId,
      ])
    ).rows[0].n;
    if (stored !== EVENTS) throw new Error(`profile_events holds ${stored} events after the merges, not ${EVENTS}`);
  }

  // ---- Report ----
  const row = (label: string, m: Measured, ratioTo?: Measured) => [
    label,
    String(m.round),
    m.rps.toFixed(0),
    m.mean.toFixed(2),
    m.p50.toFixed(1),
    m.p99.toFixed(1),
    usPerRequest(m.serverCpuUsPerRequest),
    share(m.serverCpuShare),
    m.target.includes('bare') ? '' : usPerRequest(m.dbCpuUsPerRequest),
    share(m.clientCpuShare),
    m.loadAverage.toFixed(2),
    ratioTo ? (m.rps / ratioTo.rps).toFixed(2) : '',
  ];
  const rows = [
    [
      'target',
      'round',
      'requests/s',
      'mean ms',
      'p50 ms',
      'p99 ms',
      'server CPU µs/req',
      'server CPU',
      'db CPU µs/req',
      `${LOAD.generator} CPU`,
      'load avg',
      'ratio',
      'audience/floor',
    ],
  ];
  for (const { op } of measured) {
    for (let round = 1; round <= LOAD.rounds; round++) {
      const of = (target: string) => results.find((r) => r.target === `${op} ${target}` && r.round === round)!;
      const [b, f, a, w] = [of('bare node:http'), of('floor'), of('audience'), of('audience warn')];
      rows.push(
        [...row(b.target, b), ''],
        [...row(`${f.target} (/bare)`, f, b), ''],
        [...row(`${a.target} ${audience.logLevel} (/bare)`, a, b), (a.rps / f.rps).toFixed(2)],
        [...row(`${w.target} (/bare)`, w, b), (w.rps / f.rps).toFixed(2)],
      );
    }
  }

  console.log('');
  console.log(loadLine);
  if (eventsLine) console.log(eventsLine);
  if (writesLine) console.log(writesLine);
  if (measured.length > 0) {
    console.log('');
    console.log(table(rows));
    console.log('');
    for (const { op } of measured) {
      const aim = op === 'GET' ? 0.4 : 0.15;
      console.log(summaryLine(`${op} …/attributes`, summary(results, `${op} audience`, `${op} bare node:http`), aim));
      // The floor over bare is the most this machine allows; audience over floor, how much of it the server reaches.
      console.log(
        summaryLine(`${op} …/attributes`, summary(results, `${op} floor`, `${op} bare node:http`), aim, {
          target: 'floor',
          baseline: 'bare',
        }),
      );
      console.log(
        summaryLine(`${op} …/attributes`, summary(results, `${op} audience`, `${op} floor`), undefined, {
          target: 'audience',
          baseline: 'floor',
        }),
      );
      // What the request log costs: the same server at warn, which logs no request.
      const cost = summary(results, `${op} audience`, `${op} audience warn`);
      console.log(
        summaryLine(`${op} …/attributes`, cost, 0.9, {
          target: `audience ${audience.logLevel}`,
          baseline: 'audience warn',
        }),
      );
      if (cost.serverUs !== undefined && cost.baselineServerUs !== undefined)
        console.log(
          `${op} request log: server CPU per request ${cost.serverUs.toFixed(0)} µs at ${audience.logLevel}, ${cost.baselineServerUs.toFixed(0)} µs at warn: ${(cost.baselineServerUs / cost.serverUs).toFixed(2)} (aim at least 0.90)`,
        );
    }
  }
  if (cases.length > 0) {
    const ms = (x: number) => x.toFixed(1);
    console.log('');
    console.log(
      `merge (PUT /audience/profiles/merges with a new web profile) and unmerge (DELETE …/merges/keyspaces/…web/profiles/{key}), ${MERGES} each:`,
    );
    console.log(
      table([
        ['profile', 'merge median ms', 'merge max ms', 'unmerge median ms', 'unmerge max ms'],
        ...cases.map((c) => [
          c.label,
          ms(median(c.merge)),
          ms(Math.max(...c.merge)),
          ms(median(c.unmerge)),
          ms(Math.max(...c.unmerge)),
        ]),
      ]),
    );
    console.log(
      `median with ${EVENTS} events / with 0 events: merge ${(median(cases[1].merge) / median(cases[0].merge)).toFixed(2)}, unmerge ${(median(cases[1].unmerge) / median(cases[0].unmerge)).toFixed(2)}`,
    );
    if (eventsTouched)
      console.log(
        `profile_events during the ${2 * MERGES} timed merges and unmerges of both profiles (pg_stat_user_tables): ${eventsTouched.scans} index scans, ${eventsTouched.tuples} rows read or written`,
      );
  }
  failOnBadRuns(results);
});

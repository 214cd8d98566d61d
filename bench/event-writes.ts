/**
 * `npm run bench:event-writes`: what keeping the sums of events (migration 0021) costs the writes of
 * events, measured in one run against the same statements without the sums (as they were before
 * issue 26), in alternating rounds, so that the load of a shared machine weighs on both alike.
 *
 * 1. Starts the real server (bench/harness.ts) and loads BENCH_EVENT_PROFILES profiles into the
 *    demo account straight into its database (INSERT … SELECT over generate_series).
 * 2. Per round, for each form in turn, for BENCH_DURATION_S seconds on BENCH_EVENT_CONNECTIONS
 *    connections of their own:
 *    - the event route's write: a transaction per request that appends 1 page view to a random
 *      profile (insertEvents of src/profiles/queries/events.ts, which locks the profile, appends
 *      the event and adds it to the profile's sums; before: the same without the sums);
 *    - the bulk write of activity events: a transaction per batch of BENCH_EVENT_BATCH events of
 *      random profiles (insertEventsBulk; before: its single INSERT without the sums).
 *    Reports transactions and events per second, and the PostgreSQL CPU per event.
 *
 * Settings: BENCH_EVENT_PROFILES (100000), BENCH_EVENT_CONNECTIONS (4), BENCH_EVENT_BATCH (1000),
 * BENCH_ROUNDS (2), BENCH_DURATION_S (10).
 */
import crypto from 'node:crypto';
import pg from 'pg';
import { insertEvents, insertEventsBulk } from '../src/profiles/queries.ts';
import {
  DURATION_S,
  embeddedDatabaseUrl,
  log,
  onCleanup,
  postgresCpuMs,
  ROUNDS,
  runBench,
  startAudience,
  table,
} from './harness.ts';

const PROFILES = Math.max(1000, Number(process.env.BENCH_EVENT_PROFILES ?? 100_000));
const CONNECTIONS = Math.max(1, Number(process.env.BENCH_EVENT_CONNECTIONS ?? 4));
const BATCH = Math.max(10, Number(process.env.BENCH_EVENT_BATCH ?? 1000));

interface Target {
  accountId: string;
  sectionId: string;
  versionId: string;
  firstProfile: number;
}

const randomProfile = (t: Target) => String(t.firstProfile + Math.floor(Math.random() * PROFILES));
const data = { url: 'https://shop.example.com/p/1', title: 'Page' };

/** One write of each kind, with the sums (as now) or without them (as before). */
const writes = {
  route: {
    async now(db: pg.Client, t: Target) {
      await db.query('begin');
      await insertEvents(db, t.accountId, {
        profileId: randomProfile(t),
        sectionId: t.sectionId,
        events: [
          { eventTime: new Date().toISOString(), versionId: t.versionId, correlationId: crypto.randomUUID(), data },
        ],
        createdAt: new Date(),
      });
      await db.query('commit');
      return 1;
    },
    async before(db: pg.Client, t: Target) {
      await db.query('begin');
      await db.query(
        `with profile as (select profile_id from profiles where account_id = $1::bigint and profile_id = $2::bigint for key share),
         inserted as (
           insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
           select $1::bigint, p.profile_id, $3::bigint, e.version_id, e.event_time, $8, e.correlation_id, e.data
           from profile p cross join unnest($4::bigint[], $5::timestamptz[], $6::text[], $7::jsonb[]) as e(version_id, event_time, correlation_id, data)
           returning 1
         )
         select exists (select 1 from profile) as found`,
        [
          t.accountId,
          randomProfile(t),
          t.sectionId,
          [t.versionId],
          [new Date().toISOString()],
          [crypto.randomUUID()],
          [JSON.stringify(data)],
          new Date(),
        ],
      );
      await db.query('commit');
      return 1;
    },
  },
  bulk: {
    async now(db: pg.Client, t: Target) {
      const events = batch(t);
      await db.query('begin');
      await insertEventsBulk(db, t.accountId, t.sectionId, events, new Date());
      await db.query('commit');
      return events.length;
    },
    async before(db: pg.Client, t: Target) {
      const events = batch(t);
      await db.query('begin');
      await db.query(
        `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
         select $1::bigint, e.p, $2::bigint, e.v, e.t, $4, e.c, e.d
         from json_to_recordset($3::json) as e(p bigint, v bigint, t timestamptz, c text, d jsonb)`,
        [
          t.accountId,
          t.sectionId,
          JSON.stringify(
            events.map((e) => ({ p: e.profileId, v: e.versionId, t: e.eventTime, c: e.correlationId, d: e.data })),
          ),
          new Date(),
        ],
      );
      await db.query('commit');
      return events.length;
    },
  },
};

function batch(t: Target) {
  // Sorted by profile, as the lock of the activity events' profiles is taken.
  return Array.from({ length: BATCH }, () => randomProfile(t))
    .sort()
    .map((profileId) => ({
      profileId,
      versionId: t.versionId,
      eventTime: new Date(),
      correlationId: crypto.randomUUID(),
      data,
    }));
}

await runBench(600_000 + ROUNDS * 4 * (DURATION_S + 5) * 1000, async () => {
  const audience = await startAudience();
  const url = await embeddedDatabaseUrl(audience.dataDir);
  const connect = async () => {
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    onCleanup(() => db.end());
    return db;
  };
  const setup = await connect();
  const accountId = audience.accountId;
  const ids = (
    await setup.query<{ section_id: string; version_id: string }>(
      `select s.section_id::text, v.version_id::text from sections s
       join events e on e.account_id = s.account_id and e.section_id = s.section_id and e.discriminator like '%.events.page-view'
       join event_versions v on v.account_id = e.account_id and v.event_id = e.event_id
       where s.account_id = $1::bigint and s.discriminator like '%.sections.user-created.shop' order by v.version_id limit 1`,
      [accountId],
    )
  ).rows[0];
  const first = await setup.query<{ first: string }>(
    `insert into profiles (account_id, export_key) select $1::bigint, 'bench-' || n from generate_series(1, $2::int) n
     returning profile_id::text as first`,
    [accountId, PROFILES],
  );
  const target: Target = {
    accountId,
    sectionId: ids.section_id,
    versionId: ids.version_id,
    firstProfile: Math.min(...first.rows.map((r) => Number(r.first))),
  };
  await setup.query('vacuum (analyze) profiles');
  log(`${PROFILES} profiles loaded`);
  const dbs = await Promise.all(Array.from({ length: CONNECTIONS }, connect));
  const results = new Map<string, { tps: number[]; eps: number[]; cpuUs: number[] }>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const kind of ['route', 'bulk'] as const) {
      for (const form of ['before', 'now'] as const) {
        const write = writes[kind][form];
        const cpuBefore = await postgresCpuMs(audience.dataDir);
        const started = performance.now();
        const until = started + DURATION_S * 1000;
        let transactions = 0;
        let events = 0;
        await Promise.all(
          dbs.map(async (db) => {
            while (performance.now() < until) {
              const written = await write(db, target);
              events += written;
              transactions++;
            }
          }),
        );
        const seconds = (performance.now() - started) / 1000;
        const cpu = (await postgresCpuMs(audience.dataDir)) - cpuBefore;
        const name = `${kind} ${form}`;
        const r = results.get(name) ?? { tps: [], eps: [], cpuUs: [] };
        r.tps.push(transactions / seconds);
        r.eps.push(events / seconds);
        r.cpuUs.push((cpu * 1000) / events);
        results.set(name, r);
        log(
          `round ${round}, ${name}: ${(transactions / seconds).toFixed(0)} transactions/s, ${(events / seconds).toFixed(0)} events/s`,
        );
      }
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const rows = [...results].map(([name, r]) => [
    name,
    r.tps.map((x) => x.toFixed(0)).join(', '),
    r.eps.map((x) => x.toFixed(0)).join(', '),
    med(r.cpuUs).toFixed(0),
  ]);
  console.log('');
  console.log(
    table([
      [
        'write (sums kept: now; without: before)',
        'transactions/s per round',
        'events/s per round',
        'PostgreSQL CPU µs per event (median)',
      ],
      ...rows,
    ]),
  );
  for (const kind of ['route', 'bulk']) {
    const ratio =
      results.get(`${kind} now`)!.eps.reduce((a, b) => a + b) /
      results.get(`${kind} before`)!.eps.reduce((a, b) => a + b);
    console.log(`${kind}: events/s with the sums = ${ratio.toFixed(2)} x without them (sum over rounds)`);
  }
});

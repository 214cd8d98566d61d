import type { SqlValues } from '../aql/compile-sql.ts';
import {
  canonicalProfilesSql,
  clusterMembersSql,
  identifiedProfilesSql,
  knownSql,
  sectionRowsSql,
} from '../profiles/relations.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';

/** Whether any profile of the account belongs to a merge cluster as a member (profiles_by_canonical). */
const HAS_CLUSTERS = (account: string) => `exists (${clusterMembersSql(account)})`;

/**
 * Counts the canonical profiles of an account that satisfy a compiled AQL predicate over `p`
 * (src/aql/compile-sql.ts); `known` true or false keeps only known or unknown profiles, by the
 * keyspaces that make a profile known.
 *
 * The predicate comes compiled twice (compilePredicate): `text` for any account and `simple` for
 * one without merge clusters, whose plans are far cheaper (semi-joins on the profile itself; with
 * `simple.section`, over the rows of that section, with no join of all profiles). One statement
 * picks the one that holds in its own snapshot, so a merge committed meanwhile cannot make the
 * count use the wrong one; PostgreSQL runs only the branch it takes.
 */
export async function countProfilesMatching(
  db: Queryable,
  predicate: CountPredicate,
  known: { keyspaceIds: string[]; wanted: boolean } | null,
): Promise<number> {
  const { rows } = await db.query<{ n: string }>(countStatement(predicate, known));
  return Number(rows[0].n);
}

/** A predicate compiled for a count (countProfilesMatching). */
export interface CountPredicate {
  account: string;
  text: string;
  simple: { text: string; section?: string };
  values: unknown[];
}

/** The statement of countProfilesMatching, whole. */
export function countStatement(
  predicate: CountPredicate,
  known: { keyspaceIds: string[]; wanted: boolean } | null,
): { text: string; values: unknown[] } {
  const values = [...predicate.values];
  const { account } = predicate;
  let knownClause = '';
  let simpleKnownClause = '';
  if (known) {
    values.push(known.keyspaceIds);
    const not = known.wanted ? '' : 'not ';
    knownClause = `and ${not}${knownSql(account, 'p.profile_id', `$${values.length}::bigint[]`, 'set')}`;
    simpleKnownClause = `and ${not}${knownSql(account, 'p.profile_id', `$${values.length}::bigint[]`, 'own')}`;
  }
  const count = (text: string, clause: string) =>
    `(select count(*) from (${canonicalProfilesSql(account)}) p where ${text} ${clause})`;
  const { simple } = predicate;
  // Without clusters every profile is canonical, and a profile has one row in a section.
  const simpleCount =
    simple.section === undefined
      ? count(simple.text, simpleKnownClause)
      : `(select count(*) from (${sectionRowsSql(account, simple.section)}) p where ${simple.text} ${simpleKnownClause})`;
  return {
    text: `select case when ${HAS_CLUSTERS(account)} then ${count(predicate.text, knownClause)} else ${simpleCount} end as n`,
    values,
  };
}

/**
 * The settings of a trend's transaction (countMasksByPoint). Before PostgreSQL 18 a disabled sort
 * adds 10^10 to the plan's cost, which passes every JIT threshold: PostgreSQL 15 then compiled each
 * trend, 0.2-1 s of a small one; JIT off keeps it to the statement's own work.
 */
const TREND_SETTINGS = 'set local enable_sort = off; set local jit = off';

/**
 * Counts, per sampling point, the canonical profiles that matched a query compiled for a trend
 * (compileMasks: its `rows` and `mask`, bit i - 1 for point i; the points ascending, the array
 * behind `pointsParam`), split into known and unknown, counting only profiles created by then.
 *
 * One GROUP BY per profile over the terms' rows, a row per canonical profile with the points from
 * its creation on (term 0), and a row per identifier that makes it known (term -1): no join of
 * large sets, whose sizes PostgreSQL cannot estimate after a UNION ALL. A profile without a term 0
 * row (a member of a cluster) gets mask 0 and is left out. The rows are sorted by profile before
 * they are grouped (the subquery's ORDER BY): PostgreSQL would otherwise hash them, and a hash
 * table of a million profiles, probed in no order, took a quarter more CPU time than the sort
 * (docs/benchmarks.md "Segments"). The query comes compiled twice, as the count's predicate
 * does: `general` for any account, `simple` for one without merge clusters; one
 * statement runs the one that holds in its snapshot. The database answers one row per distinct
 * (mask, known), a few dozen; the points are counted from their bits here.
 *
 * The statement runs with sorts disabled (TREND_SETTINGS), so that the last grouping, of the
 * matching profiles by (mask, known), hashes them: PostgreSQL cannot tell how many profiles the
 * rows of a UNION ALL hold, takes them for 200, and would sort the hundreds of thousands it gets
 * in the serving process, after the parallel part (docs/benchmarks.md "Segments"). The sort by
 * profile stays, since the subquery's ORDER BY asks for it.
 */
export async function countMasksByPoint(
  pool: pg.Pool,
  compiled: CompiledTrend,
  knownKeyspaceIds: string[],
): Promise<{ i: number; known: number; unknown: number }[]> {
  const statement = trendStatement(compiled, knownKeyspaceIds);
  const { rows } = await withTransaction(pool, async (tx) => {
    await tx.query(statement.settings);
    return tx.query<{ mask: string; known: boolean; n: string }>(statement.text, statement.values);
  });
  const n = Math.max(0, ...rows.map((r) => BigInt(r.mask).toString(2).length));
  const counts = Array.from({ length: n }, (_, b) => ({ i: b + 1, known: 0, unknown: 0 }));
  for (const r of rows) {
    const mask = BigInt(r.mask);
    for (let b = 0; b < n; b++) {
      if ((mask >> BigInt(b)) & 1n) counts[b][r.known ? 'known' : 'unknown'] += Number(r.n);
    }
  }
  return counts.filter((c) => c.known + c.unknown > 0);
}

/** A query compiled for a trend (compileMasks), twice: for any account and for one without clusters. */
export interface CompiledTrend {
  general: { rows: string; mask: string };
  simple: { rows: string; mask: string };
  values: unknown[];
  accountParam: string;
  pointsParam: string;
}

/** The statement of countMasksByPoint, whole, with the settings of its transaction. */
export function trendStatement(
  compiled: CompiledTrend,
  knownKeyspaceIds: string[],
): { settings: string; text: string; values: unknown[] } {
  const values = [...compiled.values, knownKeyspaceIds];
  const { accountParam: account, pointsParam: pts } = compiled;
  const keyspaces = `$${values.length}::bigint[]`;
  // The points from the profile's creation on: all but the (number of points before created_at).
  const created = `select p.profile_id, 0 as term, (1::bigint << cardinality(${pts})) - (1::bigint << width_bucket(p.created_at - interval '1 microsecond', ${pts})) as mask
       from (${canonicalProfilesSql(account)}) p`;
  const known = (clusters: boolean) =>
    `select k.profile_id, -1 as term, 0::bigint as mask from (${identifiedProfilesSql(account, keyspaces, { clusters })}) k`;
  const counted = (
    q: { rows: string; mask: string },
    knownRows: string,
  ) => `select x.mask, x.known, count(*) as n from (
       select ${q.mask} & coalesce(bit_or(t.mask) filter (where t.term = 0), 0) as mask, bool_or(t.term = -1) as known
       from (select * from (${q.rows} union all (${created}) union all (${knownRows})) u order by u.profile_id) t
       group by t.profile_id
     ) x
     where x.mask <> 0
     group by x.mask, x.known`;
  return {
    settings: TREND_SETTINGS,
    text: `with clustered as (select ${HAS_CLUSTERS(account)} as yes)
       select * from (${counted(compiled.general, known(true))}) general where (select yes from clustered)
       union all
       select * from (${counted(compiled.simple, known(false))}) simple where not (select yes from clustered)`,
    values,
  };
}

/**
 * Whether the canonical profile whose id is the SQL `profile` is known: one of its cluster's members
 * has an identifier in one of the keyspaces (the same rule as countProfilesMatching's), for
 * statements over many profiles; `account` is the placeholder of the account id.
 */
export function knownPredicate(
  values: SqlValues,
  target: { account: string; profile: string; keyspaceIds: string[] },
): string {
  return knownSql(target.account, target.profile, values.add(target.keyspaceIds, 'bigint[]'), 'perProfile');
}

/** The state of a live segment's membership (live_segments, migration 0028). */
export interface LiveSegmentRow {
  segment_id: string;
  version_id: string | null;
  time_zone: string;
  live_since: Date;
  refreshed_at: Date | null;
  evaluated_at: Date | null;
}

/** The account's live segments, locked until the transaction ends: one run of the live segments job at a time. */
export async function lockLiveSegments(db: Queryable, accountId: string): Promise<LiveSegmentRow[]> {
  const { rows } = await db.query<LiveSegmentRow>(
    `select segment_id, version_id, time_zone, live_since, refreshed_at, evaluated_at from live_segments
     where account_id = $1::bigint order by segment_id for update`,
    [accountId],
  );
  return rows;
}

/** One live segment's state with its size; none when it is not live. */
export async function findLiveSegment(
  db: Queryable,
  accountId: string,
  segmentId: string,
): Promise<(LiveSegmentRow & { size: string }) | undefined> {
  const { rows } = await db.query<LiveSegmentRow & { size: string }>(
    `select l.segment_id, l.version_id, l.time_zone, l.live_since, l.refreshed_at, l.evaluated_at,
       (select count(*) from segment_members m where m.account_id = $1::bigint and m.segment_id = $2::bigint) as size
     from live_segments l where l.account_id = $1::bigint and l.segment_id = $2::bigint`,
    [accountId, segmentId],
  );
  return rows[0];
}

/** Starts (or starts again, for another version or time zone) the state of a live segment. */
export async function upsertLiveSegment(
  db: Queryable,
  accountId: string,
  s: { segmentId: string; versionId: string; timeZone: string; now: Date },
): Promise<void> {
  await db.query(
    `insert into live_segments (account_id, segment_id, version_id, time_zone, live_since)
     values ($1::bigint, $2::bigint, $3::bigint, $4, $5)
     on conflict (account_id, segment_id) do update set version_id = excluded.version_id, time_zone = excluded.time_zone`,
    [accountId, s.segmentId, s.versionId, s.timeZone, s.now],
  );
}

/** Records that live segments were brought up to date at `now`, and those of `whole` evaluated whole then. */
export async function markLiveSegmentsRefreshed(
  db: Queryable,
  accountId: string,
  r: { segmentIds: string[]; whole: string[]; now: Date },
): Promise<void> {
  await db.query(
    `update live_segments set refreshed_at = $3,
       evaluated_at = case when segment_id = any($4::bigint[]) then $3 else evaluated_at end
     where account_id = $1::bigint and segment_id = any($2::bigint[])`,
    [accountId, r.segmentIds, r.now, r.whole],
  );
}

/** Forgets live segments (their members and changes by their foreign keys). */
export async function deleteLiveSegments(db: Queryable, accountId: string, segmentIds: string[]): Promise<void> {
  await db.query('delete from live_segments where account_id = $1::bigint and segment_id = any($2::bigint[])', [
    accountId,
    segmentIds,
  ]);
}

/** An entry or an exit of a live segment, as applyMemberships answers it. */
export interface MemberChange {
  segment_id: string;
  entered: boolean;
  profile_id: string;
  export_key: string;
}

/** A live segment that applyMemberships brings up to date. */
export interface MembershipTarget {
  segmentId: string;
  /** Its predicate over `p`, the canonical profiles (compilePredicate), with placeholders of the statement's values. */
  text: string;
  /** The canonical profiles to evaluate it over; null: every profile of the account. */
  candidates: string[] | null;
  /** Whether its entries and exits are answered (the initial computation of a membership reports none). */
  report: boolean;
}

/**
 * Brings live segments' members up to date, each with its compiled predicate over its
 * candidates (or every profile of the account): profiles that match and are not members enter,
 * members that no longer match (or are no longer canonical profiles, or are gone) exit; each entry
 * and exit is recorded at `now`. One statement for all of them, on the account's node (`account`,
 * the account's placeholder in `values`, which the predicates' placeholders are of): answers the
 * entries and exits of the segments that `report`, by segment and profile.
 */
export async function applyMemberships(
  db: Queryable,
  shared: { account: string; values: SqlValues; now: Date },
  targets: MembershipTarget[],
): Promise<MemberChange[]> {
  const { account, values } = shared;
  const now = values.add(shared.now, 'timestamptz');
  const reporting = values.add(
    targets.filter((t) => t.report).map((t) => t.segmentId),
    'bigint[]',
  );
  const branches = targets.map((t) => {
    const segment = values.add(t.segmentId, 'bigint');
    const candidates = t.candidates === null ? null : values.add(t.candidates, 'bigint[]');
    const among = (column: string) => (candidates === null ? 'true' : `${column} = any(${candidates})`);
    return {
      matching: `select ${segment} as segment_id, p.profile_id, p.export_key from (${canonicalProfilesSql(account)}) p
         where ${among('p.profile_id')} and ${t.text}`,
      current: `select m.segment_id, m.profile_id from segment_members m
         where m.account_id = ${account} and m.segment_id = ${segment} and ${among('m.profile_id')}`,
      exited: `delete from segment_members m
         where m.account_id = ${account} and m.segment_id = ${segment}
           and m.profile_id = any(array(select g.profile_id from gone g where g.segment_id = ${segment}))
         returning m.segment_id, m.profile_id, m.export_key`,
    };
  });
  // No join of the matching profiles with the members, whose plan rested on estimates: right after
  // a membership was computed whole (the statistics of a table still empty), a nested loop of one
  // over the other took minutes for 50,000 candidates. An entry is a matching profile the primary
  // key takes; the exits are a set difference (hashed or sorted, never a loop of one over the other),
  // deleted by key.
  const { rows } = await db.query<MemberChange>(
    `with matching as (
       ${branches.map((b) => b.matching).join('\n       union all ')}
     ), current as (
       ${branches.map((b) => b.current).join('\n       union all ')}
     ), gone as (
       select segment_id, profile_id from current except select segment_id, profile_id from matching
     ), entered as (
       insert into segment_members (account_id, segment_id, profile_id, export_key, entered_at)
       select ${account}, x.segment_id, x.profile_id, x.export_key, ${now} from matching x
       on conflict (account_id, segment_id, profile_id) do nothing
       returning segment_id, profile_id, export_key
     ), ${branches.map((b, i) => `exited${i} as (\n       ${b.exited}\n     )`).join(', ')}, exited as (
       ${branches.map((_, i) => `select * from exited${i}`).join(' union all ')}
     ), changes as (
       select segment_id, true as entered, profile_id, export_key from entered
       union all select segment_id, false, profile_id, export_key from exited
     ), recorded as (
       insert into segment_member_changes (account_id, segment_id, profile_id, entered, at)
       select ${account}, segment_id, profile_id, entered, ${now} from changes order by segment_id, profile_id, entered
       returning 1
     )
     select c.segment_id, c.entered, c.profile_id, c.export_key from changes c
     where c.segment_id = any(${reporting}) and (select count(*) from recorded) >= 0
     order by c.segment_id, c.profile_id`,
    values.values,
  );
  return rows;
}

/**
 * The live segment's members counted from its membership, `known` true or false keeping only
 * known or unknown profiles (knownCount's rule).
 */
export async function countMembers(
  db: Queryable,
  accountId: string,
  segmentId: string,
  known: { keyspaceIds: string[]; wanted: boolean } | null,
): Promise<number> {
  const clause = known
    ? `and ${known.wanted ? '' : 'not '}${knownSql('$1::bigint', 'm.profile_id', '$3::bigint[]', 'perProfile')}`
    : '';
  const { rows } = await db.query<{ n: string }>(
    `select count(*) as n from segment_members m where m.account_id = $1::bigint and m.segment_id = $2::bigint ${clause}`,
    known ? [accountId, segmentId, known.keyspaceIds] : [accountId, segmentId],
  );
  return Number(rows[0].n);
}

/**
 * A live segment's size at each of `points` (ascending), from its recorded entries and exits: the
 * profiles whose last change by then was an entry, split into known and unknown by the keyspaces
 * that make a profile known now.
 */
export async function countMembersByPoint(
  db: Queryable,
  accountId: string,
  segmentId: string,
  points: Date[],
  keyspaceIds: string[],
): Promise<{ known: number; unknown: number }[]> {
  const { rows } = await db.query<{ i: string; known: string; unknown: string }>(
    `with last as (
       select w.i, c.profile_id, (array_agg(c.entered order by c.change_seq desc))[1] as member
       from unnest($3::timestamptz[]) with ordinality as w(t, i)
       join segment_member_changes c on c.account_id = $1::bigint and c.segment_id = $2::bigint and c.at <= w.t
       group by w.i, c.profile_id
     )
     select l.i, count(*) filter (where k.known) as known, count(*) filter (where not k.known) as unknown
     from last l cross join lateral (select ${knownSql('$1::bigint', 'l.profile_id', '$4::bigint[]', 'perProfile')} as known) k
     where l.member group by l.i`,
    [accountId, segmentId, points, keyspaceIds],
  );
  return points.map((_, j) => {
    const r = rows.find((x) => Number(x.i) === j + 1);
    return { known: Number(r?.known ?? 0), unknown: Number(r?.unknown ?? 0) };
  });
}

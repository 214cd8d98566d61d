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

/** The settings of a trend's transaction (countMasksByPoint). */
const TREND_SETTINGS = 'set local enable_sort = off';

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

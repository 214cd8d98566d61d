import type { Queryable } from '../store/pool.ts';

/**
 * Counts the canonical profiles of an account that satisfy a compiled AQL predicate over `p`
 * (src/aql/compile-sql.ts); `known` true or false keeps only known or unknown profiles, by the
 * keyspaces that make a profile known.
 */
export async function countProfilesMatching(db: Queryable, accountId: string, predicate: { text: string; values: unknown[] }, known: { keyspaceIds: string[]; wanted: boolean } | null): Promise<number> {
  const values = [...predicate.values, accountId];
  const account = `$${values.length}::bigint`;
  let knownClause = '';
  if (known) {
    values.push(known.keyspaceIds);
    knownClause = `and ${known.wanted ? '' : 'not '}exists (select 1 from profile_identifiers i join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id
      where i.account_id = p.account_id and (m.profile_id = p.profile_id or m.canonical_id = p.profile_id) and i.keyspace_id = any($${values.length}::bigint[]))`;
  }
  const { rows } = await db.query<{ n: string }>(
    `select count(*) as n from profiles p where p.account_id = ${account} and p.canonical_id is null and ${predicate.text} ${knownClause}`,
    values,
  );
  return Number(rows[0].n);
}

/**
 * Counts, per sampling point, the canonical profiles in a set of (profile_id, i) pairs compiled
 * from AQL (compilePairs), split into known and unknown, counting only profiles created by then.
 */
export async function countPairsByPoint(db: Queryable, pairs: { text: string; values: unknown[]; accountParam: string }, points: Date[], knownKeyspaceIds: string[]): Promise<{ i: number; known: number; unknown: number }[]> {
  const values = [...pairs.values, points, knownKeyspaceIds];
  const n = pairs.values.length;
  const account = pairs.accountParam;
  const { rows } = await db.query<{ i: string; known: string; unknown: string }>(
    `with pts as (select t, i from unnest($${n + 1}::timestamptz[]) with ordinality as pts(t, i)),
     matched as (${pairs.text}),
     known as (
       select distinct coalesce(m.canonical_id, m.profile_id) as profile_id from profile_identifiers i
       join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id
       where i.account_id = ${account} and i.keyspace_id = any($${n + 2}::bigint[])
     )
     select matched.i, count(k.profile_id) as known, count(*) - count(k.profile_id) as unknown
     from matched
     join profiles p on p.account_id = ${account} and p.profile_id = matched.profile_id and p.canonical_id is null
     join pts on pts.i = matched.i and p.created_at <= pts.t
     left join known k on k.profile_id = p.profile_id
     group by matched.i`,
    values,
  );
  return rows.map((r) => ({ i: Number(r.i), known: Number(r.known), unknown: Number(r.unknown) }));
}

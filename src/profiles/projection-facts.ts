/**
 * What the segments' projection (src/segments/projection.ts) reads of the profiles: the canonical
 * profiles, their section values and their event sums for counts; their creation times, whether
 * they are known, their values' spans and their events' times for trends; whole or for some of them, and
 * the marks of the writes it has not seen (projection_marks, migration 0032, written with
 * profile_changes: queries/changes.ts). Each runs in the projection's repeatable read transaction,
 * so that all of them see one snapshot.
 */
import { idArray } from '../store/arrays.ts';
import type { Queryable } from '../store/pool.ts';

/**
 * The transaction's snapshot, as text (pg_snapshot): what the projection then knows; and, when
 * `since` is given, the profiles marked by writes that `since` did not see (and this snapshot
 * does): the marks of transactions from its xmin on that are not visible in it; `pruned`: marks
 * `since` did not see may have been pruned (projection_prunes), so the columns are read whole.
 * One statement: a count waits for it.
 */
export async function snapshotAndMarks(
  db: Queryable,
  accountId: string,
  since: string | null,
): Promise<{ snapshot: string; marked: string[]; pruned: boolean }> {
  const { rows } = await db.query<{ snapshot: string; marked: string[] | null; pruned: boolean }>(
    `select pg_current_snapshot()::text as snapshot,
       coalesce((select pruned_below > pg_snapshot_xmin($2::pg_snapshot) from projection_prunes
         where account_id = $1::bigint), false) as pruned,
       case when $2::pg_snapshot is not null then array(
         select distinct profile_id::text from projection_marks
         where account_id = $1::bigint and xid >= pg_snapshot_xmin($2::pg_snapshot)
           and not pg_visible_in_snapshot(xid, $2::pg_snapshot)) end as marked`,
    [accountId, since],
  );
  return { snapshot: rows[0].snapshot, marked: rows[0].marked ?? [], pruned: rows[0].pruned ?? false };
}

/** A statement of this file, as it is run in one query or read through a cursor. */
type Statement = { text: string; values: unknown[] };

/** A section's attribute or event version: the column a statement reads. */
type Column = { sectionId: string; versionId: string };

/** The rows of a statement of this file as arrays of text, in one query (for some profiles: all go through a cursor). */
export async function arrayRows(db: Queryable, statement: Statement): Promise<string[][]> {
  return (await db.query<string[]>({ ...statement, rowMode: 'array' })).rows;
}

/** The canonical profiles of the account (all, or those among `ids`): the projection's slots. */
export async function canonicalProfiles(db: Queryable, accountId: string, ids: string[] | null): Promise<string[]> {
  return (await arrayRows(db, canonicalProfilesStatement(accountId, ids))).map((r) => r[0]);
}

/** The statement of canonicalProfiles, rows of [profile_id], for reading them through a cursor. */
export function canonicalProfilesStatement(accountId: string, ids: string[] | null): Statement {
  return {
    text: `select profile_id from profiles where account_id = $1::bigint and canonical_id is null
       and ($2::bigint[] is null or profile_id = any($2::bigint[]))`,
    values: [accountId, ids && idArray(ids)],
  };
}

/** Each of `ids` that still exists, with its canonical profile (itself when it is one). */
export async function canonicalOf(
  db: Queryable,
  accountId: string,
  ids: string[],
): Promise<{ profile_id: string; canonical: string }[]> {
  const { rows } = await db.query<{ profile_id: string; canonical: string }>(
    `select profile_id, coalesce(canonical_id, profile_id) as canonical from profiles
     where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, idArray(ids)],
  );
  return rows;
}

/**
 * The number values of an attribute version in a section, as the profiles' rows show them (their
 * cluster's on a canonical profile), as text, rows of [profile_id, v]: all rows, or those of
 * `ids`. Other JSON types are left out: a number condition holds for none of them.
 */
export function numberValuesStatement(accountId: string, column: Column, ids: string[] | null): Statement {
  return {
    text: `select profile_id, v #>> '{}' as v from (
       select profile_id, coalesce(cluster_attributes, attributes) -> $3::text as v from profile_sections
       where account_id = $1::bigint and section_id = $2::bigint and ($4::bigint[] is null or profile_id = any($4::bigint[]))
     ) x where jsonb_typeof(v) = 'number'`,
    values: [accountId, column.sectionId, column.versionId, ids && idArray(ids)],
  };
}

/**
 * The first and last time of an event version over each canonical profile's cluster (the sums of
 * profile_event_summaries, migration 0021), in microseconds since 1970 as text, rows of
 * [canonical, first, last]: for all canonical profiles, or those of `ids`.
 */
export function eventSpansStatement(accountId: string, column: Column, ids: string[] | null): Statement {
  return {
    text: `select ${canonicalOfRow('s')} as canonical,
       ${micros('min(s.first_time)')} as first, ${micros('max(s.last_time)')} as last
     from profile_event_summaries s ${memberJoin('s')}
     where s.account_id = $1::bigint and s.section_id = $2::bigint and s.version_id = $3::bigint and ${ofClusters('s', '$4')}
     group by 1`,
    values: [accountId, column.sectionId, column.versionId, ids && idArray(ids)],
  };
}

/** An instant as text of its microseconds since 1970 (exact: bigint). */
const micros = (instant: string) => `(extract(epoch from ${instant}) * 1000000)::bigint::text`;

/** The join of the rows `x` with their profile when it is a member of a merge cluster (canonicalOfRow). */
const memberJoin = (x: string) =>
  `left join profiles m on m.account_id = ${x}.account_id and m.profile_id = ${x}.profile_id and m.canonical_id is not null`;

/** The canonical profile of the rows `x` (after memberJoin). */
const canonicalOfRow = (x: string) => `coalesce(m.canonical_id, ${x}.profile_id)`;

/** Whether the rows `x` are of a profile of the clusters of the canonical profiles `ids` (a bigint[] placeholder), or `ids` is null. */
const ofClusters = (x: string, ids: string) =>
  `(${ids}::bigint[] is null or ${x}.profile_id in (
     select profile_id from profiles where account_id = $1::bigint
       and (profile_id = any(${ids}::bigint[]) or canonical_id = any(${ids}::bigint[]))))`;

/**
 * The creation times of the canonical profiles (all, or those among `ids`) in microseconds since
 * 1970 as text, rows of [profile_id, created]: from when a trend counts them.
 */
export function createdStatement(accountId: string, ids: string[] | null): Statement {
  return {
    text: `select profile_id, ${micros('created_at')} as created from profiles
     where account_id = $1::bigint and canonical_id is null and ($2::bigint[] is null or profile_id = any($2::bigint[]))`,
    values: [accountId, ids && idArray(ids)],
  };
}

/**
 * The canonical profiles (all, or those among `ids`) of which a member of the cluster has an
 * identifier in one of the keyspaces `keyspaceIds` (those that make a profile known), rows of
 * [canonical], once per such identifier.
 */
export function knownStatement(accountId: string, keyspaceIds: string[], ids: string[] | null): Statement {
  return {
    text: `select ${canonicalOfRow('i')} as canonical from profile_identifiers i ${memberJoin('i')}
     where i.account_id = $1::bigint and i.keyspace_id = any($2::bigint[]) and ${ofClusters('i', '$3')}`,
    values: [accountId, keyspaceIds, ids && idArray(ids)],
  };
}

/**
 * The spans of the number values of an attribute version over each canonical profile's cluster, as
 * a trend reads them (compileMasks): each member's replaced values (attribute_history) from when
 * they were set until they were replaced, and its current value (its own, not its cluster's) from
 * its set time on (`until` null); rows of [canonical, from, until, v], times in microseconds since
 * 1970 and values as text; other JSON types left out. For all canonical profiles, or those of `ids`.
 */
export function valueSpansStatement(accountId: string, column: Column, ids: string[] | null): Statement {
  return {
    text: `select ${canonicalOfRow('x')} as canonical, x.set_us, x.replaced_us, x.v from (
       select h.account_id, h.profile_id, ${micros('h.set_at')} as set_us, ${micros('h.replaced_at')} as replaced_us,
         h.value #>> '{}' as v
       from attribute_history h
       where h.account_id = $1::bigint and h.section_id = $2::bigint and h.version_id = $3::bigint
         and jsonb_typeof(h.value) = 'number' and ${ofClusters('h', '$4')}
       union all
       select ps.account_id, ps.profile_id, (ps.attribute_set_at ->> $3::text)::bigint::text, null,
         ps.attributes -> $3::text #>> '{}'
       from profile_sections ps
       where ps.account_id = $1::bigint and ps.section_id = $2::bigint
         and jsonb_typeof(ps.attributes -> $3::text) = 'number' and (ps.attribute_set_at ->> $3::text) is not null
         and ${ofClusters('ps', '$4')}
     ) x ${memberJoin('x')}`,
    values: [accountId, column.sectionId, column.versionId, ids && idArray(ids)],
  };
}

/**
 * The times of the events of a version over each canonical profile's cluster, in microseconds since
 * 1970 as text, rows of [canonical, time]: for all canonical profiles, or those of `ids`.
 */
export function eventTimesStatement(accountId: string, column: Column, ids: string[] | null): Statement {
  return {
    text: `select ${canonicalOfRow('e')} as canonical, ${micros('e.event_time')} as t
     from profile_events e ${memberJoin('e')}
     where e.account_id = $1::bigint and e.section_id = $2::bigint and e.version_id = $3::bigint and ${ofClusters('e', '$4')}`,
    values: [accountId, column.sectionId, column.versionId, ids && idArray(ids)],
  };
}

/** Which of the canonical profiles `ids` have an event of the version in [start, end], over their clusters. */
export async function withEventBetween(
  db: Queryable,
  accountId: string,
  term: { sectionId: string; versionId: string; start: string; end: string },
  ids: string[],
): Promise<string[]> {
  const { rows } = await db.query<{ canonical: string }>(
    `select distinct coalesce(m.canonical_id, m.profile_id) as canonical
     from profiles m join profile_events e on e.account_id = m.account_id and e.profile_id = m.profile_id
     where m.account_id = $1::bigint and (m.profile_id = any($6::bigint[]) or m.canonical_id = any($6::bigint[]))
       and e.section_id = $2::bigint and e.version_id = $3::bigint
       and e.event_time >= $4::timestamptz and e.event_time <= $5::timestamptz`,
    [accountId, term.sectionId, term.versionId, term.start, term.end, idArray(ids)],
  );
  return rows.map((r) => r.canonical);
}

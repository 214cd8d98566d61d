/**
 * Writes of section data: the attribute and tag patches of one profile or of many by key, and the
 * cluster values of merges and unmerges (section-rules.ts has the rules they follow).
 */
import { queryForAccount } from '../../store/account-statements.ts';
import { idArray } from '../../store/arrays.ts';
import { aloneOnFailure, coalescePerPool } from '../../store/coalesce.ts';
import { retryRaced, retryRacedInTransaction, type Queryable } from '../../store/pool.ts';
import {
  ALL_WRITTEN,
  clusterWrite,
  NEW_ROW,
  REPLACED,
  setTimes,
  SHOWN,
  UNCHANGED,
  WRITTEN,
  type ValueMap,
} from './section-rules.ts';

/** A patch of one canonical profile's section (patchSectionData). */
export interface SectionPatch {
  profileId: string;
  sectionId: string;
  attributes: ValueMap;
  tags?: Record<string, boolean>;
  at: Date;
}

/**
 * The statement of patchSectionData, whole: a merge patch of attributes (version id → value, null
 * clears) and tags (tag id → boolean) applied to a canonical profile's section, with the set times
 * of its values (setTimes), and the values it replaced written to the history (REPLACED). A
 * standalone profile drops cleared entries; the canonical profile of a cluster keeps them in its
 * own maps, so that they hide members' older values, and updates the cluster's values.
 */
export function patchSectionDataStatement(accountId: string, write: SectionPatch) {
  const { profileId, sectionId, attributes, tags = {}, at } = write;
  return {
    name: 'profiles.patch-section-data',
    text: `with old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and profile_id = $2::bigint and section_id = $3::bigint
     ), written as (
       update profile_sections ps set
         ${clusterWrite('$4::jsonb', '$5::jsonb', '$6::timestamptz')}
       from old o
       where ps.account_id = $1::bigint and ps.profile_id = o.profile_id and ps.section_id = o.section_id and ${UNCHANGED}
       ${WRITTEN('$6::timestamptz')}
     ), inserted as (
       -- From the profile's row: it exists (the caller located it).
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select p.account_id, p.profile_id, $3::bigint, ${NEW_ROW('$4::jsonb', '$5::jsonb', '$6::timestamptz')}
       from profiles p where p.account_id = $1::bigint and p.profile_id = $2::bigint and not exists (select 1 from old)
       on conflict do nothing
       returning 1
     ), history as (
       ${REPLACED}
     )
     select ${ALL_WRITTEN('1')}`,
    values: [accountId, profileId, sectionId, JSON.stringify(attributes), JSON.stringify(tags), at] as unknown[],
  };
}

/**
 * Applies a merge patch to a canonical profile's section (patchSectionDataStatement). `tx` is a
 * transaction's client: a write that met a concurrent one is tried again behind a savepoint
 * (retryRacedInTransaction).
 */
export async function patchSectionData(tx: Queryable, accountId: string, write: SectionPatch): Promise<void> {
  await retryRacedInTransaction(tx, () => tx.query(patchSectionDataStatement(accountId, write)));
}

/** A write by key; never through the export keyspace, which is read-only (so the key is looked up in profile_identifiers only). */
export interface PatchByKey {
  keyspaceId: string;
  key: string;
  sectionId: string;
  attributes: ValueMap;
  changedAt: Date;
}

/**
 * patchSectionData of profiles given by key, attributes only, in one call of the SQL function
 * profile_write_attributes (migration 0025; so without a transaction around it): one answer per
 * patch, in order, false where no profile has the key (nothing is written for it). The patches of
 * one section of one profile (a key given twice, or two keys of a cluster) are applied in order as
 * one; the rows are written in the order of their keys, so that two such calls cannot deadlock.
 * Tags are left as they are (a new row gets none): the common PATCH of every page view or order
 * would otherwise call profile_true_tags, a SQL function of about 5 µs, twice per row to recompute
 * maps it does not change. A function rather than a statement: Citus runs the call whole on the
 * account's worker (docs/scaling.md), where it planned the statement's data-modifying parts as
 * steps routed one by one from the coordinator.
 */
async function patchSectionDataByKeys(db: Queryable, accountId: string, patches: PatchByKey[]): Promise<boolean[]> {
  const { rows } = await queryForAccount<{ n: number }>(db, accountId, patchByKeysStatement(accountId, patches));
  const found = new Array<boolean>(patches.length).fill(false);
  for (const row of rows) found[row.n - 1] = true;
  return found;
}

/** The statement of patchSectionDataByKeys: a call of profile_write_attributes (migration 0025). */
export function patchByKeysStatement(accountId: string, patches: PatchByKey[]) {
  return {
    name: 'profiles.write-attributes',
    calls: 'profile_write_attributes',
    text: 'select n from profile_write_attributes($1::bigint, $2::bigint[], $3::jsonb, $4::bigint[], $5::jsonb, $6::jsonb) as n',
    values: [
      accountId,
      idArray(patches.map((p) => p.keyspaceId)),
      JSON.stringify(patches.map((p) => p.key)),
      idArray(patches.map((p) => p.sectionId)),
      JSON.stringify(patches.map((p) => p.attributes)),
      JSON.stringify(patches.map((p) => p.changedAt.toISOString())),
    ] as unknown[],
  };
}

/**
 * The batched attribute writes of each pool, by account: the writes of one turn of the event loop
 * go as one statement, and one commit. A write alone is tried again when it met a concurrent write
 * of its row (retryRaced); a batch that failed for that is written one patch at a time.
 */
const sectionWrites = coalescePerPool(
  aloneOnFailure((db: Queryable, accountId: string, patches: PatchByKey[]) =>
    patches.length === 1
      ? retryRaced(() => patchSectionDataByKeys(db, accountId, patches))
      : patchSectionDataByKeys(db, accountId, patches),
  ),
);

/**
 * patchSectionData of a profile given by key (attributes only), in one statement shared with the
 * other such writes of the same turn, committed on its own: false when no profile has the key.
 * A shared statement that fails is tried again one patch at a time, so that one write's failure
 * (or a deadlock with another transaction, or a concurrent write of a row) is that write's alone.
 */
export function patchSectionDataByKey(db: Queryable, accountId: string, patch: PatchByKey): Promise<boolean> {
  return sectionWrites(db, accountId, patch);
}

/**
 * Sets the cluster values of a canonical profile from its members' own values: for each
 * attribute and tag, the entry of the earliest-created member that has one. This depends only
 * on the members, so merging is commutative and associative (docs/profiles.md "Merge").
 */
export async function recomputeClusterData(
  db: Queryable,
  accountId: string,
  canonicalId: string,
  memberIds: string[],
): Promise<void> {
  await db.query(
    `with member_rows as (
       select section_id, profile_id, attributes, tags from profile_sections
       where account_id = $1::bigint and profile_id = any($2::bigint[])
     ), first_attributes as (
       select distinct on (section_id, key) section_id, key, value from member_rows, jsonb_each(attributes)
       order by section_id, key, profile_id
     ), first_tags as (
       select distinct on (section_id, key) section_id, key, value from member_rows, jsonb_each(tags)
       order by section_id, key, profile_id
     ), sections as (select distinct section_id from member_rows)
     insert into profile_sections as ps (account_id, profile_id, section_id, cluster_attributes, cluster_tags)
     select $1::bigint, $3::bigint, s.section_id,
       coalesce((select jsonb_strip_nulls(jsonb_object_agg(key, value)) from first_attributes a where a.section_id = s.section_id), '{}'),
       coalesce((select profile_true_tags(jsonb_object_agg(key, value)) from first_tags t where t.section_id = s.section_id), '{}')
     from sections s
     on conflict (account_id, profile_id, section_id) do update set
       cluster_attributes = excluded.cluster_attributes, cluster_tags = excluded.cluster_tags, updated_at = excluded.updated_at`,
    [accountId, memberIds, canonicalId],
  );
}

/**
 * Makes a profile's shown values its own and forgets cluster values (it no longer leads a cluster,
 * or keeps the data on unmerge). `keep` says which values stay its own: its `own values` (it no
 * longer leads a cluster), the `shown values` of its cluster (it keeps them on unmerge), or, for a
 * profile that goes on leading a cluster, the `shown values and clears`: also the entries cleared
 * after the merge (null, false), so that they go on hiding the values of the other members when
 * the cluster values are computed again. The values it takes over are set `at`. It replaces none,
 * so it writes no history: the canonical profile is the earliest-created member, whose own values
 * are those the cluster shows.
 */
export async function settleSectionData(
  db: Queryable,
  accountId: string,
  profileId: string,
  settle: { at: Date; keep: 'own values' | 'shown values' | 'shown values and clears' },
): Promise<void> {
  const settled = `case when not $3 then ps.attributes
         when $4 then (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(ps.attributes) where value = 'null'::jsonb) || ${SHOWN.attributes('ps')}
         else ${SHOWN.attributes('ps')} end`;
  await db.query(
    `update profile_sections ps set
       attributes = ${settled},
       attribute_set_at = ${setTimes('ps.attribute_set_at', 'ps.attributes', settled, '$5::timestamptz')},
       tags = case when not $3 then ps.tags
         when $4 then (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(ps.tags) where value = 'false'::jsonb) || profile_true_tags(${SHOWN.tags('ps')})
         else profile_true_tags(${SHOWN.tags('ps')}) end,
       cluster_attributes = null, cluster_tags = null
     where ps.account_id = $1::bigint and ps.profile_id = $2::bigint`,
    [accountId, profileId, settle.keep !== 'own values', settle.keep === 'shown values and clears', settle.at],
  );
}

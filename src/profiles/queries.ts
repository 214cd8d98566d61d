import type { SqlValues } from '../aql/compile-sql.ts';
import type { KeyspaceRow } from '../core/definitions.ts';
import { idArray } from '../store/arrays.ts';
import { aloneOnFailure, coalescePerPool } from '../store/coalesce.ts';
import { retryRaced, retryRacedInTransaction, type Queryable } from '../store/pool.ts';

export type ValueMap = Record<string, unknown>;

/** The tags a profile has: stored maps keep removed tags as false while a merge cluster needs them. */
function trueTags(tags: Record<string, boolean>): Record<string, boolean> {
  return Object.fromEntries(Object.entries(tags).filter(([, v]) => v === true));
}

export interface LocatedRow {
  profile_id: string;
  canonical_id: string;
}

/**
 * The keyspace a key is looked up in. The keys of the export keyspace are the profiles' own
 * `export_key` and have no identifier row (migration 0016): a profile is created with one row
 * fewer, and its export key is found through the unique index of profiles.
 */
export type KeyspaceOfKey = Pick<KeyspaceRow, 'keyspace_id' | 'kind'>;

/**
 * The member profile owning a key and the canonical profile of its cluster, as a relation of at
 * most one row (profile_id, canonical_id) for a lateral join: `byExportKey` (SQL boolean) finds
 * the key as an export key in profiles, otherwise in profile_identifiers by `keyspace`. Either is
 * one index lookup; the branch not taken stops at its one-time filter.
 */
const MEMBER_BY_KEY = (account: string, keyspace: string, key: string, byExportKey: string) => `(
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id from profiles p
       where ${byExportKey} and p.account_id = ${account} and p.export_key = ${key}
       union all
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id
       from profile_identifiers i join profiles p on p.account_id = i.account_id and p.profile_id = i.profile_id
       where not ${byExportKey} and i.account_id = ${account} and i.keyspace_id = ${keyspace} and i.profile_key = ${key}
       limit 1)`;

const isExport = (keyspace: KeyspaceOfKey) => keyspace.kind === 'export';

/** The member profile owning a key, and the canonical profile of its cluster. */
// The three statements of the hottest profile requests (this one, findSectionDataByKeys and
// patchSectionData) are named, so PostgreSQL parses and plans them once per connection (about a
// fifth of their cost unnamed; bench/profiles.ts). The others are not worth a plan per connection.
export async function findProfileByKey(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  key: string,
): Promise<LocatedRow | undefined> {
  const { rows } = await db.query<LocatedRow>({
    name: 'profiles.find-profile-by-key',
    text: `select f.profile_id, f.canonical_id from ${MEMBER_BY_KEY('$1::bigint', '$2::bigint', '$3', '$4::boolean')} f`,
    values: [accountId, keyspace.keyspace_id, key, isExport(keyspace)],
  });
  return rows[0];
}

interface KeyInSection {
  keyspace: KeyspaceOfKey;
  key: string;
  sectionId: string;
}
type FoundInSection = LocatedRow & SectionDataRow;

/** Profiles found by key with what each shows in a section, in one statement: one answer per key, in order (undefined where none). */
async function findSectionDataByKeys(
  db: Queryable,
  accountId: string,
  keys: KeyInSection[],
): Promise<(FoundInSection | undefined)[]> {
  const { rows } = await db.query<
    LocatedRow & { n: number; attributes: ValueMap | null; tags: Record<string, boolean> | null }
  >({
    name: 'profiles.find-section-data-by-keys',
    // One primary-key lookup per key, as in findProfilesByKeys.
    text: `select x.n::int as n, f.profile_id, f.canonical_id,
       jsonb_strip_nulls(coalesce(ps.cluster_attributes, ps.attributes)) as attributes, coalesce(ps.cluster_tags, ps.tags) as tags
     from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[]), unnest($5::boolean[]))
       with ordinality as x(keyspace_id, profile_key, section_id, by_export_key, n)
     cross join lateral ${MEMBER_BY_KEY('$1::bigint', 'x.keyspace_id', 'x.profile_key', 'x.by_export_key')} f
     left join lateral (
       -- Lateral with a limit, so that the generic plan of this named statement (which assumes 100
       -- keys) looks the row up by primary key instead of hash-joining a scan of the whole table,
       -- which it chose for accounts of under about 100,000 profiles (docs/scaling.md).
       select ps.attributes, ps.tags, ps.cluster_attributes, ps.cluster_tags from profile_sections ps
       where ps.account_id = $1::bigint and ps.profile_id = f.canonical_id and ps.section_id = x.section_id
       limit 1
     ) ps on true`,
    values: [
      accountId,
      idArray(keys.map((k) => k.keyspace.keyspace_id)),
      JSON.stringify(keys.map((k) => k.key)),
      idArray(keys.map((k) => k.sectionId)),
      `{${keys.map((k) => (isExport(k.keyspace) ? 't' : 'f')).join(',')}}`,
    ],
  });
  const found: (FoundInSection | undefined)[] = new Array(keys.length);
  for (const row of rows) {
    found[row.n - 1] = {
      profile_id: row.profile_id,
      canonical_id: row.canonical_id,
      attributes: row.attributes ?? {},
      tags: trueTags(row.tags ?? {}),
    };
  }
  return found;
}

/** The batched reads of each pool (or client), by account: the reads of one turn of the event loop go as one statement. */
const sectionReads = coalescePerPool(findSectionDataByKeys);

/** A profile found by key together with what it shows in one section, in one round trip shared with the other reads of the same turn. */
export function findSectionDataByKey(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  key: string,
  sectionId: string,
): Promise<FoundInSection | undefined> {
  return sectionReads(db, accountId, { keyspace, key, sectionId });
}

/** What segment evaluations read of a canonical profile (locateWithFacts of profiles.ts), events as [section, version, ms, data]. */
export interface FactsRow {
  sections: Record<string, ValueMap>;
  events: [string, string, number, Record<string, unknown>][];
}

/**
 * The SQL of FactsRow for the canonical profile `canonical`: the values it shows in every section,
 * and the events of the versions `$versions` (bigint[]) that any member of its cluster received.
 * Event times travel as milliseconds since 1970 (floor, as a Date keeps them). Without versions
 * (segments without event terms) the events are not read at all: a one-time filter.
 */
const FACTS = (account: string, canonical: string, versions: string) => `select
    (select coalesce(jsonb_object_agg(ps.section_id::text, jsonb_strip_nulls(coalesce(ps.cluster_attributes, ps.attributes))), '{}')
     from profile_sections ps where ps.account_id = ${account} and ps.profile_id = ${canonical}) as sections,
    (select coalesce(jsonb_agg(jsonb_build_array(e.section_id::text, e.version_id::text, floor(extract(epoch from e.event_time) * 1000), e.data)), '[]')
     from profile_events e where cardinality(${versions}) > 0 and e.account_id = ${account} and e.version_id = any(${versions})
       and e.profile_id in (select m.profile_id from profiles m where m.account_id = ${account} and (m.profile_id = ${canonical} or m.canonical_id = ${canonical}))) as events`;

/**
 * A profile found by key with what segment evaluations read of its cluster (FACTS), in one round
 * trip: an evaluation is one statement instead of four.
 */
export async function findFactsByKey(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  key: string,
  versionIds: string[],
): Promise<(LocatedRow & FactsRow) | undefined> {
  const { rows } = await db.query<LocatedRow & FactsRow>({
    name: 'profiles.find-facts-by-key',
    text: `select found.profile_id, found.canonical_id, f.sections, f.events
     from ${MEMBER_BY_KEY('$1::bigint', '$2::bigint', '$3', '$5::boolean')} found
     cross join lateral (${FACTS('$1::bigint', 'found.canonical_id', '$4::bigint[]')}) f`,
    values: [accountId, keyspace.keyspace_id, key, idArray(versionIds), isExport(keyspace)],
  });
  return rows[0];
}

/** FACTS of many canonical profiles by id (for checks over a whole population). */
export async function listFacts(
  db: Queryable,
  accountId: string,
  canonicalIds: string[],
  versionIds: string[],
): Promise<Map<string, FactsRow>> {
  const { rows } = await db.query<FactsRow & { profile_id: string }>(
    `select c.id::text as profile_id, f.sections, f.events from unnest($2::bigint[]) as c(id)
     cross join lateral (${FACTS('$1::bigint', 'c.id', '$3::bigint[]')}) f`,
    [accountId, idArray(canonicalIds), idArray(versionIds)],
  );
  return new Map(rows.map((r) => [r.profile_id, { sections: r.sections, events: r.events }]));
}

export async function insertProfile(
  db: Queryable,
  accountId: string,
  exportKey: string,
  createdAt: Date,
): Promise<string> {
  const { rows } = await db.query<{ profile_id: string }>(
    'insert into profiles (account_id, export_key, created_at) values ($1::bigint, $2, $3) returning profile_id',
    [accountId, exportKey, createdAt],
  );
  return rows[0].profile_id;
}

/** Adds an identifier; false when the key is taken. */
export async function insertIdentifier(
  db: Queryable,
  accountId: string,
  keyspaceId: string,
  key: string,
  profileId: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id) values ($1::bigint, $2::bigint, $3, $4::bigint)
     on conflict do nothing`,
    [accountId, keyspaceId, key, profileId],
  );
  return rowCount === 1;
}

export async function deleteIdentifier(
  db: Queryable,
  accountId: string,
  keyspaceId: string,
  key: string,
): Promise<void> {
  await db.query(
    'delete from profile_identifiers where account_id = $1::bigint and keyspace_id = $2::bigint and profile_key = $3',
    [accountId, keyspaceId, key],
  );
}

export interface IdentifierRow {
  keyspace_id: string;
  profile_key: string;
  profile_id: string;
}

/** The identifiers of profiles, their export keys (as keys of `exportKeyspaceId`, when the account has that keyspace) included. */
export async function listIdentifiersByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  exportKeyspaceId: string | undefined,
): Promise<IdentifierRow[]> {
  const { rows } = await db.query<IdentifierRow>(
    `select keyspace_id, profile_key, profile_id from profile_identifiers where account_id = $1::bigint and profile_id = any($2::bigint[])
     union all
     select $3::bigint, export_key, profile_id from profiles where $3::bigint is not null and account_id = $1::bigint and profile_id = any($2::bigint[])
     order by profile_id, keyspace_id`,
    [accountId, profileIds, exportKeyspaceId ?? null],
  );
  return rows;
}

/** The members of a cluster, earliest created (the canonical profile) first. */
export async function listClusterMembers(db: Queryable, accountId: string, canonicalId: string): Promise<string[]> {
  const { rows } = await db.query<{ profile_id: string }>(
    `select profile_id from profiles where account_id = $1::bigint and (profile_id = $2::bigint or canonical_id = $2::bigint) order by profile_id`,
    [accountId, canonicalId],
  );
  return rows.map((r) => r.profile_id);
}

/** The members of a cluster with their export keys, earliest created (the canonical profile) first. */
export async function listClusterMemberKeys(
  db: Queryable,
  accountId: string,
  canonicalId: string,
): Promise<{ profile_id: string; export_key: string }[]> {
  const { rows } = await db.query<{ profile_id: string; export_key: string }>(
    `select profile_id, export_key from profiles where account_id = $1::bigint and (profile_id = $2::bigint or canonical_id = $2::bigint) order by profile_id`,
    [accountId, canonicalId],
  );
  return rows;
}

/** The members of clusters, canonical first (earliest created first), locked for the transaction. */
export async function lockClusterMembers(db: Queryable, accountId: string, canonicalIds: string[]): Promise<string[]> {
  const { rows } = await db.query<{ profile_id: string }>(
    `select profile_id from profiles
     where account_id = $1::bigint and (profile_id = any($2::bigint[]) or canonical_id = any($2::bigint[]))
     order by profile_id for update`,
    [accountId, canonicalIds],
  );
  return rows.map((r) => r.profile_id);
}

export async function setCanonical(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  canonicalId: string | null,
): Promise<void> {
  await db.query(
    `update profiles set canonical_id = case when profile_id = $3::bigint then null else $3::bigint end
     where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, profileIds, canonicalId],
  );
}

/** Deletes profiles, their attribute history and their events (the other rows of this area go by their foreign keys). */
export async function deleteProfiles(db: Queryable, accountId: string, profileIds: string[]): Promise<void> {
  await db.query(
    `with history as (delete from attribute_history where account_id = $1::bigint and profile_id = any($2::bigint[])),
       events as (delete from profile_events where account_id = $1::bigint and profile_id = any($2::bigint[]))
     delete from profiles where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, profileIds],
  );
}

export async function findLockedIdentity(db: Queryable, accountId: string, hashes: Buffer[]): Promise<boolean> {
  const { rowCount } = await db.query(
    'select 1 from locked_identities where account_id = $1::bigint and identity_hash = any($2::bytea[]) limit 1',
    [accountId, hashes],
  );
  return (rowCount ?? 0) > 0;
}

export async function insertLockedIdentities(db: Queryable, accountId: string, hashes: Buffer[]): Promise<void> {
  await db.query(
    'insert into locked_identities (account_id, identity_hash) select $1::bigint, h from unnest($2::bytea[]) as h on conflict do nothing',
    [accountId, hashes],
  );
}

export interface SectionDataRow {
  attributes: ValueMap;
  tags: Record<string, boolean>;
}

/** What a profile (a canonical one) shows in a section: the cluster's values, or its own. */
export async function findSectionData(
  db: Queryable,
  accountId: string,
  profileId: string,
  sectionId: string,
): Promise<SectionDataRow> {
  const { rows } = await db.query<SectionDataRow>(
    `select jsonb_strip_nulls(coalesce(cluster_attributes, attributes)) as attributes, coalesce(cluster_tags, tags) as tags
     from profile_sections where account_id = $1::bigint and profile_id = $2::bigint and section_id = $3::bigint`,
    [accountId, profileId, sectionId],
  );
  const row = rows[0] ?? { attributes: {}, tags: {} };
  return { attributes: row.attributes, tags: trueTags(row.tags) };
}

/** What a profile shows in every section that has data: section id → values. */
export async function listSectionDataByProfile(
  db: Queryable,
  accountId: string,
  profileId: string,
): Promise<Map<string, SectionDataRow>> {
  const { rows } = await db.query<SectionDataRow & { section_id: string }>(
    `select section_id, jsonb_strip_nulls(coalesce(cluster_attributes, attributes)) as attributes, coalesce(cluster_tags, tags) as tags
     from profile_sections where account_id = $1::bigint and profile_id = $2::bigint`,
    [accountId, profileId],
  );
  return new Map(rows.map((r) => [r.section_id, { attributes: r.attributes, tags: trueTags(r.tags) }]));
}

/**
 * What profiles hold themselves in every section, not what their clusters show: profile id →
 * section id → values (a canonical profile's own maps keep entries cleared after a merge as null
 * and false, which are left out).
 */
export async function listOwnSectionData(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<Map<string, Map<string, SectionDataRow>>> {
  const { rows } = await db.query<SectionDataRow & { profile_id: string; section_id: string }>(
    `select profile_id, section_id, jsonb_strip_nulls(attributes) as attributes, profile_true_tags(tags) as tags
     from profile_sections where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, profileIds],
  );
  const byProfile = new Map<string, Map<string, SectionDataRow>>();
  for (const r of rows) {
    const sections = byProfile.get(r.profile_id) ?? new Map<string, SectionDataRow>();
    sections.set(r.section_id, { attributes: r.attributes, tags: r.tags });
    byProfile.set(r.profile_id, sections);
  }
  return byProfile;
}

export interface AttributeChangeRow {
  profile_id: string;
  section_id: string;
  version_id: string;
  value: unknown;
  changed_at: Date;
}

/**
 * The attribute changes of some profiles, oldest first; a null value is a value cleared. Each
 * value, past (attribute_history) or current (with its set time), is a change at its set time; a
 * past value that nothing was set in place of when it was replaced was cleared then. A clear of a
 * value that the profile did not hold is no change.
 */
export async function listAttributeChangesByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<AttributeChangeRow[]> {
  const { rows } = await db.query<AttributeChangeRow>(
    `with spans as (
       select h.profile_id, h.section_id, h.version_id, h.value, h.set_at, h.replaced_at from attribute_history h
       where h.account_id = $1::bigint and h.profile_id = any($2::bigint[])
       union all
       select ps.profile_id, ps.section_id, t.key::bigint, nullif(ps.attributes -> t.key, 'null'::jsonb),
         to_timestamp(0) + (t.value)::bigint * interval '1 microsecond', null
       from profile_sections ps cross join jsonb_each(ps.attribute_set_at) t
       where ps.account_id = $1::bigint and ps.profile_id = any($2::bigint[])
     )
     select profile_id, section_id, version_id::text, value, set_at as changed_at from spans
     union all
     select s.profile_id, s.section_id, s.version_id::text, null, s.replaced_at from spans s
     where s.replaced_at is not null and not exists (select 1 from spans n
       where n.profile_id = s.profile_id and n.section_id = s.section_id and n.version_id = s.version_id and n.set_at = s.replaced_at)
     order by changed_at, profile_id`,
    [accountId, profileIds],
  );
  return rows;
}

/**
 * SQL: the set times (attribute_set_at) of the entries of `next`, a section row's attributes after
 * a write, from its set times and values before (`times`, `values`; null for a new row): an entry
 * that keeps its value keeps its time, any other was set `at` (a timestamptz), in microseconds
 * since 1970. Written out in each statement rather than as a SQL function, which PostgreSQL would
 * call through its function executor for every row written.
 */
export const setTimes = (
  times: string,
  values: string,
  next: string,
  at: string,
) => `(select coalesce(jsonb_object_agg(n.key,
    case when ${values} -> n.key = n.value and ${times} ? n.key then ${times} -> n.key else ${microsJson(at)} end), '{}'::jsonb)
  from jsonb_each(${next}) n)`;

/**
 * SQL: a timestamptz as a JSON integer of microseconds since 1970, written with immutable
 * functions only (the difference to a constant, an interval's epoch, casts through text) rather
 * than extract and to_jsonb, which are stable: Citus accepts only immutable functions in an
 * upsert's DO UPDATE and in the CASE of an UPDATE on a distributed table.
 */
const microsJson = (at: string) =>
  `((extract(epoch from (${at}) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb)`;

/**
 * The history insert of a write of section rows: from the CTE `written`, which returns each row's
 * account_id, profile_id, section_id, new_values and replaced_at (the write's time), and the CTE
 * `old`, the rows as the statement read them before writing (profile_id, section_id, attributes,
 * attribute_set_at; none for a row the write inserts), the values replaced
 * (profile_replaced_values of migration 0015). A first value writes no row.
 */
const REPLACED = `insert into attribute_history (account_id, profile_id, section_id, version_id, value, set_at, replaced_at)
     select w.account_id, w.profile_id, w.section_id, r.version_id, r.value, r.set_at, w.replaced_at
     from written w join old o on o.profile_id = w.profile_id and o.section_id = w.section_id
     cross join lateral profile_replaced_values(o.attribute_set_at, o.attributes, w.new_values) r`;

/** What a write of section rows at the time `at` returns for REPLACED. */
const WRITTEN = (at: string) =>
  `returning ps.account_id, ps.profile_id, ps.section_id, ps.attributes as new_values, ${at} as replaced_at`;

/**
 * SQL, true: the check of a write's final select that its CTEs `written` (the rows updated) and
 * `inserted` (the rows created) wrote all of its `targets` rows; otherwise (a row that another
 * writer changed since `old` read it, or created after `old` found none) it fails the whole statement
 * with serialization_failure (profile_write_raced of migration 0019), so that nothing of it
 * commits, and the caller tries again (retryRaced), when `old` finds the row.
 */
const ALL_WRITTEN = (targets: string) =>
  `(select case when (select count(*) from written) + (select count(*) from inserted) < ${targets} then profile_write_raced() else true end)`;

/*
 * How a write of section rows finds the values it replaces, for the history. PostgreSQL has
 * RETURNING old only from 18 on, so each write reads its rows first, in the CTE `old`, without a
 * lock, and updates only the rows that still hold what `old` read (UNCHANGED, a condition of the
 * update that PostgreSQL checks again on the row's latest version when another writer changed it
 * meanwhile). Rows `old` did not find are inserted, unless another writer created them in between.
 * A row left alone either way fails the statement (ALL_WRITTEN), which is tried again. The same
 * form runs on Citus, which runs a statement's CTEs one after the other, each with a snapshot of its
 * own, in one transaction on the account's node: hence the comparison rather than one snapshot, an
 * update and an insert rather than an upsert (whose DO UPDATE may read no other CTE there), and
 * times of immutable functions only (microsJson).
 */

/** SQL: the row `ps` still holds the values that `o`, its row of the CTE `old`, read. */
const UNCHANGED = 'ps.attributes = o.attributes and ps.attribute_set_at = o.attribute_set_at';

/**
 * Applies a merge patch of attributes (version id → value, null clears) and tags (tag id →
 * boolean) to a canonical profile's section, with the set times of its values (setTimes), and
 * writes the values it replaced to the history (REPLACED). A standalone profile drops cleared
 * entries; the canonical profile of a cluster keeps them in its own maps, so that they hide
 * members' older values, and updates the cluster's values. `tx` is a transaction's client: a
 * write that met a concurrent one is tried again behind a savepoint (retryRacedInTransaction).
 */
export async function patchSectionData(
  tx: Queryable,
  accountId: string,
  profileId: string,
  sectionId: string,
  attributes: ValueMap,
  tags: Record<string, boolean>,
  changedAt: Date,
): Promise<void> {
  const next =
    'case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || $4::jsonb) else ps.attributes || $4::jsonb end';
  await retryRacedInTransaction(tx, () =>
    tx.query({
      name: 'profiles.patch-section-data',
      text: `with old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and profile_id = $2::bigint and section_id = $3::bigint
     ), written as (
       update profile_sections ps set
         attributes = ${next},
         attribute_set_at = ${setTimes('ps.attribute_set_at', 'ps.attributes', next, '$6::timestamptz')},
         cluster_attributes = jsonb_strip_nulls(ps.cluster_attributes || $4::jsonb),
         tags = case when ps.cluster_tags is null then profile_true_tags(ps.tags || $5::jsonb) else ps.tags || $5::jsonb end,
         cluster_tags = profile_true_tags(ps.cluster_tags || $5::jsonb),
         updated_at = now()
       from old o
       where ps.account_id = $1::bigint and ps.profile_id = o.profile_id and ps.section_id = o.section_id and ${UNCHANGED}
       ${WRITTEN('$6::timestamptz')}
     ), inserted as (
       -- From the profile's row: it exists (the caller located it).
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select p.account_id, p.profile_id, $3::bigint, jsonb_strip_nulls($4::jsonb), profile_true_tags($5::jsonb), ${setTimes('null::jsonb', 'null::jsonb', 'jsonb_strip_nulls($4::jsonb)', '$6::timestamptz')}
       from profiles p where p.account_id = $1::bigint and p.profile_id = $2::bigint and not exists (select 1 from old)
       on conflict do nothing
       returning 1
     ), history as (
       ${REPLACED}
     )
     select ${ALL_WRITTEN('1')}`,
      values: [accountId, profileId, sectionId, JSON.stringify(attributes), JSON.stringify(tags), changedAt],
    }),
  );
}

/** A write by key; never through the export keyspace, which is read-only (so the key is looked up in profile_identifiers only). */
interface PatchByKey {
  keyspaceId: string;
  key: string;
  sectionId: string;
  attributes: ValueMap;
  changedAt: Date;
}

/**
 * patchSectionData of profiles given by key, attributes only, in one statement (so without a
 * transaction around it): one answer per patch, in order, false where no profile has the key
 * (nothing is written for it). The patches of one section of one profile (a key given twice, or
 * two keys of a cluster) are applied in order as one, since an upsert may touch a row only once;
 * the rows are written in the order of their keys, so that two such statements cannot deadlock.
 * Tags are left as they are (a new row gets none): the common PATCH of every page view or order
 * would otherwise call profile_true_tags, a SQL function of about 5 µs, twice per row to recompute
 * maps it does not change.
 */
async function patchSectionDataByKeys(db: Queryable, accountId: string, patches: PatchByKey[]): Promise<boolean[]> {
  const { rows } = await db.query<{ n: number }>({
    name: 'profiles.patch-section-data-by-keys',
    text: `with located as (
       select x.n, x.section_id, x.patch, x.changed_at::timestamptz as changed_at, f.canonical_id
       from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[]), jsonb_array_elements($5::jsonb), jsonb_array_elements_text($6::jsonb))
         with ordinality as x(keyspace_id, profile_key, section_id, patch, changed_at, n)
       cross join lateral (
         select coalesce(p.canonical_id, p.profile_id) as canonical_id
         from profile_identifiers i join profiles p on p.account_id = i.account_id and p.profile_id = i.profile_id
         where i.account_id = $1::bigint and i.keyspace_id = x.keyspace_id and i.profile_key = x.profile_key
         limit 1
       ) f
     ), merged as (
       -- The writes of one section row in the batch are one write at the time of the last.
       select l.canonical_id, l.section_id, max(l.changed_at) as changed_at,
         coalesce(jsonb_object_agg(e.key, e.value order by l.n) filter (where e.key is not null), '{}'::jsonb) as patch
       from located l left join lateral jsonb_each(l.patch) e on true
       group by l.canonical_id, l.section_id
     ), old as (
       select ps.profile_id, ps.section_id, ps.attributes, ps.attribute_set_at from merged m
       join profile_sections ps on ps.account_id = $1::bigint and ps.profile_id = m.canonical_id and ps.section_id = m.section_id
     ), written as (
       update profile_sections ps set
         attributes = case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || m.patch) else ps.attributes || m.patch end,
         attribute_set_at = ${setTimes('ps.attribute_set_at', 'ps.attributes', 'case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || m.patch) else ps.attributes || m.patch end', 'm.changed_at')},
         cluster_attributes = case when ps.cluster_attributes is not null then jsonb_strip_nulls(ps.cluster_attributes || m.patch) end,
         updated_at = now()
       from merged m join old o on o.profile_id = m.canonical_id and o.section_id = m.section_id
       where ps.account_id = $1::bigint and ps.profile_id = m.canonical_id and ps.section_id = m.section_id and ${UNCHANGED}
       ${WRITTEN('m.changed_at')}
     ), inserted as (
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select $1::bigint, m.canonical_id, m.section_id, jsonb_strip_nulls(m.patch), '{}'::jsonb, ${setTimes('null::jsonb', 'null::jsonb', 'jsonb_strip_nulls(m.patch)', 'm.changed_at')}
       from merged m
       where not exists (select 1 from old o where o.profile_id = m.canonical_id and o.section_id = m.section_id)
       order by m.canonical_id, m.section_id
       on conflict do nothing
       returning 1
     ), history as (
       ${REPLACED}
     )
     select n::int as n from located where ${ALL_WRITTEN('(select count(*) from merged)')}`,
    values: [
      accountId,
      idArray(patches.map((p) => p.keyspaceId)),
      JSON.stringify(patches.map((p) => p.key)),
      idArray(patches.map((p) => p.sectionId)),
      JSON.stringify(patches.map((p) => p.attributes)),
      JSON.stringify(patches.map((p) => p.changedAt.toISOString())),
    ],
  });
  const found = new Array<boolean>(patches.length).fill(false);
  for (const row of rows) found[row.n - 1] = true;
  return found;
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
 * or keeps the data on unmerge). `keepCleared`, for a profile that goes on leading a cluster, also
 * keeps the entries cleared after the merge (null, false), so that they go on hiding the values of
 * the other members when the cluster values are computed again. The values it takes over are set
 * `at`. It replaces none, so it writes no history: the canonical profile is the earliest-created
 * member, whose own values are those the cluster shows.
 */
export async function settleSectionData(
  db: Queryable,
  accountId: string,
  profileId: string,
  at: Date,
  keepClusterValues: boolean,
  keepCleared = false,
): Promise<void> {
  const settled = `case when not $3 then attributes
         when $4 then (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(attributes) where value = 'null'::jsonb) || jsonb_strip_nulls(coalesce(cluster_attributes, attributes))
         else jsonb_strip_nulls(coalesce(cluster_attributes, attributes)) end`;
  await db.query(
    `update profile_sections set
       attributes = ${settled},
       attribute_set_at = ${setTimes('attribute_set_at', 'attributes', settled, '$5::timestamptz')},
       tags = case when not $3 then tags
         when $4 then (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(tags) where value = 'false'::jsonb) || profile_true_tags(coalesce(cluster_tags, tags))
         else profile_true_tags(coalesce(cluster_tags, tags)) end,
       cluster_attributes = null, cluster_tags = null
     where account_id = $1::bigint and profile_id = $2::bigint`,
    [accountId, profileId, keepClusterValues, keepCleared, at],
  );
}

export interface EventRow {
  event_time: Date;
  created_at: Date;
  version_id: string;
  correlation_id: string;
  data: unknown;
}

/**
 * Appends events of one profile, having locked it (`for key share`, as a foreign key's check would)
 * for the rest of the transaction: a delete of the profile waits for the commit and then deletes
 * the events too (migration 0017). False, with nothing written, when the profile is gone.
 */
export async function insertEvents(
  db: Queryable,
  accountId: string,
  profileId: string,
  sectionId: string,
  events: { eventTime: string; versionId: string; correlationId: string; data: unknown }[],
  createdAt: Date,
): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    `with profile as (select profile_id from profiles where account_id = $1::bigint and profile_id = $2::bigint for key share),
     inserted as (
       insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
       select $1::bigint, p.profile_id, $3::bigint, e.version_id, e.event_time, $8, e.correlation_id, e.data
       from profile p cross join unnest($4::bigint[], $5::timestamptz[], $6::text[], $7::jsonb[]) as e(version_id, event_time, correlation_id, data)
       returning 1
     )
     select exists (select 1 from profile) as found`,
    [
      accountId,
      profileId,
      sectionId,
      events.map((e) => e.versionId),
      events.map((e) => e.eventTime),
      events.map((e) => e.correlationId),
      events.map((e) => JSON.stringify(e.data)),
      createdAt,
    ],
  );
  return rows[0].found;
}

/** A cluster's events in a section, newest first; `versionIds` null for every version. */
export async function listEventsByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  sectionId: string,
  versionIds: string[] | null,
  limit: number,
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `select event_time, created_at, version_id::text, correlation_id, data from profile_events
     where account_id = $1::bigint and profile_id = any($2::bigint[]) and section_id = $3::bigint
       and ($4::bigint[] is null or version_id = any($4::bigint[]))
     order by event_time desc, event_id desc limit $5`,
    [accountId, profileIds, sectionId, versionIds, limit],
  );
  return rows;
}

export interface SectionEventRow extends EventRow {
  profile_id: string;
  section_id: string;
}

/** Every event of some profiles, in every section, oldest first. */
export async function listSectionEventsByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<SectionEventRow[]> {
  const { rows } = await db.query<SectionEventRow>(
    `select profile_id, section_id, event_time, created_at, version_id::text, correlation_id, data from profile_events
     where account_id = $1::bigint and profile_id = any($2::bigint[]) order by event_time, event_id`,
    [accountId, profileIds],
  );
  return rows;
}

/**
 * The events of a cluster as a relation, for statements over many profiles (exports): those of the
 * canonical profile whose id is the SQL `profile` and of its members, of the given versions, with
 * an event time from `from` (inclusive) to `to` (exclusive). `account` is the placeholder of the
 * account id. Columns: section_id, event_id, version_id, event_time, created_at, correlation_id, data.
 */
export function clusterEventsRelation(
  values: SqlValues,
  target: { account: string; profile: string; versionIds: string[]; from: Date; to: Date },
): string {
  const { account, profile } = target;
  return `select e.section_id, e.event_id, e.version_id, e.event_time, e.created_at, e.correlation_id, e.data from profile_events e
    where e.account_id = ${account}
      and e.profile_id = any(array(select ${profile} union all select m.profile_id from profiles m where m.account_id = ${account} and m.canonical_id = ${profile}))
      and e.version_id = any(${values.add(target.versionIds, 'bigint[]')})
      and e.event_time >= ${values.add(target.from, 'timestamptz')} and e.event_time < ${values.add(target.to, 'timestamptz')}`;
}

// ---- Bulk statements, for imports: one statement per batch of rows ----

export async function findProfilesByKeys(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  keys: string[],
): Promise<{ profile_key: string; canonical_id: string }[]> {
  const { rows } = await db.query<{ profile_key: string; canonical_id: string }>(
    // One primary-key lookup per key (the lateral subquery with its limit cannot be flattened into a
    // join). With `profile_key = any(…)` the planner chose, by the table's size, between index
    // lookups and a (parallel) scan of the whole table for a batch of a few thousand keys.
    `select k.key as profile_key, x.canonical_id
     from (select distinct jsonb_array_elements_text($3::jsonb) as key) k
     cross join lateral ${MEMBER_BY_KEY('$1::bigint', '$2::bigint', 'k.key', '$4::boolean')} x`,
    [accountId, keyspace.keyspace_id, JSON.stringify(keys), isExport(keyspace)],
  );
  return rows;
}

export async function hasLockedIdentities(db: Queryable, accountId: string): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>(
    'select exists (select 1 from locked_identities where account_id = $1::bigint) as any',
    [accountId],
  );
  return rows[0].any;
}

export async function listLockedIdentities(db: Queryable, accountId: string, hashes: Buffer[]): Promise<Buffer[]> {
  const { rows } = await db.query<{ identity_hash: Buffer }>(
    'select identity_hash from locked_identities where account_id = $1::bigint and identity_hash = any($2::bytea[])',
    [accountId, hashes],
  );
  return rows.map((r) => r.identity_hash);
}

/** Creates profiles with the given export keys; returns export key → profile id. */
export async function insertProfilesBulk(
  db: Queryable,
  accountId: string,
  exportKeys: string[],
  createdAt: Date,
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ profile_id: string; export_key: string }>(
    `insert into profiles (account_id, export_key, created_at) select $1::bigint, k, $3 from jsonb_array_elements_text($2::jsonb) as k
     returning profile_id, export_key`,
    [accountId, JSON.stringify(exportKeys), createdAt],
  );
  return new Map(rows.map((r) => [r.export_key, r.profile_id]));
}

/** Adds identifiers (a key taken meanwhile by another writer fails the statement, and so the batch). */
export async function insertIdentifiersBulk(
  db: Queryable,
  accountId: string,
  identifiers: { keyspaceId: string; key: string; profileId: string }[],
): Promise<void> {
  await db.query(
    `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
     select $1::bigint, k, pk, p from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[])) as x(k, pk, p)`,
    [
      accountId,
      idArray(identifiers.map((i) => i.keyspaceId)),
      JSON.stringify(identifiers.map((i) => i.key)),
      idArray(identifiers.map((i) => i.profileId)),
    ],
  );
}

/** What canonical profiles show in one section: profile id → values. */
export async function listSectionDataByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  sectionId: string,
): Promise<Map<string, SectionDataRow>> {
  const { rows } = await db.query<SectionDataRow & { profile_id: string }>(
    `select profile_id, jsonb_strip_nulls(coalesce(cluster_attributes, attributes)) as attributes, coalesce(cluster_tags, tags) as tags
     from profile_sections where account_id = $1::bigint and profile_id = any($2::bigint[]) and section_id = $3::bigint`,
    [accountId, profileIds, sectionId],
  );
  return new Map(rows.map((r) => [r.profile_id, { attributes: r.attributes, tags: trueTags(r.tags) }]));
}

/** A value as jsonb_strip_nulls leaves it: without the null fields of its objects, at any depth (arrays keep their nulls). */
function stripNulls(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(stripNulls);
  const stripped: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) if (field !== null) stripped[key] = stripNulls(field);
  return stripped;
}

/**
 * The section data of profiles created in the caller's transaction, which have none yet (the insert
 * of patchSectionDataBulk): first values, set `at`. What that insert computes per row in SQL (nulls
 * stripped, true tags, every value's set time) is built here: in SQL it was most of the database's
 * work in an import (docs/benchmarks.md "Imports").
 */
export async function insertSectionDataBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  rows: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
): Promise<void> {
  if (rows.length === 0) return;
  // The set time as setTimes writes it: microseconds since the epoch.
  const micros = String(at.getTime() * 1000);
  // The three JSON arrays written as text, without a map per row for each (half the CPU of building them).
  let attributes = '';
  let times = '';
  let tags = '';
  for (const row of rows) {
    let values = '';
    let setAt = '';
    for (const versionId in row.attributes) {
      const value = row.attributes[versionId];
      // As JSON.stringify of the map and jsonb_strip_nulls left them: no entry for these.
      if (value === null || value === undefined) continue;
      const key = JSON.stringify(versionId);
      values += `${values ? ',' : ''}${key}:${JSON.stringify(stripNulls(value))}`;
      setAt += `${setAt ? ',' : ''}${key}:${micros}`;
    }
    let trueTags = '';
    for (const tagId in row.tags)
      if (row.tags[tagId] === true) trueTags += `${trueTags ? ',' : ''}${JSON.stringify(tagId)}:true`;
    attributes += `${attributes ? ',' : ''}{${values}}`;
    times += `${times ? ',' : ''}{${setAt}}`;
    tags += `${tags ? ',' : ''}{${trueTags}}`;
  }
  await db.query(
    `insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
     select $1::bigint, p, $2::bigint, a, t, s
     from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb), jsonb_array_elements($6::jsonb)) as x(p, a, t, s)`,
    [accountId, sectionId, idArray(rows.map((p) => p.profileId)), `[${attributes}]`, `[${tags}]`, `[${times}]`],
  );
}

/** patchSectionData for many canonical profiles of one section at once, at the time `at`. */
export async function patchSectionDataBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  patches: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
): Promise<void> {
  if (patches.length === 0) return;
  await db.query(
    `with patch as (select * from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb)) as x(p, a, t)),
     old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and section_id = $2::bigint and profile_id = any($3::bigint[])
     ),
     written as (
       update profile_sections ps set
         attributes = case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || patch.a) else ps.attributes || patch.a end,
         attribute_set_at = ${setTimes('ps.attribute_set_at', 'ps.attributes', 'case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || patch.a) else ps.attributes || patch.a end', '$6::timestamptz')},
         cluster_attributes = jsonb_strip_nulls(ps.cluster_attributes || patch.a),
         tags = case when ps.cluster_tags is null then profile_true_tags(ps.tags || patch.t) else ps.tags || patch.t end,
         cluster_tags = profile_true_tags(ps.cluster_tags || patch.t),
         updated_at = now()
       from patch join old o on o.profile_id = patch.p
       where ps.account_id = $1::bigint and ps.section_id = $2::bigint and ps.profile_id = patch.p and ${UNCHANGED}
       ${WRITTEN('$6::timestamptz')}
     ), history as (
       ${REPLACED}
     ), inserted as (
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select $1::bigint, p, $2::bigint, jsonb_strip_nulls(a), profile_true_tags(t), ${setTimes('null::jsonb', 'null::jsonb', 'jsonb_strip_nulls(a)', '$6::timestamptz')} from patch
       where p not in (select profile_id from old)
       on conflict do nothing
       returning 1
     )
     select ${ALL_WRITTEN('(select count(*) from patch)')}`,
    [
      accountId,
      sectionId,
      idArray(patches.map((p) => p.profileId)),
      JSON.stringify(patches.map((p) => p.attributes)),
      JSON.stringify(patches.map((p) => p.tags)),
      at,
    ],
  );
}

/** Serialises the creation of profiles by key in an account for the rest of the transaction, so that two writers never create the same key. */
export async function lockProfileCreation(db: Queryable, accountId: string): Promise<void> {
  await db.query(`select pg_advisory_xact_lock(hashtextextended('profile-creation', $1::bigint))`, [accountId]);
}

/**
 * Locks profiles that events are about to be written to, as a foreign key's check would (`for key
 * share`, until the transaction ends) but in one statement and in profile id order (the order
 * deletes and merges lock clusters in, so no cycle of waits); answers those that still exist.
 */
export async function lockEventProfiles(db: Queryable, accountId: string, profileIds: string[]): Promise<string[]> {
  const { rows } = await db.query<{ profile_id: string }>(
    // Ordered by the column, not by the text it is answered as (which would be another order).
    'select p.profile_id::text from profiles p where p.account_id = $1::bigint and p.profile_id = any($2::bigint[]) order by p.profile_id for key share',
    [accountId, idArray(profileIds)],
  );
  return rows.map((r) => r.profile_id);
}

/** Appends events of many profiles in one section: each row names its profile, locked before with lockEventProfiles. */
export async function insertEventsBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  events: { profileId: string; versionId: string; eventTime: Date; correlationId: string; data: unknown }[],
  createdAt: Date,
): Promise<void> {
  await db.query(
    `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select $1::bigint, e.p, $2::bigint, e.v, e.t, $4, e.c, e.d
     from json_to_recordset($3::json) as e(p bigint, v bigint, t timestamptz, c text, d jsonb)`,
    [
      accountId,
      sectionId,
      JSON.stringify(
        events.map((e) => ({ p: e.profileId, v: e.versionId, t: e.eventTime, c: e.correlationId, d: e.data })),
      ),
      createdAt,
    ],
  );
}

/** Erases the profiles of a deleted account, with everything kept of them. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from profile_events where account_id = $1::bigint', [accountId]);
  await db.query('delete from attribute_history where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_sections where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_identifiers where account_id = $1::bigint', [accountId]);
  await db.query('delete from locked_identities where account_id = $1::bigint', [accountId]);
  await db.query('delete from profiles where account_id = $1::bigint', [accountId]);
}

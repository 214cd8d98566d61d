/**
 * Statements of profiles and their identifiers: keys, clusters, locked identities.
 */
import type { KeyspaceRow } from '../../core/definitions.ts';
import type { Queryable } from '../../store/pool.ts';

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
export const MEMBER_BY_KEY = (account: string, keyspace: string, key: string, byExportKey: string) => `(
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id from profiles p
       where ${byExportKey} and p.account_id = ${account} and p.export_key = ${key}
       union all
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id
       from profile_identifiers i join profiles p on p.account_id = i.account_id and p.profile_id = i.profile_id
       where not ${byExportKey} and i.account_id = ${account} and i.keyspace_id = ${keyspace} and i.profile_key = ${key}
       limit 1)`;

export const isExport = (keyspace: KeyspaceOfKey) => keyspace.kind === 'export';

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

/** The members of a cluster with the time each was merged (null for the canonical profile), canonical first. */
export async function listClusterMembersMerged(
  db: Queryable,
  accountId: string,
  canonicalId: string,
): Promise<{ profile_id: string; merged_at: Date | null }[]> {
  const { rows } = await db.query<{ profile_id: string; merged_at: Date | null }>(
    `select profile_id, merged_at from profiles where account_id = $1::bigint and (profile_id = $2::bigint or canonical_id = $2::bigint) order by profile_id`,
    [accountId, canonicalId],
  );
  return rows;
}

/** The export keys of profiles: profile id → export key. */
export async function exportKeysOf(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ profile_id: string; export_key: string }>(
    'select profile_id::text, export_key from profiles where account_id = $1::bigint and profile_id = any($2::bigint[])',
    [accountId, profileIds],
  );
  return new Map(rows.map((r) => [r.profile_id, r.export_key]));
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

/**
 * Makes `canonicalId` the canonical profile of `profileIds`; a member keeps the time it was merged,
 * one that stops being a profile of its own is merged `at`.
 */
export async function setCanonical(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  canonicalId: string | null,
  at: Date,
): Promise<void> {
  await db.query(
    `update profiles set canonical_id = case when profile_id = $3::bigint then null else $3::bigint end,
       merged_at = case when profile_id = $3::bigint then null else coalesce(merged_at, $4::timestamptz) end
     where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, profileIds, canonicalId, at],
  );
}

/** Deletes profiles, their attribute history and their events with their sums (the other rows of this area go by their foreign keys). */
export async function deleteProfiles(db: Queryable, accountId: string, profileIds: string[]): Promise<void> {
  await db.query(
    `with history as (delete from attribute_history where account_id = $1::bigint and profile_id = any($2::bigint[])),
       events as (delete from profile_events where account_id = $1::bigint and profile_id = any($2::bigint[])),
       summaries as (delete from profile_event_summaries where account_id = $1::bigint and profile_id = any($2::bigint[]))
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

/** Erases the profiles of a deleted account, with everything kept of them. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from profile_events where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_event_summaries where account_id = $1::bigint', [accountId]);
  await db.query('delete from attribute_history where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_sections where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_identifiers where account_id = $1::bigint', [accountId]);
  await db.query('delete from locked_identities where account_id = $1::bigint', [accountId]);
  await db.query('delete from profiles where account_id = $1::bigint', [accountId]);
  await db.query('delete from profile_changes where account_id = $1::bigint', [accountId]);
  await db.query('delete from projection_marks where account_id = $1::bigint', [accountId]);
  await db.query('delete from projection_prunes where account_id = $1::bigint', [accountId]);
}

/**
 * The profiles as relations for the statements of other areas (exports, segments, consents), which
 * read profiles over many rows in one statement: SQL text that such a statement embeds, so that it
 * names this area's functions rather than its tables (docs/architecture.md "Layers"). Each is a
 * fragment of a statement, not one, hence a file beside queries.ts. `account` is the placeholder of
 * the account id; a `profile` the SQL of a profile id; the statement binds the values.
 *
 * Each relation is a plain sub-select (no grouping, limit or ordering), which PostgreSQL pulls up
 * into the statement that embeds it: the plans are those of the tables named directly.
 */
import { SHOWN } from './queries/section-rules.ts';

/**
 * The account's canonical profiles (a merge cluster is its canonical profile), as whole rows of
 * profiles, so that a predicate compiled over `p` (compilePredicate) holds on the relation aliased
 * `p`. Among the columns: profile_id, export_key, created_at.
 */
export function canonicalProfilesSql(account: string): string {
  return `select p.* from profiles p where p.account_id = ${account} and p.canonical_id is null`;
}

/**
 * The account's profiles in one section (`section`, the SQL of its id), as whole rows of
 * profile_sections: what a predicate compiled with `sectionRow` reads as `p`, for an account
 * without merge clusters (compilePredicate).
 */
export function sectionRowsSql(account: string, section: string): string {
  return `select p.* from profile_sections p where p.account_id = ${account} and p.section_id = ${section}`;
}

/**
 * What the canonical profile whose id is `profile` shows in the section `section` (its cluster's
 * values): attrs (attribute version id → value), tags (tag id → true), updated_at; no row where it
 * has no data there.
 */
export function sectionValuesSql(account: string, profile: string, section: string): string {
  return `select ${sectionValuesOf('ps')}
        from profile_sections ps where ps.account_id = ${account} and ps.profile_id = ${profile} and ps.section_id = ${section}`;
}

/** The attributes that `row`, a row of sectionRowsSql, shows: its cluster's on a merge cluster's canonical profile. */
export function shownAttributesOf(row: string): string {
  return SHOWN.storedAttributes(row);
}

/**
 * The columns of sectionValuesSql (attrs, tags, updated_at) of `row`, a row of sectionRowsSql that
 * a statement has joined itself: null where the profile has no row there.
 */
export function sectionValuesOf(row: string): string {
  return `${shownAttributesOf(row)} as attrs, ${SHOWN.tags(row)} as tags, ${row}.updated_at`;
}

/**
 * The members of the account's merge clusters (profiles merged into another; few), with the
 * canonical profile of their cluster: profile_id, canonical_id. A profile that is not in it is its
 * own cluster's canonical profile.
 */
export function clusterMembersSql(account: string): string {
  return `select m.profile_id, m.canonical_id from profiles m where m.account_id = ${account} and m.canonical_id is not null`;
}

/**
 * Every profile of some clusters, those of the canonical profiles whose ids are the SQL array
 * `canonicalIds`, with its cluster's canonical profile: profile_id, canonical_id. Without
 * `canonicalIds`, every profile of the account.
 */
export function clusterProfilesSql(account: string, canonicalIds?: string): string {
  const which =
    canonicalIds === undefined
      ? ''
      : ` and (m.profile_id = any(${canonicalIds}) or m.canonical_id = any(${canonicalIds}))`;
  return `select m.profile_id, coalesce(m.canonical_id, m.profile_id) as canonical_id from profiles m where m.account_id = ${account}${which}`;
}

/**
 * The canonical profiles known by an identifier in one of the keyspaces (`keyspaceIds`, the SQL of
 * a bigint[]): profile_id, once per such identifier of a member of its cluster. `clusters: false`,
 * for an account without merge clusters, leaves out the mapping of members to their canonical
 * profile.
 */
export function identifiedProfilesSql(account: string, keyspaceIds: string, options: { clusters: boolean }): string {
  return options.clusters
    ? `select coalesce(m.canonical_id, i.profile_id) as profile_id from profile_identifiers i
       left join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id and m.canonical_id is not null
       where i.account_id = ${account} and i.keyspace_id = any(${keyspaceIds})`
    : `select i.profile_id from profile_identifiers i where i.account_id = ${account} and i.keyspace_id = any(${keyspaceIds})`;
}

/**
 * Whether the canonical profile whose id is `profile` is known: a member of its cluster has an
 * identifier in one of the keyspaces (`keyspaceIds`, the SQL of a bigint[]). The forms differ in
 * their plans alone: `set` (a semi-join over the account's identifiers, for a count), `perProfile`
 * (a look-up of the cluster's members and their identifiers by index, for a predicate judged for
 * each profile a statement reads), and `own` (the profile's own identifiers, for an account
 * without merge clusters).
 */
export function knownSql(
  account: string,
  profile: string,
  keyspaceIds: string,
  form: 'set' | 'perProfile' | 'own',
): string {
  switch (form) {
    case 'set':
      return `exists (select 1 from profile_identifiers i join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id
      where i.account_id = ${account} and (m.profile_id = ${profile} or m.canonical_id = ${profile}) and i.keyspace_id = any(${keyspaceIds}))`;
    case 'perProfile':
      return `exists (select 1 from profile_identifiers i where i.account_id = ${account}
    and i.profile_id = any(array(select ${profile} union all select m.profile_id from profiles m where m.account_id = ${account} and m.canonical_id = ${profile}))
    and i.keyspace_id = any(${keyspaceIds}))`;
    case 'own':
      return `exists (select 1 from profile_identifiers i
      where i.account_id = ${account} and i.profile_id = ${profile} and i.keyspace_id = any(${keyspaceIds}))`;
  }
}

import crypto from 'node:crypto';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { keyspaceForProfileAccess, PROFILE_KEYSPACE_PROBLEMS } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
import { KEY_PROBLEMS, normaliseKey } from './keys.ts';
import * as q from './queries.ts';
import type { UniqueIdentifier } from './schemas.ts';

/**
 * Finding profiles (docs/profiles.md): a profile located through one of its unique identifiers
 * (a keyspace and a key, or its export key), refused when it is missing, locked or read through the
 * read-only export keyspace, and read with its section values or facts.
 */

/** A profile found through one of its unique identifiers. */
export interface Located {
  keyspace: KeyspaceRow;
  key: string;
  /** The member profile that owns the identifier. */
  profileId: string;
  /** The canonical profile of its cluster, which holds the data. */
  canonicalId: string;
}

/** The keyed hash that remains of a locked identifier (SPEC §3.2). */
export function identityHash(scope: AccountScope, keyspaceId: string, key: string): Buffer {
  return crypto.createHmac('sha256', scope.secret).update(`${scope.accountId}\n${keyspaceId}\n${key}`).digest();
}

/** Whether any of the keyed hashes (identityHash) is a locked identity (SPEC §3.2). */
export function isLockedIdentity(db: Queryable, scope: AccountScope, hashes: Buffer[]): Promise<boolean> {
  return q.findLockedIdentity(db, scope.accountId, hashes);
}

/** What `identifierOf` can answer: the keyspace's (404, 403) and the key's (400). */
export const IDENTIFIER_PROBLEMS: readonly ProblemCode[] = [...PROFILE_KEYSPACE_PROBLEMS, ...KEY_PROBLEMS];

/** What `locate` and its variants can answer: `identifierOf`'s, no profile (404), a locked one (410). */
export const LOCATE_PROBLEMS: readonly ProblemCode[] = [...IDENTIFIER_PROBLEMS, 'AUD-1201', 'AUD-1202'];

/** A keyspace and a normalised key from a path or body, checked for API access. */
export function identifierOf(
  scope: AccountScope,
  id: UniqueIdentifier,
  field = 'profile_key',
): { keyspace: KeyspaceRow; key: string } {
  const keyspace = keyspaceForProfileAccess(scope.defs, id.keyspace_discriminator);
  return { keyspace, key: normaliseKey(keyspace.kind, id.profile_key, field) };
}

export async function refuseLocked(
  db: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<void> {
  if (await q.findLockedIdentity(db, scope.accountId, [identityHash(scope, keyspace.keyspace_id, key)])) {
    throw new Problem('AUD-1202', `The profile with ${keyspace.discriminator} key "${key}" is locked`);
  }
}

/** Finds a profile by unique identifier with what it shows in a section, in one round trip; 404 or 410 as `locate`. */
export async function locateWithSectionData(
  db: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  section: SectionDefs,
): Promise<{ located: Located; data: q.SectionDataRow }> {
  const { keyspace, key } = identifierOf(scope, id);
  const found = await q.findSectionDataByKey(db, scope.accountId, keyspace, key, section.id);
  if (found)
    return { located: { keyspace, key, profileId: found.profile_id, canonicalId: found.canonical_id }, data: found };
  await refuseLocked(db, scope, keyspace, key);
  throw new Problem('AUD-1201', `No profile with ${keyspace.discriminator} key "${key}"`);
}

/** Finds a profile by unique identifier; 404 when there is none, 410 when it was locked. */
export async function locate(db: Queryable, scope: AccountScope, id: UniqueIdentifier): Promise<Located> {
  const { keyspace, key } = identifierOf(scope, id);
  return locateKey(db, scope, keyspace, key);
}

/**
 * Finds a profile by unique identifier, for callers that go on without one: undefined when there
 * is none, 410 when it was locked.
 */
export async function findProfile(
  db: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
): Promise<Located | undefined> {
  const { keyspace, key } = identifierOf(scope, id);
  return findKey(db, scope, keyspace, key);
}

/** The profile of a normalised key (identifierOf); undefined when there is none, 410 when it was locked. */
async function findKey(
  db: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<Located | undefined> {
  const found = await findByKey(db, scope, keyspace, key);
  if (!found) await refuseLocked(db, scope, keyspace, key);
  return found;
}

/** The profile of a normalised key (identifierOf); undefined when there is none. */
export async function findByKey(
  db: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<Located | undefined> {
  const found = await q.findProfileByKey(db, scope.accountId, keyspace, key);
  return found && { keyspace, key, profileId: found.profile_id, canonicalId: found.canonical_id };
}

/** locate of a normalised key (identifierOf). */
export async function locateKey(
  db: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<Located> {
  const found = await findKey(db, scope, keyspace, key);
  if (found) return found;
  throw new Problem('AUD-1201', `No profile with ${keyspace.discriminator} key "${key}"`);
}

/**
 * Finds a profile by its export key, the key the service gave it (SPEC §2.1); 404 when there is
 * none, 410 when it was locked. Routes that name the export key itself (the single profile
 * export) need no API access through the export keyspace, which only profile routes check.
 */
export async function locateByExportKey(db: Queryable, scope: AccountScope, exportKey: string): Promise<Located> {
  const keyspace = exportKeyspace(scope);
  if (!keyspace) throw new Problem('AUD-1201', `No profile with export key "${exportKey}"`);
  return locateKey(db, scope, keyspace, exportKey);
}

/** What `refuseReadOnly` can answer. */
export const READ_ONLY_PROBLEMS: readonly ProblemCode[] = ['AUD-1203'];

/** Refuses writes through the export keyspace, which is read-only for profile data (SPEC §2.1). */
export function refuseReadOnly(keyspace: KeyspaceRow): void {
  if (keyspace.kind === 'export') {
    throw new Problem(
      'AUD-1203',
      `The keyspace "${keyspace.discriminator}" is not authorised to update profiles: it is read-only for profile data`,
    );
  }
}

/** The current (latest, not deprecated) version of an attribute, by discriminator. */
export function currentVersionId(section: SectionDefs, attributeDiscriminator: string): string | undefined {
  const attribute = section.attributes.find((a) => a.discriminator === attributeDiscriminator);
  const versions = attribute?.versions.filter((v) => v.deprecated_at === null) ?? [];
  return versions.at(-1)?.id;
}

/** The account's export keyspace, whose keys are the profiles' export keys (queries.ts KeyspaceOfKey). */
export function exportKeyspace(scope: AccountScope): KeyspaceRow | undefined {
  return scope.defs.keyspaces.find((k) => k.kind === 'export');
}

/** The identifiers of profiles, with their export keys as keys of the export keyspace. */
export function identifiersOf(tx: Queryable, scope: AccountScope, profileIds: string[]): Promise<q.IdentifierRow[]> {
  return q.listIdentifiersByProfiles(tx, scope.accountId, profileIds, exportKeyspace(scope)?.keyspace_id);
}

/** The export keys of profiles, in the order of `profileIds` (webhook payloads name profiles by them). */
export async function exportKeys(db: Queryable, scope: AccountScope, profileIds: string[]): Promise<string[]> {
  const keys = await q.exportKeysOf(db, scope.accountId, profileIds);
  return profileIds.map((id) => keys.get(id) ?? '');
}

/** The members of a located profile's cluster, earliest created (the canonical profile) first. */
export function clusterMembers(db: Queryable, scope: AccountScope, canonicalId: string): Promise<string[]> {
  return q.listClusterMembers(db, scope.accountId, canonicalId);
}

/** The attribute values (version id → value) a profile shows in a section. */
export async function sectionValues(
  db: Queryable,
  scope: AccountScope,
  canonicalId: string,
  sectionId: string,
): Promise<q.ValueMap> {
  return (await q.findSectionData(db, scope.accountId, canonicalId, sectionId)).attributes;
}

/** Everything segments evaluate of a profile (src/aql/evaluate.ts ProfileFacts) from what the database answers. */
function factsOf(row: q.FactsRow) {
  return {
    attributes: new Map(Object.entries(row.sections)),
    events: row.events.map(([sectionId, versionId, time, data]) => ({ sectionId, versionId, time, data })),
  };
}

/**
 * Finds a profile by unique identifier with everything segments evaluate of it: its values in
 * every section and its cluster's events of some versions, in one statement; 404 when there is no
 * such profile, 410 when it was locked.
 */
export async function locateWithFacts(
  db: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  eventVersionIds: string[],
): Promise<{ located: Located; facts: ReturnType<typeof factsOf> }> {
  const { keyspace, key } = identifierOf(scope, id);
  const found = await q.findFactsByKey(db, scope.accountId, keyspace, key, eventVersionIds);
  if (found)
    return {
      located: { keyspace, key, profileId: found.profile_id, canonicalId: found.canonical_id },
      facts: factsOf(found),
    };
  await refuseLocked(db, scope, keyspace, key);
  throw new Problem('AUD-1201', `No profile with ${keyspace.discriminator} key "${key}"`);
}

/** What locateWithFacts reads, for many canonical profiles by id (checks over a whole population). */
export async function factsOfProfiles(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId'>,
  canonicalIds: string[],
  eventVersionIds: string[],
): Promise<Map<string, ReturnType<typeof factsOf>>> {
  const rows = await q.listFacts(db, scope.accountId, canonicalIds, eventVersionIds);
  return new Map([...rows].map(([id, row]) => [id, factsOf(row)]));
}

/** What one profile of a data export holds (SPEC §2.16). */
export interface ProfileRecord {
  exportKey: string;
  /** Section id → attribute values (version id → value) and set tags (tag id → true). */
  sections: Map<string, q.SectionDataRow>;
  /** Its events in every section, oldest first. */
  events: q.SectionEventRow[];
  /** Its attribute changes, oldest first; null when not asked for. */
  history: q.AttributeChangeRow[] | null;
}

/**
 * A located profile as the single profile export shows it (docs/exports.md): first the profile
 * itself, under the export key it was located by, with what it shows (its cluster's values, and
 * the events and attribute changes of every member); then, with `members`, each other member of
 * its cluster under its own export key, with what it holds itself.
 */
export async function profileRecords(
  db: Queryable,
  scope: AccountScope,
  located: Located,
  options: { members: boolean; history: boolean },
): Promise<ProfileRecord[]> {
  const members = await q.listClusterMemberKeys(db, scope.accountId, located.canonicalId);
  const ids = members.map((m) => m.profile_id);
  const others = options.members ? members.filter((m) => m.profile_id !== located.profileId) : [];
  const otherIds = others.map((m) => m.profile_id);
  const [shown, own, events, history] = await Promise.all([
    q.listSectionDataByProfile(db, scope.accountId, located.canonicalId),
    q.listOwnSectionData(db, scope.accountId, otherIds),
    q.listSectionEventsByProfiles(db, scope.accountId, ids),
    options.history ? q.listAttributeChangesByProfiles(db, scope.accountId, ids) : null,
  ]);
  return [
    { exportKey: located.key, sections: shown, events, history },
    ...others.map((m) => ({
      exportKey: m.export_key,
      sections: own.get(m.profile_id) ?? new Map(),
      events: events.filter((e) => e.profile_id === m.profile_id),
      history: history && history.filter((h) => h.profile_id === m.profile_id),
    })),
  ];
}

import {
  attributeTypeOf,
  conforms,
  grants,
  requireWrite,
  type AttributeDef,
  type KeyspaceRow,
  type SectionDefs,
} from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections, sectionOf } from '../definitions/definitions.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { normaliseKey } from './keys.ts';
import {
  currentVersionId,
  deleteProfiles,
  identifierOf,
  identifiersOf,
  identityHash,
  insertNewProfile,
  joinClusters,
  locate,
  locateWithSectionData,
  lockedClusters,
  refuseReadOnly,
  writeSectionData,
  type Located,
  type ProfileFollower,
} from './profiles.ts';
import * as q from './queries.ts';
import type { IdentifierInSection } from './schemas.ts';

/** Checks one attribute write and returns the version it goes to. */
function checkWrite(
  section: SectionDefs,
  keyspace: KeyspaceRow,
  attribute: AttributeDef | undefined,
  versionId: string | undefined,
  key: string,
  value: unknown,
): string {
  if (!attribute || !versionId)
    throw new Problem('AUD-1206', `The attribute "${key}" is not defined in section "${section.discriminator}"`);
  if (attribute.hidden) throw new Problem('AUD-1211', `The attribute "${key}" is hidden and cannot be written`);
  const version = attribute.versions.find((v) => v.id === versionId)!;
  if (version.deprecated_at !== null)
    throw new Problem(
      'AUD-1207',
      `Version ${versionId} of attribute "${attribute.discriminator}" is deprecated; write its current version`,
    );
  requireWrite('attribute', attribute, keyspace);
  const typeName = attributeTypeOf(version);
  if (!conforms(typeName, value))
    throw new Problem(
      'AUD-1209',
      `The value of "${key}" does not conform to the type ${typeName}: ${JSON.stringify(value)}`,
    );
  return versionId;
}

/** Section → keyspace → the attribute version ids readable through it; both objects belong to one load of the definitions. */
const readableVersions = new WeakMap<SectionDefs, WeakMap<KeyspaceRow, Set<string>>>();

function readableThrough(section: SectionDefs, keyspace: KeyspaceRow): Set<string> {
  let bySection = readableVersions.get(section);
  if (!bySection) readableVersions.set(section, (bySection = new WeakMap()));
  let readable = bySection.get(keyspace);
  if (!readable) {
    readable = new Set(
      section.attributes
        .filter((a) => !a.hidden && grants(a.keyspace_permissions, keyspace, 'read'))
        .flatMap((a) => a.versions.map((v) => v.id)),
    );
    bySection.set(keyspace, readable);
  }
  return readable;
}

/** GET …/attributes: attribute version id → value, for the attributes readable through the keyspace. */
export async function getAttributes(db: Queryable, scope: AccountScope, id: IdentifierInSection): Promise<q.ValueMap> {
  const section = sectionOf(scope, id.section_discriminator);
  const { located, data } = await locateWithSectionData(db, scope, id, section);
  const readable = readableThrough(section, located.keyspace);
  const shown: q.ValueMap = {};
  for (const versionId in data.attributes) if (readable.has(versionId)) shown[versionId] = data.attributes[versionId];
  return shown;
}

/**
 * The common attribute write as one statement, without a transaction (shared with the other such
 * writes of the same turn; queries.ts patchSectionDataByKey): when the key is valid and not an
 * export key, `changes` passes every check and asks for nothing more than values written, and the
 * profile exists. Otherwise (false) the caller takes the full path, which answers the same errors
 * in the same order as before; a failed check here is only a reason to take it.
 */
async function writeDirectly(
  db: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  section: SectionDefs,
  changes: (keyspace: KeyspaceRow) => q.ValueMap | undefined,
): Promise<boolean> {
  let located: { keyspace: KeyspaceRow; key: string };
  let attributes: q.ValueMap | undefined;
  try {
    located = identifierOf(scope, id);
    if (located.keyspace.kind === 'export') return false;
    attributes = changes(located.keyspace);
  } catch {
    return false;
  }
  if (!attributes) return false;
  return q.patchSectionDataByKey(db, scope.accountId, {
    keyspaceId: located.keyspace.keyspace_id,
    key: located.key,
    sectionId: section.id,
    attributes,
    changedAt: scope.now,
  });
}

/**
 * PATCH …/attributes, version 1 (SPEC §4.4): keys are attribute version ids, null clears. Creates
 * the profile when it does not exist, and never changes profile keys.
 */
export async function patchAttributesV1(
  pool: pg.Pool,
  scope: AccountScope,
  id: IdentifierInSection,
  patch: q.ValueMap,
): Promise<void> {
  const section = sectionOf(scope, id.section_discriminator);
  const checked = (keyspace: KeyspaceRow) => {
    const changes: q.ValueMap = {};
    for (const [versionId, value] of Object.entries(patch)) {
      const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId));
      changes[checkWrite(section, keyspace, attribute, attribute ? versionId : undefined, versionId, value)] = value;
    }
    return changes;
  };
  if (await writeDirectly(pool, scope, id, section, checked)) return;
  await withTransaction(pool, async (tx) => {
    const located = await locateOrCreate(tx, scope, id);
    await writeSectionData(tx, scope, located.canonicalId, section.id, checked(located.keyspace));
  });
}

async function locateOrCreate(tx: Queryable, scope: AccountScope, id: IdentifierInSection): Promise<Located> {
  try {
    const located = await locate(tx, scope, id);
    refuseReadOnly(located.keyspace);
    return located;
  } catch (err) {
    if (!(err instanceof Problem) || err.code !== 'AUD-1201') throw err;
    const keyspace = scope.defs.keyspaces.find((k) => k.discriminator === id.keyspace_discriminator)!;
    refuseReadOnly(keyspace);
    const key = normaliseKey(keyspace.kind, id.profile_key);
    const profileId = await insertNewProfile(tx, scope, keyspace, key);
    if (!profileId)
      throw new Problem(
        'AUD-1204',
        `A profile with ${keyspace.discriminator} key "${key}" was created at the same time; retry`,
      );
    return { keyspace, key, profileId, canonicalId: profileId };
  }
}

export type KeyUpdateMethod = 'delete' | 'merge';

/** The keyspace whose profile key an attribute holds, when the located cluster has a key in it. */
async function keyspaceOfKeyAttribute(
  tx: Queryable,
  scope: AccountScope,
  located: Located,
  attribute: AttributeDef,
): Promise<{ keyspace: KeyspaceRow; identifiers: q.IdentifierRow[] } | undefined> {
  const keyspace = scope.defs.keyspaces.find((k) => k.mapped_attribute === attribute.discriminator);
  if (!keyspace) return undefined;
  const members = await lockedClusters(tx, scope, [located.canonicalId]);
  const identifiers = (await identifiersOf(tx, scope, members)).filter((i) => i.keyspace_id === keyspace.keyspace_id);
  return identifiers.length > 0 ? { keyspace, identifiers } : undefined;
}

/** A write of an attribute that a keyspace maps its profile keys to. */
interface KeyChange {
  attribute: AttributeDef;
  versionId: string;
  value: unknown;
}

/**
 * What a key attribute's new value does: the value to write, and, when another profile holds the
 * new key, the cluster it merged into (method merge) or the one the section moves to (method delete).
 */
type KeyOutcome =
  | { value: unknown }
  | { value: string; mergedInto: string }
  | { value: string; movesTo: { canonicalId: string; keyspace: KeyspaceRow; oldKey: string; attribute: AttributeDef } };

/**
 * PATCH /v2/…/attributes (SPEC §4.4): keys are attribute discriminators, null clears. Never
 * creates a profile. Changing an attribute that holds a profile key changes the key: simply when
 * the new key is free, otherwise as `method` says (`delete` moves the section's values to the
 * profile that has the new key; `merge` merges the two), and 409 without a method. `follower`
 * hears of changed addresses and moved sections.
 */
export async function patchAttributesV2(
  pool: pg.Pool,
  scope: AccountScope,
  id: IdentifierInSection,
  patch: q.ValueMap,
  method: KeyUpdateMethod | undefined,
  follower: ProfileFollower,
): Promise<void> {
  const section = sectionOf(scope, id.section_discriminator);
  const addressAttributes = new Set(scope.defs.channels.map((c) => c.address_attribute));
  // Without key or address attributes, a patch is values written and nothing else.
  const plain = (keyspace: KeyspaceRow) => {
    const changes: q.ValueMap = {};
    for (const [discriminator, value] of Object.entries(patch)) {
      if (
        addressAttributes.has(discriminator) ||
        scope.defs.keyspaces.some((k) => k.mapped_attribute === discriminator)
      )
        return undefined;
      const attribute = section.attributes.find((a) => a.discriminator === discriminator);
      changes[
        checkWrite(
          section,
          keyspace,
          attribute,
          attribute ? currentVersionId(section, discriminator) : undefined,
          discriminator,
          value,
        )
      ] = value;
    }
    return changes;
  };
  if (await writeDirectly(pool, scope, id, section, plain)) return;
  await withTransaction(pool, (tx) => patchInTransaction(tx, scope, id, section, patch, method, follower));
}

async function patchInTransaction(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  section: SectionDefs,
  patch: q.ValueMap,
  method: KeyUpdateMethod | undefined,
  follower: ProfileFollower,
): Promise<void> {
  let located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  const changes: q.ValueMap = {};
  const keyChanges: KeyChange[] = [];
  for (const [discriminator, value] of Object.entries(patch)) {
    const attribute = section.attributes.find((a) => a.discriminator === discriminator);
    const versionId = checkWrite(
      section,
      located.keyspace,
      attribute,
      attribute ? currentVersionId(section, discriminator) : undefined,
      discriminator,
      value,
    );
    if (scope.defs.keyspaces.some((k) => k.mapped_attribute === discriminator))
      keyChanges.push({ attribute: attribute!, versionId, value });
    else changes[versionId] = value;
  }
  for (const change of keyChanges) {
    const outcome = await changeKey(tx, scope, located, section, change, method);
    changes[change.versionId] = outcome.value;
    if ('mergedInto' in outcome) located = { ...located, canonicalId: outcome.mergedInto };
    if ('movesTo' in outcome)
      return moveSection(tx, scope, located, section, changes, { ...outcome.movesTo, newKey: outcome.value }, follower);
  }
  await followAddresses(tx, scope, located, section, changes, follower);
  await writeSectionData(tx, scope, located.canonicalId, section.id, changes);
}

/** Changes the profile key a key attribute holds, as far as the profile's own identifiers go. */
async function changeKey(
  tx: Queryable,
  scope: AccountScope,
  located: Located,
  section: SectionDefs,
  change: KeyChange,
  method: KeyUpdateMethod | undefined,
): Promise<KeyOutcome> {
  const key = await keyspaceOfKeyAttribute(tx, scope, located, change.attribute);
  if (!key) return { value: change.value };
  if (change.value === null)
    throw new Problem(
      'AUD-1212',
      `The attribute "${change.attribute.discriminator}" holds a profile key and cannot be cleared`,
    );
  const newKey = normaliseKey(key.keyspace.kind, String(change.value), change.attribute.discriminator);
  const current = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes[
    change.versionId
  ];
  const old =
    key.identifiers.find((i) => i.profile_key === current) ??
    key.identifiers.find((i) => i.profile_key === located.key) ??
    key.identifiers[0];
  if (old.profile_key === newKey) return { value: newKey };
  const holder = await q.findProfileByKey(tx, scope.accountId, key.keyspace, newKey);
  if (!holder) {
    if (await q.findLockedIdentity(tx, scope.accountId, [identityHash(scope, key.keyspace.keyspace_id, newKey)])) {
      throw new Problem('AUD-1202', `The profile with ${key.keyspace.discriminator} key "${newKey}" is locked`);
    }
    await q.deleteIdentifier(tx, scope.accountId, key.keyspace.keyspace_id, old.profile_key);
    await q.insertIdentifier(tx, scope.accountId, key.keyspace.keyspace_id, newKey, old.profile_id);
    return { value: newKey };
  }
  if (holder.canonical_id === located.canonicalId) return { value: newKey };
  if (!method) {
    throw new Problem(
      'AUD-1213',
      `${newKey} is already the ${key.keyspace.discriminator} key of another profile; give profile_key_update_method delete or merge`,
    );
  }
  requireAllSections(scope, `profile_key_update_method ${method}`);
  if (method === 'merge')
    return {
      value: newKey,
      mergedInto: await joinClusters(tx, scope, located.canonicalId, holder.canonical_id, { checkConflicts: false }),
    };
  return {
    value: newKey,
    movesTo: {
      canonicalId: holder.canonical_id,
      keyspace: key.keyspace,
      oldKey: old.profile_key,
      attribute: change.attribute,
    },
  };
}

/**
 * Key update method delete: the section's values (with the patch) go to the profile holding the
 * new key, and leave this one; the old key goes unless another section still holds it as its
 * mapped attribute, and a profile left with nothing but its export key goes too.
 */
async function moveSection(
  tx: Queryable,
  scope: AccountScope,
  located: Located,
  section: SectionDefs,
  changes: q.ValueMap,
  move: { canonicalId: string; keyspace: KeyspaceRow; oldKey: string; newKey: string; attribute: AttributeDef },
  follower: ProfileFollower,
): Promise<void> {
  const moved = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes;
  await writeSectionData(tx, scope, move.canonicalId, section.id, { ...moved, ...changes });
  await follower.sectionMoved(tx, scope, {
    fromCanonicalId: located.canonicalId,
    toCanonicalId: move.canonicalId,
    sectionId: section.id,
    address: move.newKey,
  });
  const stillUsed = [...(await q.listSectionDataByProfile(tx, scope.accountId, located.canonicalId))].some(
    ([sectionId, data]) =>
      sectionId !== section.id &&
      data.attributes[
        currentVersionId(
          scope.defs.sections.find((s) => s.id === sectionId)!,
          move.attribute.discriminator,
        ) ?? ''
      ] === move.oldKey,
  );
  if (!stillUsed) await q.deleteIdentifier(tx, scope.accountId, move.keyspace.keyspace_id, move.oldKey);
  await writeSectionData(
    tx,
    scope,
    located.canonicalId,
    section.id,
    Object.fromEntries(Object.keys(moved).map((v) => [v, null])),
  );
  const left = await identifiersOf(tx, scope, await lockedClusters(tx, scope, [located.canonicalId]));
  if (left.every((i) => scope.defs.keyspaces.find((k) => k.keyspace_id === i.keyspace_id)?.kind === 'export')) {
    await deleteProfiles(tx, scope, [...new Set(left.map((i) => i.profile_id))], follower);
  }
}

/** Tells the follower of address attributes whose value the patch changes (SPEC §4.4: consents follow the address). */
async function followAddresses(
  tx: Queryable,
  scope: AccountScope,
  located: Located,
  section: SectionDefs,
  changes: q.ValueMap,
  follower: ProfileFollower,
): Promise<void> {
  const addressAttributes = new Set(scope.defs.channels.map((c) => c.address_attribute));
  const addressChanges = Object.entries(changes).filter(([versionId]) =>
    section.attributes.some(
      (a) => addressAttributes.has(a.discriminator) && a.versions.some((v) => v.id === versionId),
    ),
  );
  if (addressChanges.length === 0) return;
  const before = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes;
  for (const [versionId, value] of addressChanges) {
    const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId))!;
    const old = before[versionId];
    if (typeof old === 'string' && typeof value === 'string' && old !== value) {
      await follower.addressChanged(tx, scope, {
        canonicalId: located.canonicalId,
        section,
        attributeDiscriminator: attribute.discriminator,
        from: old,
        to: value,
      });
    }
  }
}

/** DELETE …/attributes/{version_id}: clears one version's value. */
export async function clearAttributeVersion(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  versionId: string,
): Promise<void> {
  const section = sectionOf(scope, id.section_discriminator);
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId));
  if (!attribute)
    throw new Problem(
      'AUD-1206',
      `The attribute version "${versionId}" is not defined in section "${section.discriminator}"`,
    );
  await clear(tx, scope, located, section, attribute, [versionId]);
}

/** DELETE /v2/…/attributes/{attribute_discriminator}: clears every version's value; a key attribute cannot be cleared. */
export async function clearAttribute(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  discriminator: string,
): Promise<void> {
  const section = sectionOf(scope, id.section_discriminator);
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  const attribute = section.attributes.find((a) => a.discriminator === discriminator);
  if (!attribute)
    throw new Problem(
      'AUD-1206',
      `The attribute "${discriminator}" is not defined in section "${section.discriminator}"`,
    );
  if (await keyspaceOfKeyAttribute(tx, scope, located, attribute)) {
    throw new Problem('AUD-1212', `The attribute "${discriminator}" holds a profile key and cannot be cleared`);
  }
  await clear(
    tx,
    scope,
    located,
    section,
    attribute,
    attribute.versions.map((v) => v.id),
  );
}

async function clear(
  tx: Queryable,
  scope: AccountScope,
  located: Located,
  section: SectionDefs,
  attribute: AttributeDef,
  versionIds: string[],
): Promise<void> {
  if (attribute.hidden)
    throw new Problem('AUD-1211', `The attribute "${attribute.discriminator}" is hidden and cannot be written`);
  requireWrite('attribute', attribute, located.keyspace);
  await writeSectionData(
    tx,
    scope,
    located.canonicalId,
    section.id,
    Object.fromEntries(versionIds.map((v) => [v, null])),
  );
}

/** GET …/tags: tag discriminator → true for the set tags readable through the keyspace. */
export async function getTags(
  db: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
): Promise<Record<string, boolean>> {
  const section = sectionOf(scope, id.section_discriminator);
  const { located, data } = await locateWithSectionData(db, scope, id, section);
  const result: Record<string, boolean> = {};
  for (const tag of section.tags) {
    if (data.tags[tag.tag_id] && !tag.hidden && grants(tag.keyspace_permissions, located.keyspace, 'read'))
      result[tag.discriminator] = true;
  }
  return result;
}

/** PATCH …/tags (SPEC §4.4): tag discriminator → true sets, false removes. */
export async function patchTags(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  patch: Record<string, unknown>,
): Promise<void> {
  const section = sectionOf(scope, id.section_discriminator);
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  const changes: Record<string, boolean> = {};
  for (const [discriminator, value] of Object.entries(patch)) {
    const tag = section.tags.find((t) => t.discriminator === discriminator);
    if (!tag || tag.hidden)
      throw new Problem('AUD-1218', `The tag "${discriminator}" is not defined in section "${section.discriminator}"`);
    if (typeof value !== 'boolean')
      throw new Problem(
        'AUD-1209',
        `The value of tag "${discriminator}" must be true or false, not ${JSON.stringify(value)}`,
      );
    requireWrite('tag', tag, located.keyspace);
    changes[tag.tag_id] = value;
  }
  await writeSectionData(tx, scope, located.canonicalId, section.id, {}, changes);
}

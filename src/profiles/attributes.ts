import { followAddress, moveActiveConsents } from '../consents/consents.ts';
import type { AttributeDef, SectionDefs } from '../definitions/definitions.ts';
import { sectionOf } from '../definitions/definitions.ts';
import type { KeyspaceRow } from '../definitions/queries.ts';
import { Problem } from '../http/problems.ts';
import type { Caller } from '../identity/identity.ts';
import type { Queryable } from '../store/pool.ts';
import { normaliseKey } from './keys.ts';
import { currentVersionId, identityHash, insertNewProfile, joinClusters, locate, locateWithSectionData, refuseReadOnly, writeSectionData, type Located, type ProfileScope } from './profiles.ts';
import * as q from './queries.ts';

/** A calendar date (`2026-02-28`), optionally with a time; impossible days such as Feb 30 are not dates. */
function isDate(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})([T ].*)?$/.exec(value);
  if (!m || Number.isNaN(Date.parse(value))) return false;
  const day = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return day.getUTCMonth() === Number(m[2]) - 1 && day.getUTCDate() === Number(m[3]);
}

/** Whether a value fits an attribute type of SPEC §2.5 (null always does: it clears). */
export function conforms(typeName: string, value: unknown): boolean {
  if (value === null) return true;
  switch (typeName) {
    case 'Text': return typeof value === 'string';
    case 'True/False': return typeof value === 'boolean';
    case 'Date': return typeof value === 'string' && isDate(value);
    case 'Timestamp': return Number.isSafeInteger(value);
    case 'Number':
    case 'Number with decimal': return typeof value === 'number' && Number.isFinite(value);
    case 'Struct': return typeof value === 'object' && !Array.isArray(value);
    default: return false;
  }
}

function allows(permissions: Record<string, string[]>, keyspace: KeyspaceRow, what: 'read' | 'write'): boolean {
  return permissions[keyspace.discriminator]?.includes(what) ?? false;
}

/** Checks one attribute write and returns the version it goes to. */
function checkWrite(section: SectionDefs, keyspace: KeyspaceRow, attribute: AttributeDef | undefined, versionId: string | undefined, key: string, value: unknown): string {
  if (!attribute || !versionId) throw new Problem('AUD-1206', `The attribute "${key}" is not defined in section "${section.discriminator}"`);
  if (attribute.hidden) throw new Problem('AUD-1211', `The attribute "${key}" is hidden and cannot be written`);
  const version = attribute.versions.find((v) => v.id === versionId)!;
  if (version.deprecated_at !== null) throw new Problem('AUD-1207', `Version ${versionId} of attribute "${attribute.discriminator}" is deprecated; write its current version`);
  if (!allows(attribute.keyspace_permissions, keyspace, 'write')) {
    throw new Problem('AUD-1208', `The attribute "${attribute.discriminator}" is not writable through the keyspace "${keyspace.discriminator}"`);
  }
  const typeName = String(version.type[0]);
  if (!conforms(typeName, value)) throw new Problem('AUD-1209', `The value of "${key}" does not conform to the type ${typeName}: ${JSON.stringify(value)}`);
  return versionId;
}

/** GET …/attributes: attribute version id → value, for the attributes readable through the keyspace. */
export async function getAttributes(db: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string): Promise<q.ValueMap> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const { located, data } = await locateWithSectionData(db, scope, keyspaceDiscriminator, rawKey, section);
  const readable = new Set(section.attributes.filter((a) => !a.hidden && allows(a.keyspace_permissions, located.keyspace, 'read')).flatMap((a) => a.versions.map((v) => v.id)));
  return Object.fromEntries(Object.entries(data.attributes).filter(([versionId]) => readable.has(versionId)));
}

/**
 * PATCH …/attributes, version 1 (SPEC §4.4): keys are attribute version ids, null clears. Creates
 * the profile when it does not exist, and never changes profile keys.
 */
export async function patchAttributesV1(tx: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string, patch: q.ValueMap): Promise<void> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const located = await locateOrCreate(tx, scope, keyspaceDiscriminator, rawKey);
  const changes: q.ValueMap = {};
  for (const [versionId, value] of Object.entries(patch)) {
    const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId));
    changes[checkWrite(section, located.keyspace, attribute, attribute ? versionId : undefined, versionId, value)] = value;
  }
  await writeSectionData(tx, scope, located.canonicalId, section.id, changes);
}

async function locateOrCreate(tx: Queryable, scope: ProfileScope, keyspaceDiscriminator: string, rawKey: string): Promise<Located> {
  try {
    const located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
    refuseReadOnly(located.keyspace);
    return located;
  } catch (err) {
    if (!(err instanceof Problem) || err.code !== 'AUD-1201') throw err;
    const keyspace = scope.defs.keyspaces.find((k) => k.discriminator === keyspaceDiscriminator)!;
    refuseReadOnly(keyspace);
    const key = normaliseKey(keyspace.kind, rawKey);
    const profileId = await insertNewProfile(tx, scope, keyspace, key);
    if (!profileId) throw new Problem('AUD-1204', `A profile with ${keyspace.discriminator} key "${key}" was created at the same time; retry`);
    return { keyspace, key, profileId, canonicalId: profileId };
  }
}

export type KeyUpdateMethod = 'delete' | 'merge';

/** The keyspace whose profile key an attribute holds, when the located cluster has a key in it. */
async function keyspaceOfKeyAttribute(tx: Queryable, scope: ProfileScope, located: Located, attribute: AttributeDef): Promise<{ keyspace: KeyspaceRow; identifiers: q.IdentifierRow[] } | undefined> {
  const keyspace = scope.defs.keyspaces.find((k) => k.mapped_attribute === attribute.discriminator);
  if (!keyspace) return undefined;
  const members = (await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId])).map((m) => m.profile_id);
  const identifiers = (await q.listIdentifiersByProfiles(tx, scope.accountId, members)).filter((i) => i.keyspace_id === keyspace.keyspace_id);
  return identifiers.length > 0 ? { keyspace, identifiers } : undefined;
}

/**
 * PATCH /v2/…/attributes (SPEC §4.4): keys are attribute discriminators, null clears. Never
 * creates a profile. Changing an attribute that holds a profile key changes the key: simply when
 * the new key is free, otherwise as `method` says (`delete` moves the section's values to the
 * profile that has the new key; `merge` merges the two), and 409 without a method.
 */
export async function patchAttributesV2(tx: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string, patch: q.ValueMap, method: KeyUpdateMethod | undefined): Promise<void> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  let located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
  refuseReadOnly(located.keyspace);
  const changes: q.ValueMap = {};
  const keyChanges: { attribute: AttributeDef; versionId: string; value: unknown }[] = [];
  for (const [discriminator, value] of Object.entries(patch)) {
    const attribute = section.attributes.find((a) => a.discriminator === discriminator);
    const versionId = checkWrite(section, located.keyspace, attribute, attribute ? currentVersionId(section, discriminator) : undefined, discriminator, value);
    if (scope.defs.keyspaces.some((k) => k.mapped_attribute === discriminator)) keyChanges.push({ attribute: attribute!, versionId, value });
    else changes[versionId] = value;
  }
  for (const change of keyChanges) {
    const key = await keyspaceOfKeyAttribute(tx, scope, located, change.attribute);
    if (!key) {
      changes[change.versionId] = change.value;
      continue;
    }
    if (change.value === null) throw new Problem('AUD-1212', `The attribute "${change.attribute.discriminator}" holds a profile key and cannot be cleared`);
    const newKey = normaliseKey(key.keyspace.kind, String(change.value), change.attribute.discriminator);
    changes[change.versionId] = newKey;
    const current = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes[change.versionId];
    const old = key.identifiers.find((i) => i.profile_key === current) ?? key.identifiers.find((i) => i.profile_key === located.key) ?? key.identifiers[0];
    if (old.profile_key === newKey) continue;
    const holder = await q.findProfileByKey(tx, scope.accountId, key.keyspace.keyspace_id, newKey);
    if (!holder) {
      if (await q.findLockedIdentity(tx, scope.accountId, [identityHash(scope, key.keyspace.keyspace_id, newKey)])) {
        throw new Problem('AUD-1202', `The profile with ${key.keyspace.discriminator} key "${newKey}" is locked`);
      }
      await q.deleteIdentifier(tx, scope.accountId, key.keyspace.keyspace_id, old.profile_key);
      await q.insertIdentifier(tx, scope.accountId, key.keyspace.keyspace_id, newKey, old.profile_id);
      continue;
    }
    if (holder.canonical_id === located.canonicalId) continue;
    if (!method) {
      throw new Problem('AUD-1213', `${newKey} is already the ${key.keyspace.discriminator} key of another profile; give profile_key_update_method delete or merge`);
    }
    if (method === 'merge') {
      const canonicalId = await joinClusters(tx, scope, located.canonicalId, holder.canonical_id, { checkConflicts: false });
      located = { ...located, canonicalId };
      continue;
    }
    // delete: the section's values go to the profile holding the new key; the old key goes unless
    // another section still holds it as its mapped attribute.
    const moved = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes;
    await writeSectionData(tx, scope, holder.canonical_id, section.id, { ...moved, ...changes });
    await moveActiveConsents(tx, scope, located.canonicalId, holder.canonical_id, section.id, newKey);
    const stillUsed = [...(await q.listSectionDataByProfile(tx, scope.accountId, located.canonicalId))]
      .some(([sectionId, data]) => sectionId !== section.id && data.attributes[currentVersionId(scope.defs.sections.find((s) => s.id === sectionId)!, change.attribute.discriminator) ?? ''] === old.profile_key);
    if (!stillUsed) await q.deleteIdentifier(tx, scope.accountId, key.keyspace.keyspace_id, old.profile_key);
    await writeSectionData(tx, scope, located.canonicalId, section.id, Object.fromEntries(Object.keys(moved).map((v) => [v, null])));
    const left = await q.listIdentifiersByProfiles(tx, scope.accountId, (await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId])).map((m) => m.profile_id));
    if (left.every((i) => scope.defs.keyspaces.find((k) => k.keyspace_id === i.keyspace_id)?.kind === 'export')) {
      await q.deleteProfiles(tx, scope.accountId, [...new Set(left.map((i) => i.profile_id))]);
    }
    return;
  }
  // Consents given for an old address follow it to the new one (SPEC §4.4).
  const addressAttributes = new Set(scope.defs.channels.map((c) => c.address_attribute));
  const addressChanges = Object.entries(changes).filter(([versionId]) => section.attributes.some((a) => addressAttributes.has(a.discriminator) && a.versions.some((v) => v.id === versionId)));
  const before = addressChanges.length > 0 ? (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes : {};
  for (const [versionId, value] of addressChanges) {
    const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId))!;
    const old = before[versionId];
    if (typeof old === 'string' && typeof value === 'string' && old !== value) {
      await followAddress(tx, scope, located.canonicalId, section, attribute.discriminator, old, value);
    }
  }
  await writeSectionData(tx, scope, located.canonicalId, section.id, changes);
}

/** DELETE …/attributes/{version_id}: clears one version's value. */
export async function clearAttributeVersion(tx: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string, versionId: string): Promise<void> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
  refuseReadOnly(located.keyspace);
  const attribute = section.attributes.find((a) => a.versions.some((v) => v.id === versionId));
  if (!attribute) throw new Problem('AUD-1206', `The attribute version "${versionId}" is not defined in section "${section.discriminator}"`);
  await clear(tx, scope, located, section, attribute, [versionId]);
}

/** DELETE /v2/…/attributes/{attribute_discriminator}: clears every version's value; a key attribute cannot be cleared. */
export async function clearAttribute(tx: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string, discriminator: string): Promise<void> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
  refuseReadOnly(located.keyspace);
  const attribute = section.attributes.find((a) => a.discriminator === discriminator);
  if (!attribute) throw new Problem('AUD-1206', `The attribute "${discriminator}" is not defined in section "${section.discriminator}"`);
  if (await keyspaceOfKeyAttribute(tx, scope, located, attribute)) {
    throw new Problem('AUD-1212', `The attribute "${discriminator}" holds a profile key and cannot be cleared`);
  }
  await clear(tx, scope, located, section, attribute, attribute.versions.map((v) => v.id));
}

async function clear(tx: Queryable, scope: ProfileScope, located: Located, section: SectionDefs, attribute: AttributeDef, versionIds: string[]): Promise<void> {
  if (attribute.hidden) throw new Problem('AUD-1211', `The attribute "${attribute.discriminator}" is hidden and cannot be written`);
  if (!allows(attribute.keyspace_permissions, located.keyspace, 'write')) {
    throw new Problem('AUD-1208', `The attribute "${attribute.discriminator}" is not writable through the keyspace "${located.keyspace.discriminator}"`);
  }
  await writeSectionData(tx, scope, located.canonicalId, section.id, Object.fromEntries(versionIds.map((v) => [v, null])));
}

/** GET …/tags: tag discriminator → true for the set tags readable through the keyspace. */
export async function getTags(db: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string): Promise<Record<string, boolean>> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const { located, data } = await locateWithSectionData(db, scope, keyspaceDiscriminator, rawKey, section);
  const result: Record<string, boolean> = {};
  for (const tag of section.tags) {
    if (data.tags[tag.tag_id] && !tag.hidden && allows(tag.keyspace_permissions, located.keyspace, 'read')) result[tag.discriminator] = true;
  }
  return result;
}

/** PATCH …/tags (SPEC §4.4): tag discriminator → true sets, false removes. */
export async function patchTags(tx: Queryable, scope: ProfileScope, caller: Caller, keyspaceDiscriminator: string, rawKey: string, sectionDiscriminator: string, patch: Record<string, unknown>): Promise<void> {
  const section = sectionOf(scope.defs, sectionDiscriminator, caller);
  const located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
  refuseReadOnly(located.keyspace);
  const changes: Record<string, boolean> = {};
  for (const [discriminator, value] of Object.entries(patch)) {
    const tag = section.tags.find((t) => t.discriminator === discriminator);
    if (!tag || tag.hidden) throw new Problem('AUD-1218', `The tag "${discriminator}" is not defined in section "${section.discriminator}"`);
    if (typeof value !== 'boolean') throw new Problem('AUD-1209', `The value of tag "${discriminator}" must be true or false, not ${JSON.stringify(value)}`);
    if (!allows(tag.keyspace_permissions, located.keyspace, 'write')) {
      throw new Problem('AUD-1208', `The tag "${discriminator}" is not writable through the keyspace "${located.keyspace.discriminator}"`);
    }
    changes[tag.tag_id] = value;
  }
  await writeSectionData(tx, scope, located.canonicalId, section.id, {}, changes);
}

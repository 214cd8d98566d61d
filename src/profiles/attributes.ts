import {
  attributeOfVersion,
  attributeRefusal,
  attributeTypeOf,
  ATTRIBUTE_PROBLEMS,
  ATTRIBUTE_READ_PROBLEMS,
  grants,
  requireAttribute,
  requireWrite,
  storedValue,
  WRITE_GRANT_PROBLEMS,
  type AttributeDef,
  type KeyspaceRow,
  type SectionDefs,
  type TypeVersion,
} from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { hasLiveSegments, requireAllSections, sectionOf } from '../definitions/definitions.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { normaliseKey } from './keys.ts';
import {
  clusterMembers,
  currentVersionId,
  identifierOf,
  identifiersOf,
  identityHash,
  locate,
  locateKey,
  locateWithSectionData,
  refuseReadOnly,
  type Located,
} from './locate.ts';
import { deleteProfiles, joinClusters, locateOrCreate, patchSection, type ProfileFollower } from './profiles.ts';
import * as q from './queries.ts';
import type { AttributeHistory, IdentifierInSection } from './schemas.ts';

/** A write of an attribute that a keyspace maps its profile keys to. */
interface KeyChange {
  attribute: AttributeDef;
  versionId: string;
  value: unknown;
}

/**
 * An attribute patch checked once against the definitions and the keyspace it is written through:
 * the values to store (version id → value), the key attributes it changes (version 2 only), and
 * whether it writes an address attribute, whose consents follow it (version 2 only). `refusal` is
 * the first entry that failed a check; it is answered once the profile is located, since a missing,
 * locked or read-only profile is answered first.
 */
interface WritePlan {
  values: q.ValueMap;
  keyChanges: KeyChange[];
  addresses: boolean;
  refusal?: Problem;
}

/**
 * What the check of an attribute write's entry can answer (`checkEntry`): not defined, hidden,
 * deprecated, not writable through the keyspace, a value not of its type.
 */
export const ENTRY_PROBLEMS: readonly ProblemCode[] = [...ATTRIBUTE_PROBLEMS, 'AUD-1209'];

/**
 * What the check of a clear's attribute can answer: not defined, hidden, not writable through the
 * keyspace. A clear writes no value, so no type refuses it, and it may clear a deprecated version.
 */
export const CLEAR_PROBLEMS: readonly ProblemCode[] = [...ATTRIBUTE_READ_PROBLEMS, ...WRITE_GRANT_PROBLEMS];

/** The refusal of one entry of a patch, or what it writes: the version and the value as stored. */
function checkEntry(
  section: SectionDefs,
  keyspace: KeyspaceRow,
  name: string,
  found: { attribute: AttributeDef; version: TypeVersion } | undefined,
  value: unknown,
): { refusal: Problem } | { attribute: AttributeDef; versionId: string; value: unknown } {
  const refusal = attributeRefusal(section, name, found, { writeThrough: [keyspace] });
  if (refusal) return { refusal };
  const { attribute, version } = found!;
  const typeName = attributeTypeOf(version);
  const stored = storedValue(typeName, value);
  if (stored === undefined)
    return {
      refusal: new Problem(
        'AUD-1209',
        `The value of "${name}" does not conform to the type ${typeName}: ${JSON.stringify(value)}`,
      ),
    };
  return { attribute, versionId: version.id, value: stored };
}

/**
 * Checks a patch into its plan. Version 1 names attribute versions and writes values only;
 * version 2 names attributes (their current version) and changes profile keys and follows
 * addresses.
 */
function planPatch(
  scope: AccountScope,
  section: SectionDefs,
  keyspace: KeyspaceRow,
  patch: q.ValueMap,
  version: 1 | 2,
): WritePlan {
  const plan: WritePlan = { values: {}, keyChanges: [], addresses: false };
  const addressAttributes = new Set(scope.defs.channels.map((c) => c.address_attribute));
  for (const [name, value] of Object.entries(patch)) {
    const found = version === 1 ? attributeOfVersion(section, name) : currentVersionOf(section, name);
    const checked = checkEntry(section, keyspace, name, found, value);
    if ('refusal' in checked) return { ...plan, refusal: checked.refusal };
    if (version === 1) plan.values[checked.versionId] = checked.value;
    else if (scope.defs.keyspaces.some((k) => k.mapped_attribute === name)) plan.keyChanges.push(checked);
    else plan.values[checked.versionId] = checked.value;
    if (version === 2 && addressAttributes.has(name)) plan.addresses = true;
  }
  return plan;
}

/**
 * An attribute by discriminator with the version a write goes to: its current one
 * (currentVersionId), or when every version is deprecated its last, which the check refuses as
 * deprecated (AUD-1207); undefined when the section has no such attribute.
 */
function currentVersionOf(
  section: SectionDefs,
  discriminator: string,
): { attribute: AttributeDef; version: TypeVersion } | undefined {
  const attribute = section.attributes.find((a) => a.discriminator === discriminator);
  const versionId = attribute && (currentVersionId(section, discriminator) ?? attribute.versions.at(-1)?.id);
  return versionId === undefined ? undefined : attributeOfVersion(section, versionId);
}

/**
 * Writes a plan that is values and nothing else, for an account without live segments, as one statement, without a transaction (shared
 * with the other such writes of the same turn; queries.ts patchSectionDataByKey): false when it
 * is not such a plan, or no profile has the key, for the caller to take the transaction.
 */
async function writeDirectly(
  pool: pg.Pool,
  scope: AccountScope,
  target: { keyspace: KeyspaceRow; key: string; section: SectionDefs },
  plan: WritePlan,
): Promise<boolean> {
  // An account with live segments takes the transaction: the write marks its profile there (profilesChanged).
  if (
    plan.refusal ||
    plan.keyChanges.length > 0 ||
    plan.addresses ||
    target.keyspace.kind === 'export' ||
    hasLiveSegments(scope.defs)
  )
    return false;
  return q.patchSectionDataByKey(pool, scope.accountId, {
    keyspaceId: target.keyspace.keyspace_id,
    key: target.key,
    sectionId: target.section.id,
    attributes: plan.values,
    changedAt: scope.now,
  });
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

/**
 * What the attribute reads of a profile's section answer from: the section (403 to a key not granted
 * it), the profile located with what its cluster shows there (404, 410), and the attribute version
 * ids readable through the keyspace (no hidden attribute, none the keyspace may not read); the
 * values shown, readable ones only.
 */
async function readableValues(db: Queryable, scope: AccountScope, id: IdentifierInSection) {
  const section = sectionOf(scope, id.section_discriminator);
  const { located, data } = await locateWithSectionData(db, scope, id, section);
  const readable = readableThrough(section, located.keyspace);
  const shown: q.ValueMap = {};
  for (const versionId in data.attributes) if (readable.has(versionId)) shown[versionId] = data.attributes[versionId];
  return { section, located, readable, shown };
}

/** GET …/attributes: attribute version id → value, for the attributes readable through the keyspace. */
export async function getAttributes(db: Queryable, scope: AccountScope, id: IdentifierInSection): Promise<q.ValueMap> {
  return (await readableValues(db, scope, id)).shown;
}

const fromMicros = (micros: number) => new Date(micros / 1000).toISOString();

/**
 * GET …/attributes/history: per attribute the value shown now with the time it was set, and the
 * values it replaced with their set and replaced times, newest first (at most `limit`), of the
 * attributes GET …/attributes answers, through the same checks. A member of a merge cluster
 * answers its cluster's history, as it answers its cluster's values: a value shown is the entry of
 * the earliest-created member that has one, and the past values are those of every member.
 */
export async function getAttributeHistory(
  db: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  limit: number,
): Promise<AttributeHistory> {
  const { section, located, readable, shown } = await readableValues(db, scope, id);
  const members = await clusterMembers(db, scope, located.canonicalId);
  const [own, past] = [
    await q.listOwnSetTimes(db, scope.accountId, members, section.id),
    await q.listReplacedValues(db, scope.accountId, members, section.id, [...readable], limit),
  ];
  const items: AttributeHistory['items'] = [];
  for (const attribute of section.attributes) {
    for (const version of attribute.versions) {
      if (!readable.has(version.id)) continue;
      const replaced = past.filter((p) => p.version_id === version.id);
      let current: AttributeHistory['items'][number]['current'] = null;
      if (version.id in shown) {
        const owner = own.find((row) => version.id in row.attributes);
        const micros = owner?.attribute_set_at[version.id];
        if (micros !== undefined) current = { value: shown[version.id], set_at: fromMicros(micros) };
      }
      if (!current && replaced.length === 0) continue;
      items.push({
        version_id: version.id,
        attribute_discriminator: attribute.discriminator,
        current,
        past: replaced.map((p) => ({
          value: p.value,
          set_at: p.set_at.toISOString(),
          replaced_at: p.replaced_at.toISOString(),
        })),
        past_total: replaced[0]?.total ?? 0,
      });
    }
  }
  return { items };
}

/** What every step of an attribute write in its transaction works with. */
interface WriteContext {
  tx: Queryable;
  scope: AccountScope;
  section: SectionDefs;
  located: Located;
  follower: ProfileFollower;
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
  const { keyspace, key } = identifierOf(scope, id);
  const plan = planPatch(scope, section, keyspace, patch, 1);
  if (await writeDirectly(pool, scope, { keyspace, key, section }, plan)) return;
  await withTransaction(pool, async (tx) => {
    const located = await locateOrCreate(tx, scope, keyspace, key);
    if (plan.refusal) throw plan.refusal;
    await patchSection(tx, scope, {
      profileId: located.canonicalId,
      sectionId: section.id,
      attributes: plan.values,
      at: scope.now,
    });
  });
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
  const members = await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]);
  const identifiers = (await identifiersOf(tx, scope, members)).filter((i) => i.keyspace_id === keyspace.keyspace_id);
  return identifiers.length > 0 ? { keyspace, identifiers } : undefined;
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
  const { keyspace, key } = identifierOf(scope, id);
  const plan = planPatch(scope, section, keyspace, patch, 2);
  if (await writeDirectly(pool, scope, { keyspace, key, section }, plan)) return;
  await withTransaction(pool, async (tx) => {
    const located = await locateKey(tx, scope, keyspace, key);
    refuseReadOnly(located.keyspace);
    if (plan.refusal) throw plan.refusal;
    await writePlan({ tx, scope, section, located, follower }, plan, method);
  });
}

/** Writes a checked version 2 plan in its transaction: key changes first, then the values, with the addresses followed. */
async function writePlan(ctx: WriteContext, plan: WritePlan, method: KeyUpdateMethod | undefined): Promise<void> {
  const changes: q.ValueMap = { ...plan.values };
  for (const change of plan.keyChanges) {
    const outcome = await changeKey(ctx, change, method);
    changes[change.versionId] = outcome.value;
    if ('mergedInto' in outcome) ctx = { ...ctx, located: { ...ctx.located, canonicalId: outcome.mergedInto } };
    if ('movesTo' in outcome) return moveSection(ctx, changes, { ...outcome.movesTo, newKey: outcome.value });
  }
  await followAddresses(ctx, changes);
  await patchSection(ctx.tx, ctx.scope, {
    profileId: ctx.located.canonicalId,
    sectionId: ctx.section.id,
    attributes: changes,
    at: ctx.scope.now,
  });
}

/** Changes the profile key a key attribute holds, as far as the profile's own identifiers go. */
async function changeKey(
  { tx, scope, located, section }: WriteContext,
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
  { tx, scope, located, section, follower }: WriteContext,
  changes: q.ValueMap,
  move: { canonicalId: string; keyspace: KeyspaceRow; oldKey: string; newKey: string; attribute: AttributeDef },
): Promise<void> {
  const moved = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes;
  await patchSection(tx, scope, {
    profileId: move.canonicalId,
    sectionId: section.id,
    attributes: { ...moved, ...changes },
    at: scope.now,
  });
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
  await patchSection(tx, scope, {
    profileId: located.canonicalId,
    sectionId: section.id,
    attributes: Object.fromEntries(Object.keys(moved).map((v) => [v, null])),
    at: scope.now,
  });
  const left = await identifiersOf(tx, scope, await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]));
  if (left.every((i) => scope.defs.keyspaces.find((k) => k.keyspace_id === i.keyspace_id)?.kind === 'export')) {
    await deleteProfiles(tx, scope, [...new Set(left.map((i) => i.profile_id))], follower);
  }
}

/** Tells the follower of address attributes whose value the patch changes (SPEC §4.4: consents follow the address). */
async function followAddresses(
  { tx, scope, located, section, follower }: WriteContext,
  changes: q.ValueMap,
): Promise<void> {
  const addressAttributes = new Set(scope.defs.channels.map((c) => c.address_attribute));
  const addressChanges = Object.entries(changes).flatMap(([versionId, value]) => {
    const attribute = attributeOfVersion(section, versionId)?.attribute;
    return attribute && addressAttributes.has(attribute.discriminator) ? [{ attribute, versionId, value }] : [];
  });
  if (addressChanges.length === 0) return;
  const before = (await q.findSectionData(tx, scope.accountId, located.canonicalId, section.id)).attributes;
  for (const { attribute, versionId, value } of addressChanges) {
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
  const found = attributeOfVersion(section, versionId);
  requireAttribute(section, versionId, found && { attribute: found.attribute }, { writeThrough: [located.keyspace] });
  await clear(tx, scope, { located, section, versionIds: [versionId] });
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
  const found = section.attributes.find((a) => a.discriminator === discriminator);
  const { attribute } = requireAttribute(section, discriminator, found && { attribute: found }, {
    writeThrough: [located.keyspace],
  });
  if (await keyspaceOfKeyAttribute(tx, scope, located, attribute)) {
    throw new Problem('AUD-1212', `The attribute "${discriminator}" holds a profile key and cannot be cleared`);
  }
  await clear(tx, scope, { located, section, versionIds: attribute.versions.map((v) => v.id) });
}

/** Clears versions of an attribute that the caller checked may be written through the profile's keyspace. */
async function clear(
  tx: Queryable,
  scope: AccountScope,
  target: { located: Located; section: SectionDefs; versionIds: string[] },
): Promise<void> {
  await patchSection(tx, scope, {
    profileId: target.located.canonicalId,
    sectionId: target.section.id,
    attributes: Object.fromEntries(target.versionIds.map((v) => [v, null])),
    at: scope.now,
  });
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
  await patchSection(tx, scope, {
    profileId: located.canonicalId,
    sectionId: section.id,
    attributes: {},
    tags: changes,
    at: scope.now,
  });
}

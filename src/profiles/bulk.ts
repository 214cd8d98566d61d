import crypto from 'node:crypto';
import type { Queryable } from '../store/pool.ts';
import { currentVersionId, identityHash } from './locate.ts';
import { CHANGED, profilesChanged } from './profiles.ts';
import * as q from './queries.ts';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';

/** One row of an import: a profile key and the values to write in the section. */
export interface ImportRow {
  line: number;
  /** Normalised by the keyspace's kind (normaliseKey). */
  key: string;
  /** Attribute version id → value; null clears. */
  attributes: q.ValueMap;
  /** Tag id → true sets, false removes. */
  tags: Record<string, boolean>;
}

export type RowOutcome =
  | { line: number; outcome: 'new' | 'updated' | 'not_changed'; canonicalId: string; values: q.ValueMap }
  | { line: number; failed: string };

/** Whether two attribute values are the same value (as their JSON): equal primitives, or objects with the same JSON. */
const same = (a: unknown, b: unknown) =>
  a === b ||
  (typeof a === 'object' &&
    a !== null &&
    typeof b === 'object' &&
    b !== null &&
    JSON.stringify(a) === JSON.stringify(b));

/**
 * Brings PostgreSQL's statistics of the profile tables up to date after a bulk write (an import):
 * plans made on the statistics of before took minutes where they took seconds (a live segments
 * job over the imported profiles, planned for a sixth of the rows: docs/benchmarks.md "Live
 * segments"), and autovacuum analyzes them only a minute or more later.
 */
export async function refreshProfileStatistics(db: Queryable): Promise<void> {
  await db.query('analyze profiles, profile_sections, profile_identifiers, attribute_history');
}

/**
 * Writes a batch of import rows into one section with a handful of set-based statements: finds or
 * creates each row's profile by its (normalised) key (a new one gets the keyspace's mapped attribute), and writes
 * only what changes. Rows matching a locked identity fail; with `updateExisting` false, existing
 * profiles are left as they are.
 */
export async function importProfileRows(
  tx: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  section: SectionDefs,
  rows: ImportRow[],
  options: { updateExisting: boolean },
): Promise<RowOutcome[]> {
  const outcomes = new Map<number, RowOutcome>();
  const keys = [...new Set(rows.map((r) => r.key))];
  const existing = new Map(
    (await q.findProfilesByKeys(tx, scope.accountId, keyspace, keys)).map((r) => [r.profile_key, r.canonical_id]),
  );
  // A locked key has no profile. Hashing every key was a twentieth of the worker's CPU in an
  // import, so keys are hashed only when the account has locked anything.
  const unknown = keys.filter((k) => !existing.has(k));
  const locked = new Set<string>();
  if (unknown.length > 0 && (await q.hasLockedIdentities(tx, scope.accountId))) {
    const hashes = new Map(unknown.map((k) => [identityHash(scope, keyspace.keyspace_id, k).toString('hex'), k]));
    for (const h of await q.listLockedIdentities(
      tx,
      scope.accountId,
      [...hashes.keys()].map((x) => Buffer.from(x, 'hex')),
    ))
      locked.add(hashes.get(h.toString('hex'))!);
  }

  const fresh = unknown.filter((k) => !locked.has(k));
  const created = new Map<string, string>();
  if (fresh.length > 0) {
    const exportKeys = fresh.map(() => crypto.randomUUID());
    const ids = await q.insertProfilesBulk(tx, scope.accountId, exportKeys, scope.now);
    // The export keys need no identifier rows: they are found in profiles (queries.ts KeyspaceOfKey).
    const identifiers = fresh.map((key, i) => {
      const profileId = ids.get(exportKeys[i])!;
      created.set(key, profileId);
      return { keyspaceId: keyspace.keyspace_id, key, profileId };
    });
    await q.insertIdentifiersBulk(tx, scope.accountId, identifiers);
  }
  const current =
    existing.size > 0
      ? await q.listSectionDataByProfiles(tx, scope.accountId, [...existing.values()], section.id)
      : new Map<string, q.SectionDataRow>();
  const mapped = keyspace.mapped_attribute ? currentVersionId(section, keyspace.mapped_attribute) : undefined;

  // The state of each profile as the batch goes, so that a key repeated in the file counts right.
  const state = new Map<string, { attributes: q.ValueMap; tags: Record<string, boolean> }>();
  const patches = new Map<string, { attributes: q.ValueMap; tags: Record<string, boolean> }>();
  for (const row of rows) {
    if (locked.has(row.key)) {
      outcomes.set(row.line, { line: row.line, failed: `The key "${row.key}" belongs to a locked profile` });
      continue;
    }
    const isNew = created.has(row.key) && !state.has(row.key);
    const canonicalId = created.get(row.key) ?? existing.get(row.key)!;
    if (isNew) {
      // Everything of a new profile's first row is a change: its values but nulls, its true tags
      // (built once: the general path below made four copies of each row's maps).
      const attributes: q.ValueMap = {};
      for (const versionId in row.attributes)
        if (row.attributes[versionId] !== null) attributes[versionId] = row.attributes[versionId];
      if (mapped) attributes[mapped] = row.key;
      const tags: Record<string, boolean> = {};
      for (const tagId in row.tags) if (row.tags[tagId] === true) tags[tagId] = true;
      const after = { attributes, tags };
      state.set(row.key, after);
      patches.set(canonicalId, after);
      outcomes.set(row.line, { line: row.line, outcome: 'new', canonicalId, values: attributes });
      continue;
    }
    // A key created above has its state from its first row on.
    const before = state.get(row.key) ?? current.get(canonicalId) ?? { attributes: {}, tags: {} };
    if (!created.has(row.key) && !options.updateExisting) {
      outcomes.set(row.line, { line: row.line, outcome: 'not_changed', canonicalId, values: before.attributes });
      continue;
    }
    // What changes. The maps of this loop are never changed once made: `before` may be shared.
    const attributes: q.ValueMap = {};
    let attributesChanged = false;
    for (const versionId of Object.keys(row.attributes)) {
      const value = row.attributes[versionId];
      if (value === null ? before.attributes[versionId] !== undefined : !same(before.attributes[versionId], value)) {
        attributes[versionId] = value;
        attributesChanged = true;
      }
    }
    const tags: Record<string, boolean> = {};
    let tagsChanged = false;
    for (const tagId of Object.keys(row.tags)) {
      const value = row.tags[tagId];
      if ((before.tags[tagId] === true) !== value) {
        tags[tagId] = value;
        tagsChanged = true;
      }
    }
    // The values after the row: a null clears an attribute, a false removes a tag.
    const after = { attributes: before.attributes, tags: before.tags };
    if (attributesChanged) {
      after.attributes = { ...before.attributes, ...attributes };
      for (const versionId of Object.keys(attributes))
        if (attributes[versionId] === null) delete after.attributes[versionId];
    }
    if (tagsChanged) {
      after.tags = { ...before.tags, ...tags };
      for (const tagId of Object.keys(tags)) if (!tags[tagId]) delete after.tags[tagId];
    }
    state.set(row.key, after);
    const patch = patches.get(canonicalId);
    patches.set(
      canonicalId,
      patch
        ? { attributes: { ...patch.attributes, ...attributes }, tags: { ...patch.tags, ...tags } }
        : { attributes, tags },
    );
    const changed = attributesChanged || tagsChanged;
    outcomes.set(row.line, {
      line: row.line,
      outcome: changed ? 'updated' : 'not_changed',
      canonicalId,
      values: after.attributes,
    });
  }
  const writes = [...patches].filter(([, p]) => Object.keys(p.attributes).length + Object.keys(p.tags).length > 0);
  // Profiles created above have no section data yet: a plain insert, no update to try first.
  const createdIds = new Set(created.values());
  await q.insertSectionDataBulk(
    tx,
    scope.accountId,
    section.id,
    writes.filter(([profileId]) => createdIds.has(profileId)).map(([profileId, p]) => ({ profileId, ...p })),
    scope.now,
  );
  // The values replaced go to the attribute history as the rows are written.
  await q.patchSectionDataBulk(
    tx,
    scope.accountId,
    section.id,
    writes.filter(([profileId]) => !createdIds.has(profileId)).map(([profileId, p]) => ({ profileId, ...p })),
    scope.now,
  );
  await profilesChanged(
    tx,
    scope,
    writes.map(([profileId]) => profileId),
    CHANGED.data,
  );
  return rows.map((r) => outcomes.get(r.line)!);
}

/**
 * The canonical profiles of many keys of one keyspace, creating the missing ones (with the
 * keyspace's mapped attribute in `section`), as events of a source arrive for them. Keys of
 * locked profiles are answered in `locked`. Creation is serialised per account, so that two
 * batches naming the same new key create it once.
 */
export async function findOrCreateProfiles(
  tx: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  section: SectionDefs,
  keys: string[],
): Promise<{ profiles: Map<string, string>; locked: Set<string> }> {
  const unique = [...new Set(keys)];
  const profiles = new Map(
    (await q.findProfilesByKeys(tx, scope.accountId, keyspace, unique)).map((r) => [r.profile_key, r.canonical_id]),
  );
  const locked = new Set<string>();
  const unknown = unique.filter((k) => !profiles.has(k));
  if (unknown.length === 0) return { profiles, locked };
  await q.lockProfileCreation(tx, scope.accountId);
  const outcomes = await importProfileRows(
    tx,
    scope,
    keyspace,
    section,
    unknown.map((key, line) => ({ line, key, attributes: {}, tags: {} })),
    { updateExisting: false },
  );
  for (const o of outcomes) {
    if ('failed' in o) locked.add(unknown[o.line]);
    else profiles.set(unknown[o.line], o.canonicalId);
  }
  return { profiles, locked };
}

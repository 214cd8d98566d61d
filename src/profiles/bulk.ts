import crypto from 'node:crypto';
import type { SectionDefs } from '../definitions/definitions.ts';
import type { KeyspaceRow } from '../definitions/queries.ts';
import { Problem } from '../http/problems.ts';
import type { Queryable } from '../store/pool.ts';
import { normaliseKey } from './keys.ts';
import { currentVersionId, identityHash, type ProfileScope } from './profiles.ts';
import * as q from './queries.ts';

/** One row of an import: a profile key and the values to write in the section. */
export interface ImportRow {
  line: number;
  key: string;
  /** Attribute version id → value; null clears. */
  attributes: q.ValueMap;
  /** Tag id → true sets, false removes. */
  tags: Record<string, boolean>;
}

export type RowOutcome =
  | { line: number; outcome: 'new' | 'updated' | 'not_changed'; canonicalId: string; values: q.ValueMap }
  | { line: number; failed: string };

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Writes a batch of import rows into one section with a handful of set-based statements: finds or
 * creates each row's profile by key (a new one gets the keyspace's mapped attribute), and writes
 * only what changes. Rows matching a locked identity fail; with `updateExisting` false, existing
 * profiles are left as they are.
 */
export async function importProfileRows(tx: Queryable, scope: ProfileScope, keyspace: KeyspaceRow, section: SectionDefs, rows: ImportRow[], options: { updateExisting: boolean }): Promise<RowOutcome[]> {
  const outcomes = new Map<number, RowOutcome>();
  const valid: (ImportRow & { normalised: string })[] = [];
  for (const row of rows) {
    try {
      valid.push({ ...row, normalised: normaliseKey(keyspace.kind, row.key, 'key') });
    } catch (err) {
      if (!(err instanceof Problem)) throw err;
      outcomes.set(row.line, { line: row.line, failed: err.detail });
    }
  }
  const keys = [...new Set(valid.map((r) => r.normalised))];
  const hashes = new Map(keys.map((k) => [identityHash(scope, keyspace.keyspace_id, k).toString('hex'), k]));
  const locked = new Set((await q.listLockedIdentities(tx, scope.accountId, [...hashes.keys()].map((h) => Buffer.from(h, 'hex')))).map((h) => hashes.get(h.toString('hex'))!));
  const existing = new Map((await q.findProfilesByKeys(tx, scope.accountId, keyspace.keyspace_id, keys)).map((r) => [r.profile_key, r.canonical_id]));

  const fresh = keys.filter((k) => !existing.has(k) && !locked.has(k));
  const created = new Map<string, string>();
  if (fresh.length > 0) {
    const exportKeys = fresh.map(() => crypto.randomUUID());
    const ids = await q.insertProfilesBulk(tx, scope.accountId, exportKeys, scope.now);
    const exportKeyspace = scope.defs.keyspaces.find((k) => k.kind === 'export');
    const identifiers: { keyspaceId: string; key: string; profileId: string }[] = [];
    fresh.forEach((key, i) => {
      const profileId = ids.get(exportKeys[i])!;
      created.set(key, profileId);
      identifiers.push({ keyspaceId: keyspace.keyspace_id, key, profileId });
      if (exportKeyspace) identifiers.push({ keyspaceId: exportKeyspace.keyspace_id, key: exportKeys[i], profileId });
    });
    await q.insertIdentifiersBulk(tx, scope.accountId, identifiers);
  }
  const current = await q.listSectionDataByProfiles(tx, scope.accountId, [...existing.values()], section.id);
  const mapped = keyspace.mapped_attribute ? currentVersionId(section, keyspace.mapped_attribute) : undefined;

  // The state of each profile as the batch goes, so that a key repeated in the file counts right.
  const state = new Map<string, { attributes: q.ValueMap; tags: Record<string, boolean> }>();
  const patches = new Map<string, { attributes: q.ValueMap; tags: Record<string, boolean> }>();
  for (const row of valid) {
    if (locked.has(row.normalised)) {
      outcomes.set(row.line, { line: row.line, failed: `The key "${row.normalised}" belongs to a locked profile` });
      continue;
    }
    const isNew = created.has(row.normalised) && !state.has(row.normalised);
    const canonicalId = created.get(row.normalised) ?? existing.get(row.normalised)!;
    const before = state.get(row.normalised) ?? (created.has(row.normalised) ? { attributes: {}, tags: {} } : current.get(canonicalId) ?? { attributes: {}, tags: {} });
    if (!isNew && !created.has(row.normalised) && !options.updateExisting) {
      outcomes.set(row.line, { line: row.line, outcome: 'not_changed', canonicalId, values: before.attributes });
      continue;
    }
    const wanted: q.ValueMap = { ...row.attributes, ...(isNew && mapped ? { [mapped]: row.normalised } : {}) };
    const attributes: q.ValueMap = {};
    for (const [versionId, value] of Object.entries(wanted)) {
      if (value === null ? before.attributes[versionId] !== undefined : !same(before.attributes[versionId], value)) attributes[versionId] = value;
    }
    const tags: Record<string, boolean> = {};
    for (const [tagId, value] of Object.entries(row.tags)) if ((before.tags[tagId] === true) !== value) tags[tagId] = value;
    const after = {
      attributes: Object.fromEntries(Object.entries({ ...before.attributes, ...attributes }).filter(([, v]) => v !== null)),
      tags: Object.fromEntries(Object.entries({ ...before.tags, ...tags }).filter(([, v]) => v)),
    };
    state.set(row.normalised, after);
    const patch = patches.get(canonicalId) ?? { attributes: {}, tags: {} };
    patches.set(canonicalId, { attributes: { ...patch.attributes, ...attributes }, tags: { ...patch.tags, ...tags } });
    const changed = Object.keys(attributes).length + Object.keys(tags).length > 0;
    outcomes.set(row.line, { line: row.line, outcome: isNew ? 'new' : changed ? 'updated' : 'not_changed', canonicalId, values: after.attributes });
  }
  const writes = [...patches].filter(([, p]) => Object.keys(p.attributes).length + Object.keys(p.tags).length > 0);
  await q.patchSectionDataBulk(tx, scope.accountId, section.id, writes.map(([profileId, p]) => ({ profileId, ...p })));
  await q.insertAttributeHistoryBulk(tx, scope.accountId, section.id, writes.flatMap(([profileId, p]) => Object.entries(p.attributes).map(([versionId, value]) => ({ profileId, versionId, value }))), scope.now);
  return rows.map((r) => outcomes.get(r.line)!);
}

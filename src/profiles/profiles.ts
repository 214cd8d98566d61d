import crypto from 'node:crypto';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { hasLiveSegments, refreshLiveSegments, requireAllSections, sectionOf } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
import { recordWebhookEvents } from '../webhooks/events.ts';
import * as q from './queries.ts';
import type { IdentifierInSection, MergeCluster, UniqueIdentifier } from './schemas.ts';
import {
  currentVersionId,
  exportKeys,
  findByKey,
  identifierOf,
  identifiersOf,
  identityHash,
  locate,
  type Located,
  refuseLocked,
  refuseReadOnly,
} from './locate.ts';

/**
 * What a profile write changes that data kept beside profiles must follow (consents follow an
 * address, a section moved to another profile, a member leaving its cluster). The write reports
 * each change when it happens, inside its transaction, to the follower its caller hands it, so
 * that profiles know nothing of the areas that follow them.
 */
export interface ProfileFollower {
  /** An address attribute of a cluster's section changed value. */
  addressChanged(
    tx: Queryable,
    scope: AccountScope,
    change: { canonicalId: string; section: SectionDefs; attributeDiscriminator: string; from: string; to: string },
  ): Promise<void>;
  /** A section's values moved to the cluster holding `address` as its key (key update method delete); the source cluster may be deleted next. */
  sectionMoved(
    tx: Queryable,
    scope: AccountScope,
    move: { fromCanonicalId: string; toCanonicalId: string; sectionId: string; address: string },
  ): Promise<void>;
  /** A member is about to leave the cluster (unmerge): the cluster keeps what it showed. */
  memberLeaving(
    tx: Queryable,
    scope: AccountScope,
    cluster: { canonicalId: string; memberIds: string[] },
  ): Promise<void>;
  /** Profiles are being deleted (deleted, locked, or left with nothing): what is kept of them elsewhere goes too. */
  profilesDeleted(tx: Queryable, scope: AccountScope, profileIds: string[]): Promise<void>;
}

/**
 * The profile of a normalised key (identifierOf) to write to, created when there is none: 410 when
 * the key was locked, 403 through the read-only export keyspace.
 */
export async function locateOrCreate(
  tx: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<Located> {
  const found = await findByKey(tx, scope, keyspace, key);
  if (!found) await refuseLocked(tx, scope, keyspace, key);
  refuseReadOnly(keyspace);
  if (found) return found;
  const profileId = await insertNewProfile(tx, scope, keyspace, key);
  if (!profileId)
    throw new Problem(
      'AUD-1204',
      `A profile with ${keyspace.discriminator} key "${key}" was created at the same time; retry`,
    );
  return { keyspace, key, profileId, canonicalId: profileId };
}

/** Creates a standalone profile with one identifier (and its export key, in profiles itself); false when the key is taken. */
export async function insertNewProfile(
  tx: Queryable,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  key: string,
): Promise<string | undefined> {
  const profileId = await q.insertProfile(tx, scope.accountId, crypto.randomUUID(), scope.now);
  if (!(await q.insertIdentifier(tx, scope.accountId, keyspace.keyspace_id, key, profileId))) return undefined;
  return profileId;
}

/**
 * Creates a profile (SPEC §4.3): 409 when the key exists, 410 when it was locked; sets the
 * keyspace's mapped attribute in the section to the key (SPEC §1 rule 5).
 */
export async function createProfile(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
): Promise<UniqueIdentifier> {
  const { keyspace, key } = identifierOf(scope, id);
  const section = sectionOf(scope, id.section_discriminator);
  refuseReadOnly(keyspace);
  await refuseLocked(tx, scope, keyspace, key);
  const profileId = await insertNewProfile(tx, scope, keyspace, key);
  if (!profileId) throw new Problem('AUD-1204', `A profile with ${keyspace.discriminator} key "${key}" already exists`);
  const mapped = keyspace.mapped_attribute ? currentVersionId(section, keyspace.mapped_attribute) : undefined;
  if (mapped)
    await patchSection(tx, scope, {
      profileId,
      sectionId: section.id,
      attributes: { [mapped]: key },
      at: scope.now,
    });
  return { keyspace_discriminator: keyspace.discriminator, profile_key: key };
}

/**
 * What a write marked by profilesChanged changed of its profiles, as bits: their section data
 * (attributes, tags: a profile created with its data included, which has no events), their events,
 * or both (merges, unmerges, deletes). The live segments job evaluates a segment only over the
 * profiles whose writes can change it: a segment of attribute terms alone cannot change by an
 * event, nor one of event terms alone by section data.
 */
export const CHANGED = { data: 1, events: 2, both: 3 } as const;

/**
 * Marks profiles as written for the account's live segments (docs/aql.md "Live segments"), in the
 * transaction of the write, with what the write `changed` (CHANGED), and runs their job; nothing
 * when the account keeps none. Every write of what a segment tests calls it: section data
 * (patchSection), events, merges, unmerges, deletes and imports; and a switch of identifiers,
 * which may make a profile known or unknown (a trend's split from the projection).
 */
export async function profilesChanged(
  tx: Queryable,
  scope: AccountScope,
  profileIds: string[],
  changed: (typeof CHANGED)[keyof typeof CHANGED],
): Promise<void> {
  if (profileIds.length === 0 || !hasLiveSegments(scope.defs)) return;
  await q.insertProfileChanges(tx, scope.accountId, profileIds, changed);
  await refreshLiveSegments(tx, scope.accountId);
}

/**
 * Prunes the marks profilesChanged leaves for the count projections (src/segments/projection.ts),
 * in the caller's transaction (the live segments job's): those of transactions older than the
 * horizon recorded `afterMs` or more before the scope's time go, and a new horizon is recorded.
 * Answers how many went (null: none due yet) and whether any are left.
 */
export function pruneProjectionMarks(
  tx: Queryable,
  scope: AccountScope,
  afterMs: number,
): Promise<{ deleted: number | null; left: boolean }> {
  return q.pruneProjectionMarks(tx, scope.accountId, scope.now, afterMs);
}

/**
 * Takes up to `limit` of the profiles marked by profilesChanged, in the caller's transaction,
 * each with its cluster's canonical profile now (null: deleted since) and what its writes changed
 * (CHANGED's bits).
 */
export function takeProfileChanges(tx: Queryable, scope: AccountScope, limit: number): Promise<q.ProfileChange[]> {
  return q.takeProfileChanges(tx, scope.accountId, limit);
}

/** A merge patch of a canonical profile's section (q.patchSectionData), marked for the live segments. */
export async function patchSection(tx: Queryable, scope: AccountScope, write: q.SectionPatch): Promise<void> {
  await q.patchSectionData(tx, scope.accountId, write);
  await profilesChanged(tx, scope, [write.profileId], CHANGED.data);
}

/** Deletes a profile, its whole cluster, with all identifiers, data and events (SPEC §3.2). */
export async function deleteProfile(
  tx: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  follower: ProfileFollower,
): Promise<void> {
  requireAllSections(scope, 'deleting a profile');
  const located = await locate(tx, scope, id);
  await deleteProfiles(tx, scope, await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]), follower);
}

/**
 * Deletes profiles with everything kept of them: their identifiers, section data and consents by
 * their foreign keys, their history and events here, and what other areas keep through the
 * follower. The profiles are locked (q.lockClusterMembers) by then: the writers of events and history
 * that held them have committed, so these statements see their rows, and none can start.
 */
export async function deleteProfiles(
  tx: Queryable,
  scope: AccountScope,
  profileIds: string[],
  follower: ProfileFollower,
  options: { locked?: boolean } = {},
): Promise<void> {
  if (profileIds.length === 0) return;
  // A profile.deleted event of the cluster, ordered with the canonical profile's (the earliest created) other events.
  await recordWebhookEvents(tx, scope.accountId, 'profile.deleted', async () => [
    {
      orderingKey: profileIds.reduce((a, b) => (BigInt(a) < BigInt(b) ? a : b)),
      data: {
        profiles: (await exportKeys(tx, scope, profileIds)).map((k) => ({ export_key: k })),
        locked: !!options.locked,
      },
    },
  ]);
  await follower.profilesDeleted(tx, scope, profileIds);
  await q.deleteProfiles(tx, scope.accountId, profileIds);
  await profilesChanged(tx, scope, profileIds, CHANGED.both);
}

/** Locks profiles for good (SPEC §3.2): keyed hashes of their identifiers stay, the profiles go. */
async function lockForGood(
  tx: Queryable,
  scope: AccountScope,
  members: string[],
  follower: ProfileFollower,
): Promise<void> {
  const identifiers = await identifiersOf(tx, scope, members);
  await q.insertLockedIdentities(
    tx,
    scope.accountId,
    identifiers.map((i) => identityHash(scope, i.keyspace_id, i.profile_key)),
  );
  await deleteProfiles(tx, scope, members, follower, { locked: true });
}

/**
 * Locks a profile for good (SPEC §3.2): deletes its whole cluster and keeps only keyed hashes of
 * its identifiers, which refuse any later use of them.
 */
export async function lockProfile(
  tx: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  follower: ProfileFollower,
): Promise<void> {
  requireAllSections(scope, 'locking a profile');
  const located = await locate(tx, scope, id);
  await lockForGood(tx, scope, await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]), follower);
}

/** The key attributes (mapped to the email, mobile and CRM keyspaces) whose values block a merge when they differ. */
function blockingVersionIds(scope: AccountScope): Map<string, string> {
  const blocking = new Set(
    scope.defs.keyspaces
      .filter((k) => ['email', 'mobile', 'crm-id'].includes(k.kind) && k.mapped_attribute)
      .map((k) => k.mapped_attribute!),
  );
  const versions = new Map<string, string>();
  for (const section of scope.defs.sections) {
    for (const a of section.attributes)
      if (blocking.has(a.discriminator)) for (const v of a.versions) versions.set(v.id, a.discriminator);
  }
  return versions;
}

/**
 * Joins two clusters (SPEC §3.2, §4.3). The canonical profile is the earliest-created member, and
 * the cluster shows, per attribute and tag, the entry of the earliest-created member that has one,
 * so that the order and grouping of merges do not matter.
 */
export async function joinClusters(
  tx: Queryable,
  scope: AccountScope,
  a: string,
  b: string,
  options: { checkConflicts: boolean },
): Promise<string> {
  const all = await q.lockClusterMembers(tx, scope.accountId, [a, b]);
  const canonicalId = all[0];
  if (a === b) return canonicalId;
  const limit = scope.limits.merges_per_profile;
  if (limit !== null && all.length > limit)
    throw new Problem(
      'AUD-1216',
      `The merge would make a cluster of ${all.length} profiles; at most ${limit} can be merged`,
    );
  if (options.checkConflicts) {
    const blocking = blockingVersionIds(scope);
    const [left, right] = [
      await q.listSectionDataByProfile(tx, scope.accountId, a),
      await q.listSectionDataByProfile(tx, scope.accountId, b),
    ];
    for (const [sectionId, data] of left) {
      const other = right.get(sectionId);
      for (const [versionId, discriminator] of blocking) {
        const x = data.attributes[versionId];
        const y = other?.attributes[versionId];
        if (x !== undefined && y !== undefined && x !== y) {
          throw new Problem(
            'AUD-1215',
            `The profiles have different values of ${discriminator} (${JSON.stringify(x)} and ${JSON.stringify(y)}); they cannot be merged`,
          );
        }
      }
    }
  }
  await recordWebhookEvents(tx, scope.accountId, 'profile.merged', async () => {
    const merged = all.filter((id) => id !== canonicalId);
    const keys = await exportKeys(tx, scope, all);
    return [
      {
        orderingKey: canonicalId,
        data: {
          profile: { export_key: keys[0] },
          merged: keys.slice(1).map((k) => ({ export_key: k })),
        },
      },
    ].filter(() => merged.length > 0);
  });
  // The former canonical profiles stop leading: their own values stay as they are.
  for (const former of [a, b])
    if (former !== canonicalId)
      await q.settleSectionData(tx, scope.accountId, former, { at: scope.now, keep: 'own values' });
  await q.setCanonical(tx, scope.accountId, all, canonicalId, scope.now);
  await q.recomputeClusterData(tx, scope.accountId, canonicalId, all);
  await profilesChanged(tx, scope, all, CHANGED.both);
  return canonicalId;
}

/** Merges two profiles given by unique identifier; missing ones are created, a locked one locks the other (SPEC §3.2). */
export async function mergeProfiles(
  tx: Queryable,
  scope: AccountScope,
  profiles: UniqueIdentifier[],
  follower: ProfileFollower,
): Promise<void> {
  if (profiles.length !== 2)
    throw new Problem('AUD-1214', `profiles must hold exactly two profiles, not ${profiles.length}`);
  requireAllSections(scope, 'merging profiles');
  const sides: { canonicalId?: string; locked: boolean }[] = [];
  for (const [i, ref] of profiles.entries()) {
    const { keyspace, key } = identifierOf(scope, ref, `profiles[${i}].profile_key`);
    const found = await q.findProfileByKey(tx, scope.accountId, keyspace, key);
    if (found) {
      sides.push({ canonicalId: found.canonical_id, locked: false });
    } else if (await q.findLockedIdentity(tx, scope.accountId, [identityHash(scope, keyspace.keyspace_id, key)])) {
      sides.push({ locked: true });
    } else {
      if (keyspace.kind === 'export')
        throw new Problem('AUD-1201', `No profile with ${keyspace.discriminator} key "${key}"`);
      const created = await insertNewProfile(tx, scope, keyspace, key);
      if (!created)
        throw new Problem(
          'AUD-1204',
          `A profile with ${keyspace.discriminator} key "${key}" was created at the same time; retry`,
        );
      sides.push({ canonicalId: created, locked: false });
    }
  }
  const [x, y] = sides;
  if (x.locked || y.locked) {
    const unlocked = [x, y].filter((s) => !s.locked).map((s) => s.canonicalId!);
    if (unlocked.length > 0)
      await lockForGood(tx, scope, await q.lockClusterMembers(tx, scope.accountId, unlocked), follower);
    return;
  }
  await joinClusters(tx, scope, x.canonicalId!, y.canonicalId!, { checkConflicts: true });
}

/**
 * Switches a unique identifier of a profile (SPEC §4.3): `from` must be one of its identifiers,
 * `to` must be new to the account and agree with the section's mapped attribute (for the email
 * keyspace, the email attribute must hold it). `from` is removed unless another section still
 * holds it as its mapped attribute.
 */
export async function switchIdentifier(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  change: { from: UniqueIdentifier; to: UniqueIdentifier },
): Promise<void> {
  requireAllSections(scope, 'switching an identifier');
  const located = await locate(tx, scope, id);
  const section = sectionOf(scope, id.section_discriminator);
  const source = identifierOf(scope, change.from, 'from.profile_key');
  const target = identifierOf(scope, change.to, 'to.profile_key');
  // The export key is service-assigned: it can be neither given nor taken away.
  refuseReadOnly(source.keyspace);
  refuseReadOnly(target.keyspace);
  const members = await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]);
  const owner = (await identifiersOf(tx, scope, members)).find(
    (i) => i.keyspace_id === source.keyspace.keyspace_id && i.profile_key === source.key,
  );
  if (!owner)
    throw new Problem(
      'AUD-1221',
      `from: ${source.keyspace.discriminator} key "${source.key}" is not an identifier of this profile`,
    );
  await refuseLocked(tx, scope, target.keyspace, target.key);
  if (await q.findProfileByKey(tx, scope.accountId, target.keyspace, target.key)) {
    throw new Problem(
      'AUD-1222',
      `to: ${target.keyspace.discriminator} key "${target.key}" already identifies a profile`,
    );
  }
  const data = await q.listSectionDataByProfile(tx, scope.accountId, located.canonicalId);
  const mappedValue = (keyspace: KeyspaceRow, s: SectionDefs) => {
    const versionId = keyspace.mapped_attribute ? currentVersionId(s, keyspace.mapped_attribute) : undefined;
    return versionId === undefined ? undefined : data.get(s.id)?.attributes[versionId];
  };
  const held = mappedValue(target.keyspace, section);
  if (target.keyspace.kind === 'email' && held === undefined) {
    throw new Problem(
      'AUD-1223',
      `to: the profile has no ${target.keyspace.mapped_attribute} in section "${section.discriminator}" equal to "${target.key}"`,
    );
  }
  if (held !== undefined && held !== target.key) {
    throw new Problem(
      'AUD-1223',
      `to: the section "${section.discriminator}" holds ${target.keyspace.mapped_attribute} "${String(held)}", not "${target.key}"`,
    );
  }
  const keptElsewhere = scope.defs.sections.some(
    (s) => s.id !== section.id && mappedValue(source.keyspace, s) === source.key,
  );
  if (!keptElsewhere) await q.deleteIdentifier(tx, scope.accountId, source.keyspace.keyspace_id, source.key);
  await q.insertIdentifier(tx, scope.accountId, target.keyspace.keyspace_id, target.key, owner.profile_id);
  // Whether the profile is known may change (a trend from the projection keeps it per profile);
  // no segment term tests identifiers, so the job is asked the least: as for section data.
  await profilesChanged(tx, scope, [located.canonicalId], CHANGED.data);
}

/**
 * Takes a non-canonical member out of its cluster (SPEC §3.2): it becomes standalone with its own
 * identifiers, its own values, consents and events; the cluster keeps the values it showed, and
 * `follower` keeps what it holds of the cluster (consents).
 */
export async function unmergeProfile(
  tx: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  follower: ProfileFollower,
): Promise<void> {
  requireAllSections(scope, 'unmerging a profile');
  const located = await locate(tx, scope, id);
  const members = await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId]);
  if (members.length === 1) return;
  if (located.profileId === located.canonicalId) {
    throw new Problem(
      'AUD-1217',
      `The profile with ${located.keyspace.discriminator} key "${located.key}" is the canonical profile of its merge cluster and cannot be unmerged`,
    );
  }
  const remaining = members.filter((m) => m !== located.profileId);
  await recordWebhookEvents(tx, scope.accountId, 'profile.unmerged', async () => {
    const [profile, former] = await exportKeys(tx, scope, [located.profileId, located.canonicalId]);
    return [
      {
        orderingKey: located.canonicalId,
        data: { profile: { export_key: profile }, former_canonical: { export_key: former } },
      },
    ];
  });
  await follower.memberLeaving(tx, scope, { canonicalId: located.canonicalId, memberIds: members });
  // Cleared entries of a cluster that stays merged must keep hiding its members' older values.
  await q.settleSectionData(tx, scope.accountId, located.canonicalId, {
    at: scope.now,
    keep: remaining.length > 1 ? 'shown values and clears' : 'shown values',
  });
  await q.setCanonical(tx, scope.accountId, [located.profileId], located.profileId, scope.now);
  if (remaining.length > 1) await q.recomputeClusterData(tx, scope.accountId, located.canonicalId, remaining);
  await profilesChanged(tx, scope, members, CHANGED.both);
}

/**
 * The merge cluster of a profile: the canonical profile, then each member with when it was merged,
 * each with its keys in the keyspaces open to the API (the export key through the export keyspace
 * when that is). A key restricted to some sections may not read it, as it may not merge or unmerge:
 * a cluster joins the data of every section.
 */
export async function getMergeCluster(db: Queryable, scope: AccountScope, id: UniqueIdentifier): Promise<MergeCluster> {
  requireAllSections(scope, 'reading a merge cluster');
  const located = await locate(db, scope, id);
  const members = await q.listClusterMembersMerged(db, scope.accountId, located.canonicalId);
  const identifiers = await identifiersOf(
    db,
    scope,
    members.map((m) => m.profile_id),
  );
  const open = new Map(scope.defs.keyspaces.filter((k) => k.api_access).map((k) => [k.keyspace_id, k.discriminator]));
  return {
    items: members.map((m) => ({
      canonical: m.profile_id === located.canonicalId,
      merged_at: m.merged_at && m.merged_at.toISOString(),
      keys: identifiers
        .filter((i) => i.profile_id === m.profile_id && open.has(i.keyspace_id))
        .map((i) => ({ keyspace_discriminator: open.get(i.keyspace_id)!, profile_key: i.profile_key })),
    })),
  };
}

/** Erases every profile of an account being deleted, with their keys, values, history and events. */
export async function forgetAccountProfiles(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

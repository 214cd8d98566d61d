import { keepClusterConsents } from '../consents/consents.ts';
import { Problem } from '../http/problems.ts';
import type { Queryable } from '../store/pool.ts';
import { locate, type ProfileScope } from './profiles.ts';
import * as q from './queries.ts';

/**
 * Takes a non-canonical member out of its cluster (SPEC §3.2): it becomes standalone with its own
 * identifiers, its own values, consents and events; the cluster keeps the values and consents it
 * showed. (Its own module, because it uses the consents area, which uses profiles.ts.)
 */
export async function unmergeProfile(tx: Queryable, scope: ProfileScope, keyspaceDiscriminator: string, rawKey: string): Promise<void> {
  const located = await locate(tx, scope, keyspaceDiscriminator, rawKey);
  const members = (await q.lockClusterMembers(tx, scope.accountId, [located.canonicalId])).map((m) => m.profile_id);
  if (members.length === 1) return;
  if (located.profileId === located.canonicalId) {
    throw new Problem('AUD-1217', `The profile with ${located.keyspace.discriminator} key "${located.key}" is the canonical profile of its merge cluster and cannot be unmerged`);
  }
  const remaining = members.filter((m) => m !== located.profileId);
  await keepClusterConsents(tx, scope.accountId, located.canonicalId, members);
  // Cleared entries of a cluster that stays merged must keep hiding its members' older values.
  await q.settleSectionData(tx, scope.accountId, located.canonicalId, true, remaining.length > 1);
  await q.setCanonical(tx, scope.accountId, [located.profileId], located.profileId);
  if (remaining.length > 1) await q.recomputeClusterData(tx, scope.accountId, located.canonicalId, remaining);
}

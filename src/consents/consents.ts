import type { SqlValues } from '../aql/compile-sql.ts';
import type { ChannelRow, Definitions, KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections, sectionOf } from '../definitions/definitions.ts';
import { normaliseKey } from '../profiles/keys.ts';
import {
  clusterMembers,
  currentVersionId,
  exportKeys,
  identityHash,
  isLockedIdentity,
  locate,
  refuseReadOnly,
  sectionValues,
  type Located,
} from '../profiles/locate.ts';
import type { ProfileFollower } from '../profiles/profiles.ts';
import type { IdentifierInSection, UniqueIdentifier } from '../profiles/schemas.ts';
import { CONSENT_TYPES } from './schemas.ts';
import type { Queryable } from '../store/pool.ts';
import { recordWebhookEvents, type WebhookEvent } from '../webhooks/events.ts';
import * as q from './queries.ts';

/** A consent written, as its consent.changed event tells it. */
interface ChangedConsent {
  canonicalId: string;
  sectionId: string;
  topicId: string;
  channelId: string;
  type: string;
  previousType: string | null;
  source: string;
}

/** consent.changed events of written consents, in the writing transaction (docs/webhooks.md). */
async function consentsChanged(tx: Queryable, scope: AccountScope, changes: ChangedConsent[]): Promise<void> {
  if (changes.length === 0) return;
  await recordWebhookEvents(tx, scope.accountId, 'consent.changed', async () => {
    const ids = [...new Set(changes.map((c) => c.canonicalId))];
    const keys = new Map(ids.map((id, i) => [id, i]));
    const exported = await exportKeys(tx, scope, ids);
    return changes.map((c): WebhookEvent => {
      const section = scope.defs.sections.find((s) => s.id === c.sectionId);
      return {
        orderingKey: c.canonicalId,
        data: {
          profile: { export_key: exported[keys.get(c.canonicalId)!] },
          section_discriminator: section?.discriminator ?? '',
          topic_discriminator: section?.topics.find((t) => t.topic_id === c.topicId)?.discriminator ?? '',
          channel_discriminator: scope.defs.channels.find((ch) => ch.channel_id === c.channelId)?.discriminator ?? '',
          type: c.type,
          previous_type: c.previousType,
          source: c.source,
        },
      };
    });
  });
}

export type ConsentType = (typeof CONSENT_TYPES)[number];
/** The source of a consent given without one (ENDPOINTS.md "Facts"). */
export const DEFAULT_SOURCE = 'One API';
/** Consent types that permit marketing (SPEC §2.11). */
const PERMITTING = new Set(['opt-in', 'confirmed-opt-in']);

export interface ConsentRequest {
  topic_discriminator: string;
  channel_discriminator: string;
  type: string;
  reason: string;
  source?: string;
}
export interface Consent {
  topic_discriminator: string;
  channel_discriminator: string;
  type: string;
  reason: string;
  source: string;
  modified_at: string;
}
export interface Suppression {
  channel_discriminator: string;
  address: string;
  reason: string;
}

/** Refuses (403 AUD-1609) consents managed through a keyspace without manage_subscriptions (SPEC §2.1). */
export function refuseUnmanaged(keyspace: KeyspaceRow): void {
  if (!keyspace.manage_subscriptions) {
    throw new Problem(
      'AUD-1609',
      `Consents cannot be managed through the keyspace "${keyspace.discriminator}": it does not manage subscriptions`,
    );
  }
}

/** Whether a consent type permits marketing: opt-in or confirmed-opt-in (SPEC §2.11). */
export function permits(type: string): boolean {
  return PERMITTING.has(type);
}

/** Refuses (400 AUD-1602) a value that is not one of the four consent types; `field` names where it came from. */
export function requireConsentType(type: string, field: string): void {
  if (!(CONSENT_TYPES as readonly string[]).includes(type)) {
    throw new Problem(
      'AUD-1602',
      `${field}: consent state value "${type}" is unsupported; use one of ${CONSENT_TYPES.join(', ')}`,
    );
  }
}

/** A channel by discriminator; 400 AUD-1607 naming channel_discriminator when there is none. */
export function channelByDiscriminator(scope: Pick<AccountScope, 'defs'>, discriminator: string): ChannelRow {
  const channel = scope.defs.channels.find((c) => c.discriminator === discriminator);
  if (!channel) throw new Problem('AUD-1607', `channel_discriminator: channel ID "${discriminator}" not found`);
  return channel;
}

/** The attribute version that holds profiles' addresses on a channel in a section: the current version of the channel's address attribute. */
export function addressVersionId(section: SectionDefs, channel: ChannelRow): string | undefined {
  return channel.address_attribute ? currentVersionId(section, channel.address_attribute) : undefined;
}

/** The profile's address on a channel in a section: the value of the channel's address attribute. */
function addressOf(values: Record<string, unknown>, section: SectionDefs, channel: ChannelRow): string | undefined {
  const versionId = addressVersionId(section, channel);
  const value = versionId === undefined ? undefined : values[versionId];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * SPEC §3.2: a locked identity blocks any later opt-in that matches it, in all keyspaces, so an
 * opt-in for an address that is the locked key of the channel's keyspace is refused whichever
 * profile carries the address.
 */
async function refuseLockedAddress(
  tx: Queryable,
  scope: AccountScope,
  channel: ChannelRow,
  address: string,
): Promise<void> {
  const hashes = scope.defs.keyspaces
    .filter((k) => k.mapped_attribute !== null && k.mapped_attribute === channel.address_attribute)
    .map((k) => identityHash(scope, k.keyspace_id, comparableAddress(scope, channel, address)));
  if (hashes.length > 0 && (await isLockedIdentity(tx, scope, hashes))) {
    throw new Problem(
      'AUD-1202',
      `The address "${address}" on "${channel.discriminator}" belongs to a locked profile and cannot be opted in`,
    );
  }
}

/**
 * Creates or changes a consent (SPEC §3.1, §4.5): `created` for a new one (201), `changed` for a
 * supported move (204); 409 for the type it already has, or `unchanged` with `sameType: 'unchanged'`
 * (the legacy routes, whose clients send the same consent again); pending-opt-in and
 * confirmed-opt-in cannot be requested through the API yet.
 */
export async function createConsent(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  request: ConsentRequest,
  options: { sameType: 'refused' | 'unchanged' } = { sameType: 'refused' },
): Promise<'created' | 'changed' | 'unchanged'> {
  requireConsentType(request.type, 'type');
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  refuseUnmanaged(located.keyspace);
  const section = sectionOf(scope, id.section_discriminator);
  const topic = section.topics.find((t) => t.discriminator === request.topic_discriminator);
  if (!topic)
    throw new Problem(
      'AUD-1610',
      `topic_discriminator: topic "${request.topic_discriminator}" not found in section "${section.discriminator}"`,
    );
  const channel = channelByDiscriminator(scope, request.channel_discriminator);
  if (!channel.address_attribute)
    throw new Problem(
      'AUD-1608',
      `channel_discriminator: communication type invalid for the channel "${channel.discriminator}": it takes no consents`,
    );
  if (topic.channel_id !== null && topic.channel_id !== channel.channel_id) {
    const topicChannel = scope.defs.channels.find((c) => c.channel_id === topic.channel_id)!;
    throw new Problem(
      'AUD-1606',
      `The topic "${topic.discriminator}" is for the channel "${topicChannel.discriminator}", which differs from the channel "${channel.discriminator}" in the request`,
    );
  }
  const members = await clusterMembers(tx, scope, located.canonicalId);
  const current = (await q.listClusterConsents(tx, scope.accountId, members, section.id)).find(
    (c) => c.topic_id === topic.topic_id && c.channel_id === channel.channel_id,
  );
  if (request.type === 'pending-opt-in' && current?.type === 'pending-opt-in') {
    throw new Problem(
      'AUD-1604',
      `The consent to "${topic.discriminator}" on "${channel.discriminator}" is already pending`,
    );
  }
  if (request.type === 'pending-opt-in' || request.type === 'confirmed-opt-in') {
    throw new Problem('AUD-1603', `type: ${request.type} is not supported by the API yet; use opt-in or opt-out`);
  }
  const address = addressOf(await sectionValues(tx, scope, located.canonicalId, section.id), section, channel);
  if (address === undefined) {
    throw new Problem(
      'AUD-1601',
      `The profile has no ${channel.address_attribute} in section "${section.discriminator}" to consent with on "${channel.discriminator}"`,
    );
  }
  if (request.type === 'opt-in') await refuseLockedAddress(tx, scope, channel, address);
  if (current?.type === request.type) {
    if (options.sameType === 'unchanged') return 'unchanged';
    throw new Problem(
      'AUD-1605',
      `The consent to "${topic.discriminator}" on "${channel.discriminator}" is already ${request.type}`,
    );
  }
  await q.upsertConsents(tx, scope.accountId, located.canonicalId, [
    {
      topicId: topic.topic_id,
      channelId: channel.channel_id,
      sectionId: section.id,
      type: request.type,
      reason: request.reason,
      source: request.source ?? DEFAULT_SOURCE,
      address,
      modifiedAt: scope.now,
    },
  ]);
  await consentsChanged(tx, scope, [
    {
      canonicalId: located.canonicalId,
      sectionId: section.id,
      topicId: topic.topic_id,
      channelId: channel.channel_id,
      type: request.type,
      previousType: current?.type ?? null,
      source: request.source ?? DEFAULT_SOURCE,
    },
  ]);
  return current ? 'changed' : 'created';
}

/** A located profile's consents on the section's topics: its merge cluster's latest consent per topic and channel. */
export async function clusterConsents(
  db: Queryable,
  scope: AccountScope,
  located: Located,
  section: SectionDefs,
): Promise<Consent[]> {
  const members = await clusterMembers(db, scope, located.canonicalId);
  const consents = await q.listClusterConsents(db, scope.accountId, members, section.id);
  const topics = new Map(section.topics.map((t) => [t.topic_id, t.discriminator]));
  const channels = new Map(scope.defs.channels.map((c) => [c.channel_id, c.discriminator]));
  return consents
    .filter((c) => topics.has(c.topic_id))
    .map((c) => ({
      topic_discriminator: topics.get(c.topic_id)!,
      channel_discriminator: channels.get(c.channel_id)!,
      type: c.type,
      reason: c.reason,
      source: c.source,
      modified_at: c.modified_at.toISOString(),
    }));
}

/**
 * GET …/consents (SPEC §4.5): the profile's consents on the section's topics, of some types or
 * all, and the suppressions of the address used as profile key and of the address asked about.
 */
export async function getConsents(
  db: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  query: { consent_types?: string[]; suppression_channel_discriminator?: string; suppression_address?: string },
): Promise<{ items: Consent[]; suppression: Suppression[] }> {
  for (const type of query.consent_types ?? []) requireConsentType(type, 'consent_types');
  if ((query.suppression_channel_discriminator === undefined) !== (query.suppression_address === undefined)) {
    throw new Problem(
      'AUD-1611',
      'suppression_channel_discriminator and suppression_address go together: give both or neither',
    );
  }
  const located = await locate(db, scope, id);
  const all = await clusterConsents(db, scope, located, sectionOf(scope, id.section_discriminator));
  // `consent_types=` with no value is no filter, as without the parameter.
  const types = query.consent_types?.length ? query.consent_types : undefined;
  const items = types ? all.filter((c) => types.includes(c.type)) : all;
  const channels = new Map(scope.defs.channels.map((c) => [c.channel_id, c.discriminator]));
  // The profile key is an address on the channels whose address attribute its keyspace maps to.
  const wanted = scope.defs.channels
    .filter((c) => c.address_attribute !== null && c.address_attribute === located.keyspace.mapped_attribute)
    .map((c) => ({ channelId: c.channel_id, address: located.key }));
  if (query.suppression_channel_discriminator !== undefined) {
    const channel = channelByDiscriminator(scope, query.suppression_channel_discriminator);
    wanted.push({
      channelId: channel.channel_id,
      address: normaliseAddress(scope, channel, query.suppression_address!, 'suppression_address'),
    });
  }
  const suppressions = await q.listSuppressionsByAddresses(
    db,
    scope.accountId,
    wanted.map((w) => w.channelId),
    wanted.map((w) => w.address),
  );
  return {
    items,
    suppression: suppressions.map((s) => ({
      channel_discriminator: channels.get(s.channel_id)!,
      address: s.address,
      reason: s.reason,
    })),
  };
}

/** DELETE /v2/…/consents/opt-out-all: every opt-in and confirmed-opt-in of the profile, in every section, becomes opt-out. */
export async function optOutAll(tx: Queryable, scope: AccountScope, id: UniqueIdentifier): Promise<void> {
  requireAllSections(scope, 'opting out of all communication');
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  refuseUnmanaged(located.keyspace);
  const members = await clusterMembers(tx, scope, located.canonicalId);
  const permitting = (await q.listClusterConsents(tx, scope.accountId, members, null)).filter((c) => permits(c.type));
  await q.upsertConsents(
    tx,
    scope.accountId,
    located.canonicalId,
    permitting.map((c) => ({
      topicId: c.topic_id,
      channelId: c.channel_id,
      sectionId: c.section_id,
      type: 'opt-out',
      reason: 'Opted out of all communication',
      source: DEFAULT_SOURCE,
      address: c.address,
      modifiedAt: scope.now,
    })),
  );
  await consentsChanged(
    tx,
    scope,
    permitting.map((c) => ({
      canonicalId: located.canonicalId,
      sectionId: c.section_id,
      topicId: c.topic_id,
      channelId: c.channel_id,
      type: 'opt-out',
      previousType: c.type,
      source: DEFAULT_SOURCE,
    })),
  );
}

/**
 * Whether a profile may receive marketing on a topic and channel (SPEC §2.11): it has an opt-in or
 * confirmed-opt-in for them, and its address on the channel is not suppressed. Exports and sendings
 * decide with this. Topic discriminators are unique per section only: give the section to decide
 * in it; without one, any section's topic of that discriminator that permits sending will do.
 */
export async function maySend(
  db: Queryable,
  scope: AccountScope,
  canonicalId: string,
  on: { topic_discriminator: string; channel_discriminator: string; section_discriminator?: string },
): Promise<boolean> {
  const {
    topic_discriminator: topicDiscriminator,
    channel_discriminator: channelDiscriminator,
    section_discriminator: sectionDiscriminator,
  } = on;
  const channel = scope.defs.channels.find((c) => c.discriminator === channelDiscriminator);
  if (!channel) return false;
  const sections = scope.defs.sections.filter(
    (s) =>
      (sectionDiscriminator === undefined || s.discriminator === sectionDiscriminator) &&
      s.topics.some((t) => t.discriminator === topicDiscriminator),
  );
  if (sections.length === 0) return false;
  const members = await clusterMembers(db, scope, canonicalId);
  for (const section of sections) {
    const topic = section.topics.find((t) => t.discriminator === topicDiscriminator)!;
    const consent = (await q.listClusterConsents(db, scope.accountId, members, section.id)).find(
      (c) => c.topic_id === topic.topic_id && c.channel_id === channel.channel_id,
    );
    if (!consent || !permits(consent.type)) continue;
    const address = addressOf(await sectionValues(db, scope, canonicalId, section.id), section, channel);
    if (address === undefined) continue;
    // Suppressions are stored normalised; the attribute may hold the address written otherwise.
    if (
      (
        await q.listSuppressionsByAddresses(
          db,
          scope.accountId,
          [channel.channel_id],
          [comparableAddress(scope, channel, address)],
        )
      ).length === 0
    )
      return true;
  }
  return false;
}

/**
 * maySend for the profiles of a statement over many (exports), as SQL: `permitting`, a relation
 * (profile_id, in its order) of the canonical profiles whose cluster shows a consent that permits
 * marketing on one of the section's topics (ids) through the channel, for the statement to join;
 * and `sendable(address)`, which holds when the SQL `address`, a profile's value of the channel's
 * address attribute (addressVersionId) in the section as text, is an address that may be sent to.
 * A profile may receive marketing when it is in `permitting` and its address is sendable.
 * `account` is the placeholder of the account id. The rule is maySend's; the statement is in queries.ts.
 */
export function maySendSql(
  scope: Pick<AccountScope, 'defs'>,
  values: SqlValues,
  target: { account: string; section: SectionDefs; topicIds: string[]; channel: ChannelRow },
): { permitting: string; sendable: (address: string) => string } {
  return q.maySendRelation(values, {
    account: target.account,
    sectionId: target.section.id,
    topicIds: target.topicIds,
    channelId: target.channel.channel_id,
    addressKind: addressKeyspace(scope.defs, target.channel)?.kind,
    permitting: [...PERMITTING],
  });
}

/**
 * Consents follow the profile writes that move what they hang on: the profile write reports its
 * changes here, within its transaction (its caller hands this follower to it).
 */
export const consentsFollowProfiles: ProfileFollower = {
  /** On unmerge: the cluster keeps the consents it showed, as consents of its canonical profile. */
  async memberLeaving(tx, scope, { canonicalId, memberIds }) {
    const shown = await q.listClusterConsents(tx, scope.accountId, memberIds, null);
    await q.upsertConsents(
      tx,
      scope.accountId,
      canonicalId,
      shown
        .filter((c) => c.profile_id !== canonicalId)
        .map((c) => ({
          topicId: c.topic_id,
          channelId: c.channel_id,
          sectionId: c.section_id,
          type: c.type,
          reason: c.reason,
          source: c.source,
          address: c.address,
          modifiedAt: c.modified_at,
        })),
    );
  },

  /** A section moved to another profile (key update method delete): its active consents (opt-in, confirmed-opt-in) are copied there, at the new address. */
  async sectionMoved(tx, scope, { fromCanonicalId, toCanonicalId, sectionId, address }) {
    const members = await clusterMembers(tx, scope, fromCanonicalId);
    const active = (await q.listClusterConsents(tx, scope.accountId, members, sectionId)).filter((c) =>
      permits(c.type),
    );
    await q.upsertConsents(
      tx,
      scope.accountId,
      toCanonicalId,
      active.map((c) => ({
        topicId: c.topic_id,
        channelId: c.channel_id,
        sectionId: c.section_id,
        type: c.type,
        reason: c.reason,
        source: c.source,
        address,
        modifiedAt: scope.now,
      })),
    );
  },

  /** When an address attribute changes, the consents given for the old address follow it (SPEC §4.4). */
  async addressChanged(tx, scope, { canonicalId, section, attributeDiscriminator, from, to }) {
    const channels = scope.defs.channels
      .filter((c) => c.address_attribute === attributeDiscriminator)
      .map((c) => c.channel_id);
    if (channels.length === 0 || from === to) return;
    await q.updateConsentAddress(tx, scope.accountId, {
      memberIds: await clusterMembers(tx, scope, canonicalId),
      sectionId: section.id,
      channelIds: channels,
      from,
      to,
    });
  },

  /** Deleted profiles' consent history goes with them. */
  async profilesDeleted(tx, scope, profileIds) {
    await q.deleteConsentHistory(tx, scope.accountId, profileIds);
  },
};

// ---- Suppressions (operator API and manifest) ----

export async function listSuppressions(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'defs'>,
): Promise<Suppression[]> {
  const channels = new Map(scope.defs.channels.map((c) => [c.channel_id, c.discriminator]));
  return (await q.listSuppressionsByAccount(db, scope.accountId)).map((s) => ({
    channel_discriminator: channels.get(s.channel_id)!,
    address: s.address,
    reason: s.reason,
  }));
}

/** The keyspace whose keys are a channel's addresses: the one mapped to its address attribute (the email keyspace for the email channel). */
export function addressKeyspace(defs: Pick<Definitions, 'keyspaces'>, channel: ChannelRow): KeyspaceRow | undefined {
  return defs.keyspaces.find((k) => k.mapped_attribute !== null && k.mapped_attribute === channel.address_attribute);
}

/** An address as profile keys of the channel's keyspace are written (email lower-cased, mobile in E.164); 400 naming `field` when it is not one. */
export function normaliseAddress(
  scope: Pick<AccountScope, 'defs'>,
  channel: ChannelRow,
  address: string,
  field: string,
): string {
  const keyspace = addressKeyspace(scope.defs, channel);
  return keyspace ? normaliseKey(keyspace.kind, address, field) : address;
}

/** An address held by a profile, normalised as suppressions and keys are when it can be; as it is otherwise. */
function comparableAddress(scope: Pick<AccountScope, 'defs'>, channel: ChannelRow, address: string): string {
  try {
    return normaliseAddress(scope, channel, address, 'address');
  } catch {
    return address;
  }
}

/**
 * Whether an address is suppressed on a channel (SPEC §2.11): transactional mail is not sent to it
 * either. Read in one statement with the other look-ups of the same turn of the event loop (the
 * sends a worker has under way; docs/benchmarks.md "Transactional mail").
 */
export async function isSuppressed(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'defs'>,
  channelDiscriminator: string,
  address: string,
): Promise<boolean> {
  const channel = scope.defs.channels.find((c) => c.discriminator === channelDiscriminator);
  if (!channel) return false;
  return q.isSuppressedShared(db, scope.accountId, channel.channel_id, comparableAddress(scope, channel, address));
}

/** Suppresses an address on a channel (or changes the reason). */
export async function addSuppression(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'defs'>,
  s: Suppression,
): Promise<void> {
  const channel = scope.defs.channels.find((c) => c.discriminator === s.channel_discriminator);
  if (!channel)
    throw new Problem('AUD-1607', `channel_discriminator: channel ID "${s.channel_discriminator}" not found`);
  await q.upsertSuppression(db, scope.accountId, {
    channelId: channel.channel_id,
    address: normaliseAddress(scope, channel, s.address, 'address'),
    reason: s.reason,
  });
}

export async function removeSuppression(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'defs'>,
  channelDiscriminator: string,
  address: string,
): Promise<void> {
  const channel = scope.defs.channels.find((c) => c.discriminator === channelDiscriminator);
  if (
    !channel ||
    !(await q.deleteSuppression(
      db,
      scope.accountId,
      channel.channel_id,
      normaliseAddress(scope, channel, address, 'address'),
    ))
  ) {
    throw new Problem('AUD-1', `No suppression of "${address}" on "${channelDiscriminator}"`);
  }
}

export interface ImportedConsent {
  canonicalId: string;
  topicId: string;
  channelId: string;
  sectionId: string;
  type: string;
  address: string;
  resubscribe: boolean;
}

/**
 * Consents of an import batch (SPEC §2.13): each is written unless the profile already has that
 * type, and an opted-out consent is turned back only when the mapping says resubscribe_if_opted_out.
 * `newProfiles`: canonical profiles the caller created in this transaction and merged with none,
 * which have no consents to look up yet.
 */
export async function importConsents(
  tx: Queryable,
  scope: AccountScope,
  items: ImportedConsent[],
  label: string,
  newProfiles: ReadonlySet<string> = new Set(),
): Promise<void> {
  if (items.length === 0) return;
  const known = [...new Set(items.map((i) => i.canonicalId))].filter((id) => !newProfiles.has(id));
  const current = new Map(
    (known.length === 0 ? [] : await q.listClusterConsentsBulk(tx, scope.accountId, known)).map((c) => [
      `${c.canonical_id}/${c.topic_id}/${c.channel_id}`,
      c.type,
    ]),
  );
  const writes = new Map<string, q.ConsentWrite & { profileId: string }>();
  for (const item of items) {
    const id = `${item.canonicalId}/${item.topicId}/${item.channelId}`;
    const type = writes.get(id)?.type ?? current.get(id);
    if (type === item.type) continue;
    if (type === 'opt-out' && item.type !== 'opt-out' && !item.resubscribe) continue;
    writes.set(id, {
      profileId: item.canonicalId,
      topicId: item.topicId,
      channelId: item.channelId,
      sectionId: item.sectionId,
      type: item.type,
      reason: label,
      source: label,
      address: item.address,
      modifiedAt: scope.now,
    });
  }
  const all = [...writes.values()];
  await q.upsertConsentsBulk(
    tx,
    scope.accountId,
    all.filter((w) => newProfiles.has(w.profileId)),
    true,
  );
  await q.upsertConsentsBulk(
    tx,
    scope.accountId,
    all.filter((w) => !newProfiles.has(w.profileId)),
  );
  await consentsChanged(
    tx,
    scope,
    all.map((w) => ({
      canonicalId: w.profileId,
      sectionId: w.sectionId,
      topicId: w.topicId,
      channelId: w.channelId,
      type: w.type,
      previousType: current.get(`${w.profileId}/${w.topicId}/${w.channelId}`) ?? null,
      source: label,
    })),
  );
}

/** Erases the consents, their history and the suppressions of an account being deleted. */
export async function forgetAccountConsents(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

import type { Static } from 'typebox';
import type { ChannelRow, SectionDefs, TopicRow } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { rootFolderDiscriminator } from '../definitions/builtins.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { findProfile, locate, refuseReadOnly } from '../profiles/locate.ts';
import { createProfile } from '../profiles/profiles.ts';
import type { IdentifierInSection } from '../profiles/schemas.ts';
import type { Queryable } from '../store/pool.ts';
import {
  addressKeyspace,
  channelByDiscriminator,
  clusterConsents,
  createConsent,
  normaliseAddress,
  permits,
  refuseUnmanaged,
  requireConsentType,
} from './consents.ts';
import type {
  AddressConsentRequest,
  AddressListParams,
  AddressParams,
  ConsentList,
  ConsentListEvaluation,
  ConsentListParams,
  ConsentListTopic,
  Subscription,
  SubscriptionRequest,
} from './schemas.ts';

/**
 * The legacy consent routes (ENDPOINTS.md "Legacy consent routes"; docs/consents.md), kept for
 * released integrations. They are views of the consents of `consents.ts`, never a second store:
 * a consent list is a topic folder of a section (its root folder holds the topics without a
 * folder), and every write goes through createConsent, so the v2 routes see what these write.
 */

/** The reason of consents written through these routes, whose bodies carry none; the source is the v2 default. */
export const LEGACY_REASON = 'Set through a legacy consent route';

/** A consent list: a topic folder, or the root folder (no folder id). */
interface ConsentListDef {
  discriminator: string;
  name: string;
  folderId: string | null;
}

/** A section's consent lists: its root folder, named after the section since the root has no name, then every folder, nested ones included. */
function consentListsOf(section: SectionDefs, vendor: string): ConsentListDef[] {
  return [
    { discriminator: rootFolderDiscriminator(vendor), name: section.name, folderId: null },
    ...section.folders.map((f) => ({ discriminator: f.discriminator, name: f.name, folderId: f.folder_id })),
  ];
}

/** A consent list of the section, or 404 AUD-1612. */
function consentListOf(section: SectionDefs, vendor: string, discriminator: string): ConsentListDef {
  const list = consentListsOf(section, vendor).find((l) => l.discriminator === discriminator);
  if (!list)
    throw new Problem(
      'AUD-1612',
      `consent_list_discriminator: consent list "${discriminator}" not found in section "${section.discriminator}"`,
    );
  return list;
}

/** The topics directly in a list's folder: a subfolder is a list of its own, so each topic is in exactly one list. */
function topicsOf(section: SectionDefs, list: ConsentListDef): TopicRow[] {
  return section.topics.filter((t) => t.folder_id === list.folderId);
}

/** The topic a request names, in its list when it names one; 400 AUD-1610 otherwise, as the v2 route. */
function topicOf(section: SectionDefs, list: ConsentListDef | undefined, discriminator: string): TopicRow {
  const topic = (list ? topicsOf(section, list) : section.topics).find((t) => t.discriminator === discriminator);
  if (!topic) {
    const where = list
      ? `consent list "${list.discriminator}" of section "${section.discriminator}"`
      : `section "${section.discriminator}"`;
    throw new Problem('AUD-1610', `topic_discriminator: topic "${discriminator}" not found in ${where}`);
  }
  return topic;
}

/**
 * The profile an address names: its key in the keyspace holding the channel's addresses (the email
 * keyspace for the email channel), normalised as profile keys are (SPEC §2.2).
 */
function profileAtAddress(
  scope: AccountScope,
  ref: AddressParams,
  sectionDiscriminator: string,
): { channel: ChannelRow; id: IdentifierInSection } {
  const channel = channelByDiscriminator(scope, ref.channel_discriminator);
  const keyspace = addressKeyspace(scope.defs, channel);
  if (!keyspace)
    throw new Problem(
      'AUD-1608',
      `channel_discriminator: communication type invalid for the channel "${channel.discriminator}": it has no addresses`,
    );
  const key = normaliseAddress(scope, channel, ref.address, 'address');
  return {
    channel,
    id: {
      keyspace_discriminator: keyspace.discriminator,
      profile_key: key,
      section_discriminator: sectionDiscriminator,
    },
  };
}

/** GET /audience/sections/{s}/consent-lists. */
export function listConsentLists(
  scope: AccountScope,
  vendor: string,
  sectionDiscriminator: string,
): Static<typeof ConsentList>[] {
  return consentListsOf(sectionOf(scope, sectionDiscriminator), vendor).map((l) => ({
    discriminator: l.discriminator,
    name: l.name,
  }));
}

/** GET /audience/sections/{s}/consent-lists/{list}/topics. */
export function listConsentListTopics(
  scope: AccountScope,
  vendor: string,
  ref: ConsentListParams,
): Static<typeof ConsentListTopic>[] {
  const section = sectionOf(scope, ref.section_discriminator);
  return topicsOf(section, consentListOf(section, vendor, ref.consent_list_discriminator)).map((t) => ({
    discriminator: t.discriminator,
    name: t.name,
  }));
}

/**
 * POST /audience/channels/{channel}/addresses/{address}/consents: the consent of the profile at
 * the address to the named topic or, without one, to every topic of the list (of the section,
 * without a list) that is for this channel or for none. Each goes through createConsent, with
 * every rule of the v2 route but one: a consent that already has the type is left as it is and the
 * request succeeds, since released shops send the same consent again on every account update and
 * read anything but success as a failure.
 * An address no profile has gets one, as set attributes version 1 does, so that a shop's consent
 * for a new customer is not lost; createProfile also gives it the address in the section, which
 * a consent needs (AUD-1601).
 */
export async function consentAtAddress(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  ref: AddressParams,
  request: AddressConsentRequest,
): Promise<void> {
  requireConsentType(request.type, 'type');
  const { channel, id } = profileAtAddress(scope, ref, request.section_discriminator);
  const section = sectionOf(scope, request.section_discriminator);
  const list =
    request.consent_list_discriminator === undefined
      ? undefined
      : consentListOf(section, vendor, request.consent_list_discriminator);
  const topics =
    request.topic_discriminator !== undefined
      ? [topicOf(section, list, request.topic_discriminator)]
      : (list ? topicsOf(section, list) : section.topics).filter(
          (t) => t.channel_id === null || t.channel_id === channel.channel_id,
        );
  if (topics.length === 0) {
    const where = list ? `consent list "${list.discriminator}"` : `section "${section.discriminator}"`;
    throw new Problem(
      'AUD-1610',
      `topic_discriminator: the ${where} holds no topic for the channel "${channel.discriminator}"`,
    );
  }
  if (!(await findProfile(tx, scope, id))) await createProfile(tx, scope, id);
  for (const topic of topics) {
    await createConsent(
      tx,
      scope,
      id,
      {
        topic_discriminator: topic.discriminator,
        channel_discriminator: channel.discriminator,
        type: request.type,
        reason: LEGACY_REASON,
      },
      { sameType: 'unchanged' },
    );
  }
}

/**
 * GET …/addresses/{address}/consents/sections/{s}/consent-lists/{list}/evaluations: the topics of
 * the list that the profile at the address has opted in to on the channel, as the v2 route shows
 * them (a merge cluster's latest consent per topic). An address no profile has has opted in to
 * nothing: no items, and nothing created (a shop module reads 404 as a failure).
 */
export async function evaluateConsentList(
  db: Queryable,
  scope: AccountScope,
  vendor: string,
  ref: AddressListParams,
): Promise<ConsentListEvaluation> {
  const { channel, id } = profileAtAddress(scope, ref, ref.section_discriminator);
  const section = sectionOf(scope, ref.section_discriminator);
  const inList = new Set(
    topicsOf(section, consentListOf(section, vendor, ref.consent_list_discriminator)).map((t) => t.discriminator),
  );
  const located = await findProfile(db, scope, id);
  if (!located) return { items: [] };
  return {
    items: (await clusterConsents(db, scope, located, section))
      .filter(
        (c) =>
          c.channel_discriminator === channel.discriminator && inList.has(c.topic_discriminator) && permits(c.type),
      )
      .map((c) => ({ topic_discriminator: c.topic_discriminator })),
  };
}

/**
 * POST /audience/keyspaces/{k}/profiles/{key}/sections/{s}/subscriptions: opts the profile in to
 * the topic through createConsent. The body names no channel: it is the topic's channel, or for a
 * topic of every channel the one whose addresses the keyspace's keys are (email for the email
 * keyspace); through another keyspace (CRM ID) such a topic is refused, since no channel is
 * implied. Its id names the consent (profile, topic, channel): clients require one.
 */
export async function subscribe(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  id: IdentifierInSection,
  request: SubscriptionRequest,
): Promise<Subscription> {
  const located = await locate(tx, scope, id);
  // createConsent checks these too; here they come before choosing the channel, as in the v2 route's order.
  refuseReadOnly(located.keyspace);
  refuseUnmanaged(located.keyspace);
  const section = sectionOf(scope, id.section_discriminator);
  const list =
    request.consent_list_discriminator === undefined
      ? undefined
      : consentListOf(section, vendor, request.consent_list_discriminator);
  const topic = topicOf(section, list, request.topic_discriminator);
  const channel = scope.defs.channels.find((c) =>
    topic.channel_id !== null
      ? c.channel_id === topic.channel_id
      : c.address_attribute !== null && c.address_attribute === located.keyspace.mapped_attribute,
  );
  if (!channel) {
    throw new Problem(
      'AUD-1611',
      `topic_discriminator: the topic "${topic.discriminator}" is for every channel and keys of "${located.keyspace.discriminator}" are no channel's addresses; subscribe through the keyspace of the channel's addresses`,
    );
  }
  await createConsent(
    tx,
    scope,
    id,
    {
      topic_discriminator: topic.discriminator,
      channel_discriminator: channel.discriminator,
      type: 'opt-in',
      reason: LEGACY_REASON,
    },
    { sameType: 'unchanged' },
  );
  return { id: `${located.canonicalId}-${topic.topic_id}-${channel.channel_id}` };
}

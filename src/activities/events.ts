import {
  addressVersionId,
  channelByDiscriminator,
  consentsFollowProfiles,
  importConsents,
  type ImportedConsent,
} from '../consents/consents.ts';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { activityEventTypes, namespace } from '../definitions/builtins.ts';
import { keyspaceForProfileAccess } from '../definitions/definitions.ts';
import { findOrCreateProfiles } from '../profiles/bulk.ts';
import { appendEvents, lockProfilesForEvents, type ProfilesLockedForEvents } from '../profiles/events.ts';
import { normaliseKey } from '../profiles/keys.ts';
import { refuseReadOnly, sectionValues } from '../profiles/locate.ts';
import type { ProfileFollower } from '../profiles/profiles.ts';
import type { Queryable } from '../store/pool.ts';
import { channelOf } from './activities.ts';
import * as q from './queries.ts';
import {
  EMAIL_EVENT_TYPES,
  FORM_EVENT_TYPES,
  SMS_EVENT_TYPES,
  type Activity,
  type ActivityEventInput,
  type IngestionResult,
} from './schemas.ts';

/** The event types each channel takes. */
const TYPES_OF = { email: EMAIL_EVENT_TYPES, sms: SMS_EVENT_TYPES, forms: FORM_EVENT_TYPES } as const;

/** The optional fields of an event and the types that carry them (SPEC §2.16); the others are refused on other types. */
const FIELD_TYPES: Record<string, { types: readonly string[]; data: string }> = {
  split_id: { types: EMAIL_EVENT_TYPES, data: 'splitId' },
  variation: { types: EMAIL_EVENT_TYPES, data: 'variation' },
  device: { types: ['OPENED', 'CLICKED'], data: 'device' },
  location: { types: ['OPENED', 'CLICKED'], data: 'location' },
  link_id: { types: ['CLICKED'], data: 'linkId' },
  link_url: { types: ['CLICKED'], data: 'linkUrl' },
  link_title: { types: ['CLICKED'], data: 'linkTitle' },
  bounce_code: { types: ['BOUNCED'], data: 'bounceCode' },
  unsubscribe_topic: { types: ['UNSUBSCRIBED'], data: 'unsubscribeTopic' },
};

const FIELDS = Object.entries(FIELD_TYPES);

/** Rethrows a problem of one item with the item's place in front of its detail. */
function atItem<T>(item: number, field: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof Problem) throw err.within(`items[${item}].${field}: `);
    throw err;
  }
}

/** An event checked against its activity, ready to be recorded. */
interface Checked {
  item: number;
  event: ActivityEventInput;
  activity: Activity & { section_id: string };
  section: SectionDefs;
  keyspace: KeyspaceRow;
  key: string;
  channel: 'email' | 'sms' | 'forms';
}

/**
 * Records events of activities (docs/activities.md "Events"): each on the profile its keyspace and
 * key locate (created when missing), once per activity, type and correlation id, as a profile
 * event of its channel's built-in event type, counted in the activity's counters; an UNSUBSCRIBED
 * event with a topic opts the profile out of that topic. Every event is checked first: one bad
 * event refuses the batch (400 naming the item and field) and records nothing. Events of locked
 * profiles are skipped and reported. The operator's ingestion route and the transactional mail
 * area record events through here.
 */
export async function recordActivityEvents(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  events: ActivityEventInput[],
): Promise<IngestionResult> {
  const checked = await checkEvents(tx, scope, events);

  // The profiles, per keyspace and section (a new profile gets its key's mapped attribute there).
  const groups = new Map<string, Checked[]>();
  for (const c of checked) {
    const id = `${c.keyspace.keyspace_id}/${c.section.id}`;
    const group = groups.get(id);
    if (group) group.push(c);
    else groups.set(id, [c]);
  }
  const profileOf = new Map<Checked, string>();
  const skipped: IngestionResult['skipped'] = [];
  for (const group of groups.values()) {
    const { profiles, locked } = await findOrCreateProfiles(
      tx,
      scope,
      group[0].keyspace,
      group[0].section,
      group.map((c) => c.key),
    );
    for (const c of group) {
      if (locked.has(c.key))
        skipped.push({ item: c.item, reason: `The profile with ${c.keyspace.discriminator} key "${c.key}" is locked` });
      else profileOf.set(c, profiles.get(c.key)!);
    }
  }
  // Locked before anything is written to them (activity events included, which have no foreign
  // key either): a profile deleted since it was found is skipped, one being deleted waits for us.
  const present = await lockProfilesForEvents(tx, scope, [...profileOf.values()]);
  for (const [c, profileId] of profileOf) {
    if (present.has(profileId)) continue;
    profileOf.delete(c);
    skipped.push({ item: c.item, reason: `The profile with ${c.keyspace.discriminator} key "${c.key}" was deleted` });
  }
  skipped.sort((a, b) => a.item - b.item);

  const writes = new Map<string, { c: Checked; row: q.EventWrite }>();
  for (const c of checked) {
    const profileId = profileOf.get(c);
    if (profileId === undefined) continue;
    const e = c.event;
    const sourceTime = e.event_time === undefined ? null : new Date(e.event_time);
    const row: q.EventWrite = {
      activity_id: e.activity_id,
      type: e.type,
      correlation_id: e.correlation_id,
      section_id: c.section.id,
      profile_id: profileId,
      event_time: sourceTime ?? scope.now,
      source_time: sourceTime,
      split_id: e.split_id,
      variation: e.variation,
      device: e.device,
      location: e.location,
      link_id: e.link_id,
      link_url: e.link_url,
      link_title: e.link_title,
      bounce_code: e.bounce_code,
      unsubscribe_topic: e.unsubscribe_topic,
    };
    // An event sent twice in one batch is recorded as first sent, like one sent again later.
    const id = `${e.activity_id}\n${e.type}\n${e.correlation_id}`;
    if (!writes.has(id)) writes.set(id, { c, row });
  }
  const added =
    writes.size === 0
      ? []
      : await q.insertEvents(
          tx,
          scope.accountId,
          [...writes.values()].map((w) => w.row),
          scope.now,
        );
  const recorded = added.map((a) => writes.get(`${a.activity_id}\n${a.type}\n${a.correlation_id}`)!);

  await writeProfileEvents(tx, scope, present, vendor, recorded);
  await optOut(tx, scope, vendor, recorded);
  await q.countEvents(tx, scope.accountId, added);
  return {
    received: events.length,
    recorded: recorded.length,
    duplicates: events.length - recorded.length - skipped.length,
    skipped,
  };
}

/**
 * The types of the events recorded for an activity under a correlation id: how another area that
 * sent a message learns what became of it (a transactional send's DELIVERED and BOUNCED reports
 * come in through the ingestion endpoint with its transaction id as their correlation id).
 */
export async function recordedEventTypes(
  db: Queryable,
  scope: AccountScope,
  activityId: string,
  correlationId: string,
): Promise<string[]> {
  return q.listEventTypes(
    db,
    scope.accountId,
    activityId,
    [...new Set([...EMAIL_EVENT_TYPES, ...SMS_EVENT_TYPES, ...FORM_EVENT_TYPES])],
    correlationId,
  );
}

/** Checks every event against its activity, keyspace and section; the first fault refuses the batch. */
async function checkEvents(db: Queryable, scope: AccountScope, events: ActivityEventInput[]): Promise<Checked[]> {
  const ids = [...new Set(events.map((e) => e.activity_id))];
  const activities = new Map(
    (ids.length === 0 ? [] : await q.listActivitiesByIds(db, scope.accountId, ids)).map((r) => [r.activity_id, r]),
  );
  const keyspaces = new Map<string, KeyspaceRow>();
  // Per activity: the activity as the checks read it, its section and channel (a batch names few activities).
  const known = new Map<string, { activity: Checked['activity']; section: SectionDefs; channel: Checked['channel'] }>();
  return events.map((event, item) => {
    let of = known.get(event.activity_id);
    if (!of) {
      const row = activities.get(event.activity_id);
      const section = row && scope.defs.sections.find((s) => s.id === row.section_id);
      if (!row || !section || row.archived_at !== null)
        throw new Problem(
          'AUD-2003',
          `items[${item}].activity_id: no activity "${event.activity_id}"${row ? ' (it is archived)' : ''}`,
        );
      if (scope.caller?.sectionIds && !scope.caller.sectionIds.includes(section.id)) {
        throw new Problem(
          'AUD-1107',
          `items[${item}].activity_id: access denied for the section "${section.discriminator}" of activity "${event.activity_id}"`,
        );
      }
      const activity = {
        id: row.activity_id,
        kind: row.kind,
        section_id: row.section_id,
        ...row.details,
      } as Checked['activity'];
      const channel = channelOf(activity);
      if (!channel)
        throw new Problem(
          'AUD-2003',
          `items[${item}].activity_id: activity "${event.activity_id}" is a ${activity.kind}${activity.form_type === 'page' ? ' page' : ''} activity, which has no events`,
        );
      of = { activity, section, channel };
      known.set(event.activity_id, of);
    }
    const { activity, section, channel } = of;
    if (!(TYPES_OF[channel] as readonly string[]).includes(event.type)) {
      throw new Problem(
        'AUD-2003',
        `items[${item}].type: ${channel} activities take ${TYPES_OF[channel].join(', ')}, not ${event.type}`,
      );
    }
    for (const [field, { types }] of FIELDS) {
      if (event[field as keyof ActivityEventInput] !== undefined && !types.includes(event.type)) {
        throw new Problem(
          'AUD-2003',
          `items[${item}].${field}: only ${types.join(', ')} events of email activities carry it`,
        );
      }
    }
    if (
      channel !== 'email' &&
      (event.split_id !== undefined ||
        event.variation !== undefined ||
        event.device !== undefined ||
        event.location !== undefined)
    ) {
      throw new Problem(
        'AUD-2003',
        `items[${item}]: split_id, variation, device and location are fields of email events`,
      );
    }
    if (
      event.unsubscribe_topic !== undefined &&
      !section.topics.some((t) => t.discriminator === event.unsubscribe_topic)
    ) {
      throw new Problem(
        'AUD-2003',
        `items[${item}].unsubscribe_topic: no topic "${event.unsubscribe_topic}" in section "${section.discriminator}"`,
      );
    }
    let keyspace = keyspaces.get(event.keyspace_discriminator);
    if (!keyspace) {
      keyspace = atItem(item, 'keyspace_discriminator', () =>
        keyspaceForProfileAccess(scope.defs, event.keyspace_discriminator),
      );
      atItem(item, 'keyspace_discriminator', () => refuseReadOnly(keyspace!));
      keyspaces.set(event.keyspace_discriminator, keyspace);
    }
    const key = atItem(item, 'profile_key', () => normaliseKey(keyspace.kind, event.profile_key, 'the key'));
    return { item, event, activity, section, keyspace, key, channel };
  });
}

/** Writes the recorded events as profile events of their channel's built-in event type, a statement per section. */
async function writeProfileEvents(
  tx: Queryable,
  scope: AccountScope,
  locked: ProfilesLockedForEvents,
  vendor: string,
  recorded: { c: Checked; row: q.EventWrite }[],
): Promise<void> {
  const types = activityEventTypes(vendor);
  const bySection = new Map<SectionDefs, Parameters<typeof appendEvents>[4]>();
  const versions = new Map<string, string>();
  for (const { c, row } of recorded) {
    let versionId = versions.get(`${c.section.id}/${c.channel}`);
    if (versionId === undefined) {
      const discriminator = types.find((t) => t.channel === c.channel)!.discriminator;
      // Installed with the activity (putActivity); a definitions snapshot older than that is an error of the caller.
      versionId = c.section.events.find((e) => e.discriminator === discriminator)?.versions[0]?.id;
      if (versionId === undefined)
        throw new Error(`section ${c.section.id} lacks the built-in event type ${discriminator}`);
      versions.set(`${c.section.id}/${c.channel}`, versionId);
    }
    const data: Record<string, unknown> = { activityId: row.activity_id, type: row.type };
    for (const [field, { data: name }] of FIELDS) {
      const value = c.event[field as keyof ActivityEventInput];
      if (value !== undefined) data[name] = value;
    }
    const list = bySection.get(c.section) ?? [];
    list.push({
      profileId: row.profile_id,
      versionId,
      eventTime: row.event_time,
      correlationId: row.correlation_id,
      data,
    });
    bySection.set(c.section, list);
  }
  for (const [section, events] of bySection) await appendEvents(tx, scope, locked, section.id, events);
}

/** Opts the profiles of recorded UNSUBSCRIBED events with a topic out of that topic, on the activity's channel. */
async function optOut(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  recorded: { c: Checked; row: q.EventWrite }[],
): Promise<void> {
  const items: ImportedConsent[] = [];
  for (const { c, row } of recorded) {
    if (row.type !== 'UNSUBSCRIBED' || row.unsubscribe_topic === undefined) continue;
    const topic = c.section.topics.find((t) => t.discriminator === row.unsubscribe_topic)!;
    const channel = channelByDiscriminator(
      scope,
      `${namespace(vendor)}.channels.${c.channel === 'sms' ? 'sms' : 'email'}`,
    );
    const versionId = addressVersionId(c.section, channel);
    const address =
      versionId === undefined ? undefined : (await sectionValues(tx, scope, row.profile_id, c.section.id))[versionId];
    items.push({
      canonicalId: row.profile_id,
      topicId: topic.topic_id,
      channelId: topic.channel_id ?? channel.channel_id,
      sectionId: c.section.id,
      type: 'opt-out',
      address: typeof address === 'string' ? address : '',
      resubscribe: false,
    });
  }
  await importConsents(tx, scope, items, 'Unsubscribed from an activity');
}

/**
 * The follower of profile writes for the whole service: consents follow them (consentsFollowProfiles),
 * and deleted profiles' activity events go with them.
 */
export const activitiesFollowProfiles: ProfileFollower = {
  ...consentsFollowProfiles,
  async profilesDeleted(tx, scope, profileIds) {
    await consentsFollowProfiles.profilesDeleted(tx, scope, profileIds);
    await q.deleteEventsOfProfiles(tx, scope.accountId, profileIds);
  },
};

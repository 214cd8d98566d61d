import crypto from 'node:crypto';
import type { SqlValues } from '../aql/compile-sql.ts';
import { conforms, eventFieldsOf, eventOfVersion, grants, requireWrite } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
import { locate, refuseReadOnly } from './locate.ts';
import { CHANGED, profilesChanged } from './profiles.ts';
import * as q from './queries.ts';
import type { IdentifierInSection, NewEvent, StoredEvent } from './schemas.ts';

/** SPEC §8: the events of one answer stop at 300 KB; the newest are kept. */
export const EVENTS_ANSWER_LIMIT = 300 * 1024;
// More rows than fit in 300 KB even for the smallest events.
const ROWS_READ = 20_000;

/** POST …/events: appends up to 100 events, each checked against its event version's fields. */
export async function addEvents(
  tx: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  items: NewEvent[] | undefined,
): Promise<void> {
  if (items === undefined)
    throw new Problem(
      'AUD-1219',
      'The body has no "items" property: send {"items": [{"event_time", "version_id", "data"}]}',
    );
  const section = sectionOf(scope, id.section_discriminator);
  const located = await locate(tx, scope, id);
  refuseReadOnly(located.keyspace);
  const events = items.map((item, i) => {
    const { event, version } = eventOfVersion(section, item.version_id) ?? {};
    if (!event || !version || event.hidden)
      throw new Problem(
        'AUD-1220',
        `items[${i}].version_id "${item.version_id}" is not an event version of section "${section.discriminator}"`,
      );
    if (version.deprecated_at !== null)
      throw new Problem(
        'AUD-1207',
        `items[${i}].version_id: version ${item.version_id} of event "${event.discriminator}" is deprecated`,
      );
    requireWrite('event', event, located.keyspace);
    const fields = eventFieldsOf(version);
    for (const [name, value] of Object.entries(item.data)) {
      const type = fields.get(name);
      if (type === undefined)
        throw new Problem(
          'AUD-1402',
          `items[${i}].data.${name}: event "${event.discriminator}" version ${version.id} has no such field`,
        );
      if (!conforms(type, value))
        throw new Problem(
          'AUD-1209',
          `items[${i}].data.${name} does not conform to the type ${type}: ${JSON.stringify(value)}`,
        );
    }
    return {
      eventTime: item.event_time,
      versionId: item.version_id,
      correlationId: crypto.randomUUID(),
      data: item.data,
    };
  });
  // A profile deleted since it was located (a delete that committed meanwhile) is no longer there.
  if (
    events.length > 0 &&
    !(await q.insertEvents(tx, scope.accountId, {
      profileId: located.canonicalId,
      sectionId: section.id,
      events,
      createdAt: scope.now,
    }))
  ) {
    throw new Problem('AUD-1201', `No profile with ${located.keyspace.discriminator} key "${located.key}"`);
  }
  if (events.length > 0) await profilesChanged(tx, scope, [located.canonicalId], CHANGED.events);
}

/**
 * GET …/events: the profile's events in the section, newest first by event time, optionally of
 * some versions only. Above 300 KB the older events are left out and `truncated` is true.
 */
export async function listEvents(
  db: Queryable,
  scope: AccountScope,
  id: IdentifierInSection,
  versionIds: string[] | undefined,
): Promise<{ items: StoredEvent[]; truncated?: true }> {
  const located = await locate(db, scope, id);
  const section = sectionOf(scope, id.section_discriminator);
  const readable = section.events
    .filter((e) => !e.hidden && grants(e.keyspace_permissions, located.keyspace, 'read'))
    .flatMap((e) => e.versions.map((v) => v.id));
  const wanted = versionIds === undefined ? readable : readable.filter((id) => versionIds.includes(id));
  const members = await q.listClusterMembers(db, scope.accountId, located.canonicalId);
  const rows = await q.listEventsByProfiles(db, scope.accountId, {
    profileIds: members,
    sectionId: section.id,
    versionIds: wanted,
    limit: ROWS_READ,
  });
  const items: StoredEvent[] = [];
  // The answer's bytes as sent: the frame of a truncated answer, each item, a comma between items.
  let size = Buffer.byteLength('{"items":[],"truncated":true}');
  for (const row of rows) {
    const item = {
      event_time: row.event_time.toISOString(),
      version_id: row.version_id,
      data: row.data,
      correlation_id: row.correlation_id,
      created_at: row.created_at.toISOString(),
    };
    size += Buffer.byteLength(JSON.stringify(item)) + (items.length > 0 ? 1 : 0);
    if (size > EVENTS_ANSWER_LIMIT) return { items, truncated: true };
    items.push(item);
  }
  return rows.length === ROWS_READ ? { items, truncated: true } : { items };
}

/**
 * The events of a cluster in a time window, as a relation of a statement over many profiles
 * (exports): see clusterEventsRelation; the statement is in queries.ts.
 */
export function clusterEventsSql(
  values: SqlValues,
  target: { account: string; profile: string; versionIds: string[]; from: Date; to: Date },
): string {
  return q.clusterEventsRelation(values, target);
}

/**
 * Profiles locked for events in one transaction (lockProfilesForEvents), those that still exist:
 * what appendEvents writes to, so that no caller can write events without taking the lock first.
 */
export class ProfilesLockedForEvents {
  readonly #tx: Queryable;
  readonly #ids: Set<string>;

  constructor(tx: Queryable, ids: string[]) {
    this.#tx = tx;
    this.#ids = new Set(ids);
  }

  has(profileId: string): boolean {
    return this.#ids.has(profileId);
  }

  /** Throws unless the profile was locked in the transaction `tx`: a caller's mistake, never the client's. */
  check(tx: Queryable, profileId: string): void {
    if (tx !== this.#tx || !this.#ids.has(profileId))
      throw new Error(`profile ${profileId} was not locked for events in this transaction`);
  }
}

/**
 * Locks the profiles that events are about to be written to, until the transaction ends, and
 * answers those that still exist (a delete that committed since they were found took the others).
 * profile_events has no foreign key to profiles (migration 0017): this lock is what keeps an event
 * from being written for a profile being deleted, which waits for the writer's commit and then
 * deletes its events.
 */
export async function lockProfilesForEvents(
  tx: Queryable,
  scope: AccountScope,
  profileIds: string[],
): Promise<ProfilesLockedForEvents> {
  const unique = [...new Set(profileIds)];
  return new ProfilesLockedForEvents(
    tx,
    unique.length === 0 ? [] : await q.lockEventProfiles(tx, scope.accountId, unique),
  );
}

/**
 * Appends events of many profiles of one section, already checked by the caller (the activities
 * area records events of its built-in event types this way, a batch at a time), to profiles
 * `locked` in the same transaction.
 */
export async function appendEvents(
  tx: Queryable,
  scope: AccountScope,
  locked: ProfilesLockedForEvents,
  sectionId: string,
  events: { profileId: string; versionId: string; eventTime: Date; correlationId: string; data: unknown }[],
): Promise<void> {
  for (const e of events) locked.check(tx, e.profileId);
  if (events.length === 0) return;
  await q.insertEventsBulk(tx, scope.accountId, sectionId, events, scope.now);
  await profilesChanged(tx, scope, [...new Set(events.map((e) => e.profileId))], CHANGED.events);
}

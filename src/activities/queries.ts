import type { SqlValues } from '../aql/compile-sql.ts';
import { idArray } from '../store/arrays.ts';
import { coalescePerPool } from '../store/coalesce.ts';
import type { Queryable } from '../store/pool.ts';

export interface ActivityRow {
  activity_id: string;
  section_id: string;
  kind: string;
  name: string;
  status: string;
  created_at: Date;
  sent_at: Date | null;
  archived_at: Date | null;
  details: Record<string, unknown>;
}

const COLUMNS = 'activity_id, section_id::text, kind, name, status, created_at, sent_at, archived_at, details';

export async function nextActivityId(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string }>(`select nextval('activity_ids')::text as id`);
  return rows[0].id;
}

export async function findActivity(
  db: Queryable,
  accountId: string,
  activityId: string,
  lock = false,
): Promise<ActivityRow | undefined> {
  const { rows } = await db.query<ActivityRow>(
    `select ${COLUMNS} from activities where account_id = $1::bigint and activity_id = $2${lock ? ' for update' : ''}`,
    [accountId, activityId],
  );
  return rows[0];
}

/** The shared reads of each pool (or client), by account: the reads of one turn of the event loop go as one statement. */
const sharedReads = coalescePerPool(async (db: Queryable, account: string, ids: string[]) => {
  const byId = new Map((await listActivitiesByIds(db, account, [...new Set(ids)])).map((r) => [r.activity_id, r]));
  return ids.map((id) => byId.get(id));
});

/** findActivity in one statement shared with the other such reads of the same turn of the event loop. */
export function findActivityShared(
  db: Queryable,
  accountId: string,
  activityId: string,
): Promise<ActivityRow | undefined> {
  return sharedReads(db, accountId, activityId);
}

export async function listActivitiesByIds(
  db: Queryable,
  accountId: string,
  activityIds: string[],
): Promise<ActivityRow[]> {
  const { rows } = await db.query<ActivityRow>(
    `select ${COLUMNS} from activities where account_id = $1::bigint and activity_id = any($2::text[])`,
    [accountId, activityIds],
  );
  return rows;
}

/** Inserts an activity; false when the id is taken. */
export async function insertActivity(
  db: Queryable,
  accountId: string,
  a: Omit<ActivityRow, 'archived_at'> & { archived_at: Date | null },
  now: Date,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `insert into activities (account_id, activity_id, section_id, kind, name, status, created_at, sent_at, archived_at, details, updated_at)
     values ($1::bigint, $2, $3::bigint, $4, $5, $6, $7, $8, $9, $10::jsonb, $11) on conflict do nothing`,
    [
      accountId,
      a.activity_id,
      a.section_id,
      a.kind,
      a.name,
      a.status,
      a.created_at,
      a.sent_at,
      a.archived_at,
      JSON.stringify(a.details),
      now,
    ],
  );
  return rowCount === 1;
}

export async function updateActivity(
  db: Queryable,
  accountId: string,
  a: Omit<ActivityRow, 'section_id' | 'kind'>,
  now: Date,
): Promise<void> {
  await db.query(
    `update activities set name = $3, status = $4, created_at = $5, sent_at = $6, archived_at = $7, details = $8::jsonb, updated_at = $9
     where account_id = $1::bigint and activity_id = $2`,
    [
      accountId,
      a.activity_id,
      a.name,
      a.status,
      a.created_at,
      a.sent_at,
      a.archived_at,
      JSON.stringify(a.details),
      now,
    ],
  );
}

/** The most recent activities of a kind in a section, newest first; `archived` includes archived ones (operator). */
export async function listActivities(
  db: Queryable,
  accountId: string,
  filter: { sectionId?: string; kind?: string; archived: boolean; limit: number },
): Promise<ActivityRow[]> {
  const { rows } = await db.query<ActivityRow>(
    `select ${COLUMNS} from activities
     where account_id = $1::bigint and ($2::bigint is null or section_id = $2::bigint) and ($3::text is null or kind = $3)
       and ($4 or archived_at is null)
     order by created_at desc, activity_id desc limit $5`,
    [accountId, filter.sectionId ?? null, filter.kind ?? null, filter.archived, filter.limit],
  );
  return rows;
}

export interface CounterRow {
  activity_id: string;
  type: string;
  events: string;
  profiles: string;
}

export async function listCounters(db: Queryable, accountId: string, activityIds: string[]): Promise<CounterRow[]> {
  const { rows } = await db.query<CounterRow>(
    'select activity_id, type, events::text, profiles::text from activity_counters where account_id = $1::bigint and activity_id = any($2::text[])',
    [accountId, activityIds],
  );
  return rows;
}

/** The counters recomputed from the stored events (tests and operators compare them with the kept ones). */
export async function recountCounters(db: Queryable, accountId: string, activityId: string): Promise<CounterRow[]> {
  const { rows } = await db.query<CounterRow>(
    `select activity_id, type, count(*)::text as events, count(distinct profile_id)::text as profiles from activity_events
     where account_id = $1::bigint and activity_id = $2 group by activity_id, type`,
    [accountId, activityId],
  );
  return rows;
}

/** Deletes the activity events of profiles being deleted; the counters keep what they counted. */
export async function deleteEventsOfProfiles(db: Queryable, accountId: string, profileIds: string[]): Promise<void> {
  await db.query('delete from activity_events where account_id = $1::bigint and profile_id = any($2::bigint[])', [
    accountId,
    profileIds,
  ]);
}

/** One event row as recorded; the columns of activity_events. */
export interface EventWrite {
  activity_id: string;
  type: string;
  correlation_id: string;
  section_id: string;
  profile_id: string;
  event_time: Date;
  source_time: Date | null;
  split_id?: string;
  variation?: string;
  device?: string;
  location?: string;
  link_id?: string;
  link_url?: string;
  link_title?: string;
  bounce_code?: number;
  unsubscribe_topic?: string;
}

/**
 * Inserts a batch of event rows, in key order (so that two batches holding the same new key, a
 * source sending again while its first send is in flight, wait on each other rather than
 * deadlock), and answers those it recorded: the others were recorded before.
 */
export async function insertEvents(
  db: Queryable,
  accountId: string,
  events: EventWrite[],
  serverTime: Date,
): Promise<{ activity_id: string; type: string; correlation_id: string; profile_id: string }[]> {
  const { rows } = await db.query<{ activity_id: string; type: string; correlation_id: string; profile_id: string }>(
    `insert into activity_events (account_id, activity_id, type, correlation_id, section_id, profile_id, event_time, source_time, server_time,
       split_id, variation, device, location, link_id, link_url, link_title, bounce_code, unsubscribe_topic)
     select $1::bigint, activity_id, type, correlation_id, section_id, profile_id, event_time, source_time, $3,
       split_id, variation, device, location, link_id, link_url, link_title, bounce_code, unsubscribe_topic
     from json_to_recordset($2::json) as e(activity_id text, type text, correlation_id text, section_id bigint, profile_id bigint,
       event_time timestamptz, source_time timestamptz, split_id text, variation text, device text, location text,
       link_id text, link_url text, link_title text, bounce_code integer, unsubscribe_topic text)
     order by activity_id, type, correlation_id
     on conflict do nothing
     returning activity_id, type, correlation_id, profile_id::text`,
    [accountId, JSON.stringify(events), serverTime],
  );
  return rows;
}

/**
 * Counts recorded events in one statement: adds their profiles to the recipients of each activity
 * and type (those new there are the unique counts' growth), then the events and new recipients
 * to the counters. The last statement of a batch, with both inserts in key order: the keys and
 * counter rows it writes stay locked only until the commit that follows, and two batches that
 * write the same ones wait on each other in the same order, never in a cycle.
 */
export async function countEvents(
  db: Queryable,
  accountId: string,
  added: { activity_id: string; type: string; profile_id: string }[],
): Promise<void> {
  if (added.length === 0) return;
  await db.query(
    `with added as (
       select * from rows from (jsonb_array_elements_text($2::jsonb), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[])) as a(activity_id, type, profile_id)
     ), recipients as (
       insert into activity_recipients (account_id, activity_id, type, profile_id)
       select distinct $1::bigint, activity_id, type, profile_id from added order by 2, 3, 4
       on conflict do nothing
       returning activity_id, type
     )
     insert into activity_counters (account_id, activity_id, type, events, profiles)
     select $1::bigint, e.activity_id, e.type, e.events, coalesce(r.profiles, 0)
     from (select activity_id, type, count(*) as events from added group by 1, 2) e
     left join (select activity_id, type, count(*) as profiles from recipients group by 1, 2) r using (activity_id, type)
     order by 2, 3
     on conflict (account_id, activity_id, type) do update
       set events = activity_counters.events + excluded.events, profiles = activity_counters.profiles + excluded.profiles`,
    [
      accountId,
      JSON.stringify(added.map((a) => a.activity_id)),
      JSON.stringify(added.map((a) => a.type)),
      idArray(added.map((a) => a.profile_id)),
    ],
  );
}

/**
 * The events of email activities in some sections, with an event time in [from, to), as a
 * relation: per event its section, time, id and profile as stored, its activity's name, sender
 * name and subject, and those of its split's activity when the split is an activity of the
 * account. Read by the index of events by section and time, so a statement ordered by section,
 * event time and event id needs no sort.
 */
export function emailEventsRelation(
  values: SqlValues,
  target: { account: string; sectionIds: string[]; from: Date; to: Date },
): string {
  const { account } = target;
  return `select e.section_id, e.event_time, e.event_id, e.profile_id, e.activity_id, e.split_id, e.variation, e.type, e.correlation_id,
      e.source_time, e.server_time, e.device, e.location, e.link_id, e.link_url, e.link_title, e.bounce_code, e.unsubscribe_topic,
      a.name as activity_name, a.details ->> 'sender_name' as sender_name, a.details ->> 'email_subject' as email_subject,
      sa.name as split_name, sa.details ->> 'sender_name' as split_sender_name, sa.details ->> 'email_subject' as split_email_subject
    from activity_events e
    join activities a on a.account_id = e.account_id and a.activity_id = e.activity_id
    left join activities sa on sa.account_id = e.account_id and sa.activity_id = e.split_id and sa.kind = 'email'
    where e.account_id = ${account} and a.kind = 'email'
      and e.section_id = any(${values.add(target.sectionIds, 'bigint[]')})
      and e.event_time >= ${values.add(target.from, 'timestamptz')} and e.event_time < ${values.add(target.to, 'timestamptz')}`;
}

/** The types of the events recorded for an activity under one correlation id. */
export async function listEventTypes(
  db: Queryable,
  accountId: string,
  activityId: string,
  types: readonly string[],
  correlationId: string,
): Promise<string[]> {
  const { rows } = await db.query<{ type: string }>(
    // Every type named, so that each is one lookup of the primary key (account, activity, type, correlation id).
    'select type from activity_events where account_id = $1::bigint and activity_id = $2 and type = any($3::text[]) and correlation_id = $4',
    [accountId, activityId, types, correlationId],
  );
  return rows.map((r) => r.type);
}

/** Erases the activities of a deleted account, their events, recipients and counters. */
/** Events of an activity by bucket of event time (`unit`: hour or day, in UTC) and type, from `from` to before `to`. */
export async function countEventsByTime(
  db: Queryable,
  accountId: string,
  activityId: string,
  window: { unit: 'hour' | 'day'; from: Date; to: Date },
): Promise<{ at: Date; type: string; events: number }[]> {
  const { rows } = await db.query(
    `select date_trunc($3, event_time, 'UTC') as at, type, count(*)::int as events from activity_events
     where account_id = $1::bigint and activity_id = $2 and event_time >= $4 and event_time < $5
     group by 1, 2 order by 1, 2`,
    [accountId, activityId, window.unit, window.from, window.to],
  );
  return rows;
}

export interface EventRow {
  type: string;
  correlation_id: string;
  event_time: Date;
  device: string | null;
  location: string | null;
  link_url: string | null;
  bounce_code: number | null;
  unsubscribe_topic: string | null;
}

/** An activity's newest events, of some correlation ids (a message's) or of any. */
export async function listEvents(
  db: Queryable,
  accountId: string,
  activityId: string,
  filter: { correlationIds?: string[]; limit: number },
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `select type, correlation_id, event_time, device, location, link_url, bounce_code, unsubscribe_topic
     from activity_events where account_id = $1::bigint and activity_id = $2
       and ($3::text[] is null or correlation_id = any($3::text[]))
     order by event_time desc, event_id desc limit $4`,
    [accountId, activityId, filter.correlationIds ?? null, filter.limit],
  );
  return rows;
}

export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from activity_counters where account_id = $1::bigint', [accountId]);
  await db.query('delete from activity_recipients where account_id = $1::bigint', [accountId]);
  await db.query('delete from activity_events where account_id = $1::bigint', [accountId]);
  await db.query('delete from activities where account_id = $1::bigint', [accountId]);
}

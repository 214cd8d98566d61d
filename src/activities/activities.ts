import type { SqlValues } from '../aql/compile-sql.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import type { SectionDefs } from '../core/definitions.ts';
import { activityEventTypes, type ActivityChannel } from '../definitions/builtins.ts';
import { installActivityEventTypes, sectionOf } from '../definitions/definitions.ts';
import type { ChangeFeed } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import * as q from './queries.ts';
import { ACTIVITY_KIND_TABLE, type Counters } from './kinds.ts';
import type { Activity, ActivityInput, ActivityKindName } from './schemas.ts';

/** SPEC §8: the activity lists answer the 500 most recent. */
export const RECENT_ACTIVITIES = 500;

/** What an operator's write needs of the account's scope (a manifest applies without a request's). */
export type WriteScope = Pick<AccountScope, 'accountId' | 'defs' | 'now' | 'caller'>;

/** The service's own settings an activity write needs: the vendor word of built-in identifiers, and the feed that announces new definitions. */
export interface ActivityWriter {
  feed: ChangeFeed;
  vendor: string;
  /**
   * Checks an email activity's templates before it is kept (a 400 naming the field): the
   * transactional mail area's check, handed in by the caller, since that area reads activities.
   */
  checkEmail?: (email: ActivityInput) => Promise<void>;
}

/** The channel whose built-in event type records a kind's events; none for website and automation activities. */
export function channelOf(activity: Pick<Activity, 'kind' | 'form_type'>): ActivityChannel | undefined {
  return ACTIVITY_KIND_TABLE[activity.kind].channel(activity);
}

function toActivity(row: q.ActivityRow, section: Pick<SectionDefs, 'discriminator'>): Activity {
  return {
    id: row.activity_id,
    kind: row.kind as ActivityKindName,
    section_discriminator: section.discriminator,
    name: row.name,
    status: row.status as Activity['status'],
    created_at: row.created_at.toISOString(),
    sent_at: row.sent_at?.toISOString() ?? null,
    archived_at: row.archived_at?.toISOString() ?? null,
    ...(row.details as Partial<Activity>),
  };
}

function sectionById(scope: Pick<AccountScope, 'defs'>, sectionId: string): SectionDefs {
  return scope.defs.sections.find((s) => s.id === sectionId)!;
}

/**
 * The whole activity of a section, archived ones included (the transactional mail area reads an
 * email activity's sender, subject and bodies this way); 404 for an unknown activity or one of
 * another section. `shared`: read in one statement with the other such reads of the same turn of
 * the event loop (transactional sends that arrive together; docs/benchmarks.md "Transactional mail").
 */
export async function getActivity(
  db: Queryable,
  scope: AccountScope,
  sectionId: string,
  activityId: string,
  options: { shared?: boolean } = {},
): Promise<Activity> {
  const row = await (options.shared ? q.findActivityShared : q.findActivity)(db, scope.accountId, activityId);
  if (!row || row.section_id !== sectionId)
    throw new Problem('AUD-2001', `Activity "${activityId}" does not exist in the section`);
  return toActivity(row, sectionById(scope, sectionId));
}

/**
 * The events of the email activities of some sections in a window of event time (the source's,
 * or the server's when it gave none), as a relation for a statement of another area: the email
 * event export joins it with the profiles (docs/activities.md "The email event export file").
 * Its columns: section_id, event_time, event_id, profile_id (the profile recorded on), activity_id,
 * split_id, variation, type, correlation_id, source_time (null when the source gave none),
 * server_time, device, location, link_id, link_url, link_title, bounce_code, unsubscribe_topic,
 * activity_name, sender_name, email_subject, and split_name, split_sender_name,
 * split_email_subject (null unless the split id names an email activity of the account).
 * `account` is the placeholder of the account id in `values`.
 */
export function emailEventsSql(
  values: SqlValues,
  target: { account: string; sectionIds: string[]; from: Date; to: Date },
): string {
  return q.emailEventsRelation(values, target);
}

// ---- Operator writes ----

/** The kind-specific fields of an input, refusing those of other kinds (400 naming the field). */
function detailsOf(input: ActivityInput): Record<string, unknown> {
  const kind = ACTIVITY_KIND_TABLE[input.kind];
  const details: Record<string, unknown> = {};
  for (const field of new Set(Object.values(ACTIVITY_KIND_TABLE).flatMap((k) => k.fields))) {
    if (input[field] === undefined) continue;
    if (!kind.fields.includes(field))
      throw new Problem('AUD-2005', `${field}: not a field of ${input.kind} activities`);
    details[field] = input[field];
  }
  for (const [field, value] of Object.entries(kind.defaults)) details[field] ??= value;
  return details;
}

/**
 * Creates an activity (`id` undefined: the service gives it one) or replaces the one with that id:
 * the input's fields replace the stored ones, kind and section cannot change (409), and
 * `created_at` stays unless given. A section gets the built-in event types of activities with its
 * first one. Answers the activity and whether it was created.
 */
export async function putActivity(
  tx: Queryable,
  scope: WriteScope,
  writer: ActivityWriter,
  id: string | undefined,
  input: ActivityInput,
): Promise<{ activity: Activity; created: boolean }> {
  const section = sectionOf(scope, input.section_discriminator);
  const details = detailsOf(input);
  if (ACTIVITY_KIND_TABLE[input.kind].templates) await writer.checkEmail?.(input);
  if (input.created_at !== undefined && input.sent_at && Date.parse(input.sent_at) < Date.parse(input.created_at)) {
    throw new Problem('AUD-2006', 'sent_at: an activity cannot be sent before it was created');
  }
  const current = id === undefined ? undefined : await q.findActivity(tx, scope.accountId, id, true);
  const fields = {
    name: input.name,
    status: input.status ?? 'draft',
    sent_at: input.sent_at ? new Date(input.sent_at) : null,
    details,
  };
  if (current) {
    if (current.kind !== input.kind)
      throw new Problem('AUD-2002', `kind: activity "${id}" is a ${current.kind} activity; its kind cannot change`);
    if (current.section_id !== section.id)
      throw new Problem(
        'AUD-2002',
        `section_discriminator: activity "${id}" belongs to another section; its section cannot change`,
      );
    const archivedAt =
      input.archived === undefined ? current.archived_at : input.archived ? (current.archived_at ?? scope.now) : null;
    const row = {
      ...current,
      ...fields,
      created_at: input.created_at ? new Date(input.created_at) : current.created_at,
      archived_at: archivedAt,
    };
    await q.updateActivity(tx, scope.accountId, row, scope.now);
    await installEventTypes(tx, writer, { scope, section, kind: input.kind, details });
    return { activity: toActivity(row, section), created: false };
  }
  const row: q.ActivityRow = {
    activity_id: id ?? '',
    section_id: section.id,
    kind: input.kind,
    ...fields,
    created_at: input.created_at ? new Date(input.created_at) : createdBy(scope.now, fields.sent_at),
    archived_at: input.archived ? scope.now : null,
  };
  // A generated id may have been chosen by an operator before: take the next one.
  for (;;) {
    if (id === undefined) row.activity_id = await q.nextActivityId(tx);
    if (await q.insertActivity(tx, scope.accountId, row, scope.now)) break;
    if (id !== undefined)
      throw new Problem('AUD-2002', `Activity "${id}" was created meanwhile; send the request again`);
  }
  await installEventTypes(tx, writer, { scope, section, kind: input.kind, details });
  return { activity: toActivity(row, section), created: true };
}

/**
 * The creation time of a new activity that gives none: now, or its sending when that was earlier
 * (one recorded after it was sent). An activity is never sent before it was created, so its
 * manifest, which gives both, applies back (AUD-2006).
 */
function createdBy(now: Date, sentAt: Date | null): Date {
  return sentAt && sentAt < now ? sentAt : now;
}

/** Gives the section the built-in event types of activities once it has one whose events they record. */
async function installEventTypes(
  tx: Queryable,
  writer: ActivityWriter,
  {
    scope,
    section,
    kind,
    details,
  }: { scope: WriteScope; section: SectionDefs; kind: ActivityKindName; details: Record<string, unknown> },
): Promise<void> {
  if (channelOf({ kind, form_type: details.form_type as Activity['form_type'] }))
    await installActivityEventTypes(tx, writer.feed, writer.vendor, scope.accountId, section);
}

/** The whole activity for the operator, whatever its section; 404 when unknown. */
export async function getActivityById(db: Queryable, scope: AccountScope, activityId: string): Promise<Activity> {
  const row = await q.findActivity(db, scope.accountId, activityId);
  if (!row) throw new Problem('AUD-2001', `Activity "${activityId}" does not exist`);
  return toActivity(row, sectionById(scope, row.section_id));
}

/** Archives an activity: it leaves the public routes and takes no more events; its events and statistics stay. */
export async function archiveActivity(tx: Queryable, scope: AccountScope, activityId: string): Promise<void> {
  const row = await q.findActivity(tx, scope.accountId, activityId, true);
  if (!row) throw new Problem('AUD-2001', `Activity "${activityId}" does not exist`);
  if (row.archived_at === null)
    await q.updateActivity(tx, scope.accountId, { ...row, archived_at: scope.now }, scope.now);
}

/** Every activity of the account for the operator, archived ones included, newest first; optionally of one section or kind. */
export async function listAllActivities(
  db: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'defs' | 'caller'>,
  filter: { section_discriminator?: string; kind?: ActivityKindName },
): Promise<Activity[]> {
  const sectionId =
    filter.section_discriminator === undefined ? undefined : sectionOf(scope, filter.section_discriminator).id;
  const rows = await q.listActivities(db, scope.accountId, {
    sectionId,
    kind: filter.kind,
    archived: true,
    limit: 100_000,
  });
  return rows.map((r) => toActivity(r, sectionById(scope, r.section_id)));
}

// ---- Public reads (SPEC §2.14, §4.8) ----

/** The counters of some activities: activity id → type → counts. Activities with no events have none. */
async function countersOf(db: Queryable, scope: AccountScope, activityIds: string[]): Promise<Map<string, Counters>> {
  const byActivity = new Map<string, Counters>();
  if (activityIds.length === 0) return byActivity;
  for (const r of await q.listCounters(db, scope.accountId, activityIds)) {
    const counters = byActivity.get(r.activity_id) ?? new Map();
    counters.set(r.type, { events: Number(r.events), profiles: Number(r.profiles) });
    byActivity.set(r.activity_id, counters);
  }
  return byActivity;
}

/**
 * The AQL of the profiles that have an event of `type` of the activity (ACT-19): an event term of
 * the channel's built-in event type in the activity's section.
 */
function aqlOf(
  section: SectionDefs,
  vendor: string,
  channel: ActivityChannel,
  activityId: string,
  keys: Record<string, string>,
): Record<string, string> {
  const discriminator = activityEventTypes(vendor).find((t) => t.channel === channel)!.discriminator;
  const version = section.events.find((e) => e.discriminator === discriminator)?.versions[0];
  // Installed with the section's first activity of the channel; a section without one has no events to select.
  if (!version) return {};
  return Object.fromEntries(
    Object.entries(keys).map(([key, type]) => [
      key,
      `section(${section.id}).event(${version.id}).eventData("activityId").eq("${activityId}").eventData("type").eq("${type}")`,
    ]),
  );
}

/** Who reads: the section of the path, and whether statistics are wanted. */
export interface PublicRead {
  section_discriminator: string;
  include_statistics?: boolean;
}

/** An activity as the public lists show it; `statistics` only where they were asked for and counted. */
function publicView(row: q.ActivityRow, counters: Counters | undefined) {
  const activity = toActivity(row, { discriminator: '' });
  const kind = ACTIVITY_KIND_TABLE[activity.kind];
  return {
    id: activity.id,
    name: activity.name,
    status: activity.status,
    created_at: activity.created_at,
    ...kind.listed(activity),
    ...(counters && kind.statistics ? { statistics: kind.statistics(counters) } : {}),
  };
}

/**
 * GET /<kind>/sections/{s}/activities: the 500 most recent activities of a kind in a section, newest
 * first, without aql_queries or elements (ACT-02, ACT-07); statistics only when asked for and
 * counted (ACT-03, ACT-04); automations optionally only those triggered through the API (ACT-13).
 */
export async function listActivities(
  db: Queryable,
  scope: AccountScope,
  kind: ActivityKindName,
  read: PublicRead & { api_triggered_only?: boolean },
) {
  const section = sectionOf(scope, read.section_discriminator);
  let rows = await q.listActivities(db, scope.accountId, {
    sectionId: section.id,
    kind,
    archived: false,
    limit: RECENT_ACTIVITIES,
  });
  if (read.api_triggered_only) rows = rows.filter((r) => r.details.trigger_type === 'api');
  const counters =
    read.include_statistics && ACTIVITY_KIND_TABLE[kind].statistics
      ? await countersOf(
          db,
          scope,
          rows.map((r) => r.activity_id),
        )
      : new Map<string, Counters>();
  return rows.map((r) => publicView(r, counters.get(r.activity_id)));
}

/**
 * GET /<kind>/sections/{s}/activities/{id}: one activity with its aql_queries (email, SMS, forms)
 * and a form's elements; 404 for an unknown activity, an archived one, one of another kind or of
 * another section (ACT-18).
 */
export async function readActivity(
  db: Queryable,
  scope: AccountScope,
  vendor: string,
  kind: ActivityKindName,
  read: PublicRead & { activity_id: string },
) {
  const section = sectionOf(scope, read.section_discriminator);
  const row = await q.findActivity(db, scope.accountId, read.activity_id);
  if (!row || row.section_id !== section.id || row.kind !== kind || row.archived_at !== null) {
    throw new Problem('AUD-2001', `No ${kind} activity "${read.activity_id}" in section "${section.discriminator}"`);
  }
  const meaning = ACTIVITY_KIND_TABLE[kind];
  const counters =
    read.include_statistics && meaning.statistics
      ? await countersOf(db, scope, [row.activity_id])
      : new Map<string, Counters>();
  const activity = toActivity(row, section);
  const channel = meaning.channel(activity);
  return {
    ...publicView(row, counters.get(row.activity_id)),
    ...meaning.read(activity),
    ...(channel && meaning.events
      ? { aql_queries: aqlOf(section, vendor, channel, row.activity_id, meaning.events.aql) }
      : {}),
  };
}

/** An activity of the kind in the section, archived or not (its events stay); 404 (AUD-2001) otherwise. */
async function activityOfSection(
  db: Queryable,
  scope: AccountScope,
  kind: ActivityKindName,
  read: PublicRead & { activity_id: string },
) {
  const section = sectionOf(scope, read.section_discriminator);
  const row = await q.findActivity(db, scope.accountId, read.activity_id);
  if (!row || row.section_id !== section.id || row.kind !== kind)
    throw new Problem('AUD-2001', `No ${kind} activity "${read.activity_id}" in section "${section.discriminator}"`);
  return row;
}

const UNIT_MS = { hour: 3600_000, day: 86400_000 };

/**
 * An activity's events over time (for the console's charts): `points` buckets of an hour or a day
 * (UTC), the last one holding the scope's time, each with its events by type, 0 for a type of the
 * kind that has none there.
 */
export async function activityTimeline(
  db: Queryable,
  scope: AccountScope,
  kind: ActivityKindName,
  read: PublicRead & { activity_id: string; unit: 'hour' | 'day'; points: number },
) {
  const row = await activityOfSection(db, scope, kind, read);
  const step = UNIT_MS[read.unit];
  const last = Math.floor(scope.now.getTime() / step) * step;
  const from = new Date(last - (read.points - 1) * step);
  const counted = await q.countEventsByTime(db, scope.accountId, row.activity_id, {
    unit: read.unit,
    from,
    to: new Date(last + step),
  });
  const types = ACTIVITY_KIND_TABLE[kind].events?.types ?? [];
  const points = Array.from({ length: read.points }, (_, i) => ({
    at: new Date(from.getTime() + i * step).toISOString(),
    events: Object.fromEntries(types.map((t) => [t, 0])) as Record<string, number>,
  }));
  for (const c of counted) {
    const point = points[Math.round((c.at.getTime() - from.getTime()) / step)];
    if (point) point.events[c.type] = c.events;
  }
  return { unit: read.unit, points };
}

/** An activity's newest events, or those of one message (its correlation id, a transactional send's id). */
export async function activityEvents(
  db: Queryable,
  scope: AccountScope,
  kind: ActivityKindName,
  read: PublicRead & { activity_id: string; correlation_id?: string; limit: number },
) {
  const row = await activityOfSection(db, scope, kind, read);
  const events = await q.listEvents(db, scope.accountId, row.activity_id, {
    correlationIds: read.correlation_id === undefined ? undefined : [read.correlation_id],
    limit: read.limit,
  });
  return events.map(eventView);
}

/** The events of messages of an activity by correlation id, oldest first (the transactional area's sends). */
export async function eventsOfMessages(db: Queryable, accountId: string, activityId: string, correlationIds: string[]) {
  const events = await q.listEvents(db, accountId, activityId, { correlationIds, limit: 100 * correlationIds.length });
  const byMessage = new Map<string, ReturnType<typeof eventView>[]>();
  for (const e of events.reverse())
    byMessage.set(e.correlation_id, [...(byMessage.get(e.correlation_id) ?? []), eventView(e)]);
  return byMessage;
}

/** An event as the reads show it: its fields that are set. */
function eventView(e: q.EventRow) {
  return {
    type: e.type,
    correlation_id: e.correlation_id,
    event_time: e.event_time.toISOString(),
    ...(e.device === null ? {} : { device: e.device }),
    ...(e.location === null ? {} : { location: e.location }),
    ...(e.link_url === null ? {} : { link_url: e.link_url }),
    ...(e.bounce_code === null ? {} : { bounce_code: e.bounce_code }),
    ...(e.unsubscribe_topic === null ? {} : { unsubscribe_topic: e.unsubscribe_topic }),
  };
}

/** The counters of an activity kept and as recounted from its events: equal unless something bypassed recording (tests, operators). */
export async function checkCounters(
  db: Queryable,
  scope: AccountScope,
  activityId: string,
): Promise<{ kept: q.CounterRow[]; recounted: q.CounterRow[] }> {
  const sort = (rows: q.CounterRow[]) => rows.sort((a, b) => a.type.localeCompare(b.type));
  return {
    kept: sort(await q.listCounters(db, scope.accountId, [activityId])),
    recounted: sort(await q.recountCounters(db, scope.accountId, activityId)),
  };
}

/** Erases the activities of an account being deleted, with their events, recipients and counters. */
export async function forgetAccountActivities(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

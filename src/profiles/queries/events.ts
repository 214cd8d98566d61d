/**
 * Statements of profile events.
 */
import type { SqlValues } from '../../aql/compile-sql.ts';
import type { Queryable } from '../../store/pool.ts';

export interface EventRow {
  event_time: Date;
  created_at: Date;
  version_id: string;
  correlation_id: string;
  data: unknown;
}

/**
 * The insert of rows of profile_event_summaries (migration 0021), to be followed by a select of
 * (account_id, profile_id, section_id, version_id, count, first time, last time) grouped by the
 * row's key and ordered by it, and SUMMARIES_GROW: the events a statement appends, added to their
 * profiles' rows. Every writer locks the rows in the order of their key, so that two writers to the
 * same profiles wait for each other instead of deadlocking.
 */
export const SUMMARISE_EVENTS =
  'insert into profile_event_summaries (account_id, profile_id, section_id, version_id, event_count, first_time, last_time)';
export const SUMMARIES_GROW = `on conflict (account_id, profile_id, section_id, version_id) do update set
  event_count = profile_event_summaries.event_count + excluded.event_count,
  first_time = least(profile_event_summaries.first_time, excluded.first_time),
  last_time = greatest(profile_event_summaries.last_time, excluded.last_time)`;

/**
 * Appends events of one profile, having locked it (`for key share`, as a foreign key's check would)
 * for the rest of the transaction: a delete of the profile waits for the commit and then deletes
 * the events too (migration 0017). False, with nothing written, when the profile is gone.
 */
export async function insertEvents(
  db: Queryable,
  accountId: string,
  write: {
    profileId: string;
    sectionId: string;
    events: { eventTime: string; versionId: string; correlationId: string; data: unknown }[];
    createdAt: Date;
  },
): Promise<boolean> {
  const { profileId, sectionId, events, createdAt } = write;
  const { rows } = await db.query<{ found: boolean }>(
    `with profile as (select profile_id from profiles where account_id = $1::bigint and profile_id = $2::bigint for key share),
     inserted as (
       insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
       select $1::bigint, p.profile_id, $3::bigint, e.version_id, e.event_time, $8, e.correlation_id, e.data
       from profile p cross join unnest($4::bigint[], $5::timestamptz[], $6::text[], $7::jsonb[]) as e(version_id, event_time, correlation_id, data)
       returning 1
     ),
     summed as (${SUMMARISE_EVENTS}
       select $1::bigint, p.profile_id, $3::bigint, e.version_id, count(*), min(e.event_time), max(e.event_time)
       from profile p cross join unnest($4::bigint[], $5::timestamptz[]) as e(version_id, event_time)
       group by p.profile_id, e.version_id order by e.version_id
       ${SUMMARIES_GROW})
     select exists (select 1 from profile) as found`,
    [
      accountId,
      profileId,
      sectionId,
      events.map((e) => e.versionId),
      events.map((e) => e.eventTime),
      events.map((e) => e.correlationId),
      events.map((e) => JSON.stringify(e.data)),
      createdAt,
    ],
  );
  return rows[0].found;
}

/** A cluster's events in a section, newest first; `versionIds` null for every version. */
export async function listEventsByProfiles(
  db: Queryable,
  accountId: string,
  read: { profileIds: string[]; sectionId: string; versionIds: string[] | null; limit: number },
): Promise<EventRow[]> {
  const { profileIds, sectionId, versionIds, limit } = read;
  const { rows } = await db.query<EventRow>(
    `select event_time, created_at, version_id::text, correlation_id, data from profile_events
     where account_id = $1::bigint and profile_id = any($2::bigint[]) and section_id = $3::bigint
       and ($4::bigint[] is null or version_id = any($4::bigint[]))
     order by event_time desc, event_id desc limit $5`,
    [accountId, profileIds, sectionId, versionIds, limit],
  );
  return rows;
}

export interface SectionEventRow extends EventRow {
  profile_id: string;
  section_id: string;
}

/** Every event of some profiles, in every section, oldest first. */
export async function listSectionEventsByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<SectionEventRow[]> {
  const { rows } = await db.query<SectionEventRow>(
    `select profile_id, section_id, event_time, created_at, version_id::text, correlation_id, data from profile_events
     where account_id = $1::bigint and profile_id = any($2::bigint[]) order by event_time, event_id`,
    [accountId, profileIds],
  );
  return rows;
}

/**
 * The events of a cluster as a relation, for statements over many profiles (exports): those of the
 * canonical profile whose id is the SQL `profile` and of its members, of the given versions, with
 * an event time from `from` (inclusive) to `to` (exclusive). `account` is the placeholder of the
 * account id. Columns: section_id, event_id, version_id, event_time, created_at, correlation_id, data.
 */
export function clusterEventsRelation(
  values: SqlValues,
  target: { account: string; profile: string; versionIds: string[]; from: Date; to: Date },
): string {
  const { account, profile } = target;
  return `select e.section_id, e.event_id, e.version_id, e.event_time, e.created_at, e.correlation_id, e.data from profile_events e
    where e.account_id = ${account}
      and e.profile_id = any(array(select ${profile} union all select m.profile_id from profiles m where m.account_id = ${account} and m.canonical_id = ${profile}))
      and e.version_id = any(${values.add(target.versionIds, 'bigint[]')})
      and e.event_time >= ${values.add(target.from, 'timestamptz')} and e.event_time < ${values.add(target.to, 'timestamptz')}`;
}

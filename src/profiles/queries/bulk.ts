/**
 * Bulk statements, for imports: one statement per batch of rows.
 */
import { idArray } from '../../store/arrays.ts';
import type { Queryable } from '../../store/pool.ts';
import { SUMMARIES_GROW, SUMMARISE_EVENTS } from './events.ts';
import { isExport, MEMBER_BY_KEY, type KeyspaceOfKey } from './identifiers.ts';
import {
  ALL_WRITTEN,
  clusterWrite,
  NEW_ROW,
  REPLACED,
  SHOWN,
  trueTags,
  UNCHANGED,
  WRITTEN,
  type SectionDataRow,
  type ValueMap,
} from './section-rules.ts';

export async function findProfilesByKeys(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  keys: string[],
): Promise<{ profile_key: string; canonical_id: string }[]> {
  const { rows } = await db.query<{ profile_key: string; canonical_id: string }>(
    // One primary-key lookup per key (the lateral subquery with its limit cannot be flattened into a
    // join). With `profile_key = any(…)` the planner chose, by the table's size, between index
    // lookups and a (parallel) scan of the whole table for a batch of a few thousand keys.
    `select k.key as profile_key, x.canonical_id
     from (select distinct jsonb_array_elements_text($3::jsonb) as key) k
     cross join lateral ${MEMBER_BY_KEY('$1::bigint', '$2::bigint', 'k.key', '$4::boolean')} x`,
    [accountId, keyspace.keyspace_id, JSON.stringify(keys), isExport(keyspace)],
  );
  return rows;
}

export async function hasLockedIdentities(db: Queryable, accountId: string): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>(
    'select exists (select 1 from locked_identities where account_id = $1::bigint) as any',
    [accountId],
  );
  return rows[0].any;
}

export async function listLockedIdentities(db: Queryable, accountId: string, hashes: Buffer[]): Promise<Buffer[]> {
  const { rows } = await db.query<{ identity_hash: Buffer }>(
    'select identity_hash from locked_identities where account_id = $1::bigint and identity_hash = any($2::bytea[])',
    [accountId, hashes],
  );
  return rows.map((r) => r.identity_hash);
}

/** Creates profiles with the given export keys; returns export key → profile id. */
export async function insertProfilesBulk(
  db: Queryable,
  accountId: string,
  exportKeys: string[],
  createdAt: Date,
): Promise<Map<string, string>> {
  const { text, values } = insertProfilesStatement(accountId, exportKeys, createdAt);
  const { rows } = await db.query<{ profile_id: string; export_key: string }>(text, values);
  return new Map(rows.map((r) => [r.export_key, r.profile_id]));
}

/** The statement of insertProfilesBulk. */
export function insertProfilesStatement(accountId: string, exportKeys: string[], createdAt: Date) {
  return {
    text: `insert into profiles (account_id, export_key, created_at) select $1::bigint, k, $3 from jsonb_array_elements_text($2::jsonb) as k
     returning profile_id, export_key`,
    values: [accountId, JSON.stringify(exportKeys), createdAt] as unknown[],
  };
}

/** Adds identifiers (a key taken meanwhile by another writer fails the statement, and so the batch). */
export async function insertIdentifiersBulk(
  db: Queryable,
  accountId: string,
  identifiers: { keyspaceId: string; key: string; profileId: string }[],
): Promise<void> {
  const { text, values } = insertIdentifiersStatement(accountId, identifiers);
  await db.query(text, values);
}

/** The statement of insertIdentifiersBulk. */
export function insertIdentifiersStatement(
  accountId: string,
  identifiers: { keyspaceId: string; key: string; profileId: string }[],
) {
  return {
    text: `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
     select $1::bigint, k, pk, p from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[])) as x(k, pk, p)`,
    values: [
      accountId,
      idArray(identifiers.map((i) => i.keyspaceId)),
      JSON.stringify(identifiers.map((i) => i.key)),
      idArray(identifiers.map((i) => i.profileId)),
    ] as unknown[],
  };
}

/** What canonical profiles show in one section: profile id → values. */
export async function listSectionDataByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  sectionId: string,
): Promise<Map<string, SectionDataRow>> {
  const { rows } = await db.query<SectionDataRow & { profile_id: string }>(
    `select ps.profile_id, ${SHOWN.attributes('ps')} as attributes, ${SHOWN.tags('ps')} as tags
     from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = any($2::bigint[]) and ps.section_id = $3::bigint`,
    [accountId, profileIds, sectionId],
  );
  return new Map(rows.map((r) => [r.profile_id, { attributes: r.attributes, tags: trueTags(r.tags) }]));
}

/** A value as jsonb_strip_nulls leaves it: without the null fields of its objects, at any depth (arrays keep their nulls). */
function stripNulls(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(stripNulls);
  const stripped: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) if (field !== null) stripped[key] = stripNulls(field);
  return stripped;
}

/**
 * The section data of profiles created in the caller's transaction, which have none yet (the insert
 * of patchSectionDataBulk): first values, set `at`. What that insert computes per row in SQL (nulls
 * stripped, true tags, every value's set time) is built here: in SQL it was most of the database's
 * work in an import (docs/benchmarks.md "Imports").
 */
export async function insertSectionDataBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  rows: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
): Promise<void> {
  if (rows.length === 0) return;
  const { text, values } = insertSectionDataStatement(accountId, sectionId, rows, at);
  await db.query(text, values);
}

/** The statement of insertSectionDataBulk. */
export function insertSectionDataStatement(
  accountId: string,
  sectionId: string,
  rows: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
) {
  // The set time as setTimes writes it: microseconds since the epoch.
  const micros = String(at.getTime() * 1000);
  // The three JSON arrays written as text, without a map per row for each (half the CPU of building them).
  let attributes = '';
  let times = '';
  let tags = '';
  for (const row of rows) {
    let values = '';
    let setAt = '';
    for (const versionId in row.attributes) {
      const value = row.attributes[versionId];
      // As JSON.stringify of the map and jsonb_strip_nulls left them: no entry for these.
      if (value === null || value === undefined) continue;
      const key = JSON.stringify(versionId);
      values += `${values ? ',' : ''}${key}:${JSON.stringify(stripNulls(value))}`;
      setAt += `${setAt ? ',' : ''}${key}:${micros}`;
    }
    let trueTags = '';
    for (const tagId in row.tags)
      if (row.tags[tagId] === true) trueTags += `${trueTags ? ',' : ''}${JSON.stringify(tagId)}:true`;
    attributes += `${attributes ? ',' : ''}{${values}}`;
    times += `${times ? ',' : ''}{${setAt}}`;
    tags += `${tags ? ',' : ''}{${trueTags}}`;
  }
  return {
    text: `insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
     select $1::bigint, p, $2::bigint, a, t, s
     from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb), jsonb_array_elements($6::jsonb)) as x(p, a, t, s)`,
    values: [
      accountId,
      sectionId,
      idArray(rows.map((p) => p.profileId)),
      `[${attributes}]`,
      `[${tags}]`,
      `[${times}]`,
    ] as unknown[],
  };
}

/** patchSectionData for many canonical profiles of one section at once, at the time `at`. */
export async function patchSectionDataBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  patches: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
): Promise<void> {
  if (patches.length === 0) return;
  const { text, values } = patchSectionDataBulkStatement(accountId, sectionId, patches, at);
  await db.query(text, values);
}

/** The statement of patchSectionDataBulk, whole. */
export function patchSectionDataBulkStatement(
  accountId: string,
  sectionId: string,
  patches: { profileId: string; attributes: ValueMap; tags: Record<string, boolean> }[],
  at: Date,
) {
  return {
    text: `with patch as (select * from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb)) as x(p, a, t)),
     old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and section_id = $2::bigint and profile_id = any($3::bigint[])
     ),
     written as (
       update profile_sections ps set
         ${clusterWrite('patch.a', 'patch.t', '$6::timestamptz')}
       from patch join old o on o.profile_id = patch.p
       where ps.account_id = $1::bigint and ps.section_id = $2::bigint and ps.profile_id = patch.p and ${UNCHANGED}
       ${WRITTEN('$6::timestamptz')}
     ), history as (
       ${REPLACED}
     ), inserted as (
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select $1::bigint, p, $2::bigint, ${NEW_ROW('a', 't', '$6::timestamptz')} from patch
       where p not in (select profile_id from old)
       on conflict do nothing
       returning 1
     )
     select ${ALL_WRITTEN('(select count(*) from patch)')}`,
    values: [
      accountId,
      sectionId,
      idArray(patches.map((p) => p.profileId)),
      JSON.stringify(patches.map((p) => p.attributes)),
      JSON.stringify(patches.map((p) => p.tags)),
      at,
    ] as unknown[],
  };
}

/** Serialises the creation of profiles by key in an account for the rest of the transaction, so that two writers never create the same key. */
export async function lockProfileCreation(db: Queryable, accountId: string): Promise<void> {
  await db.query(`select pg_advisory_xact_lock(hashtextextended('profile-creation', $1::bigint))`, [accountId]);
}

/**
 * Locks profiles that events are about to be written to, as a foreign key's check would (`for key
 * share`, until the transaction ends) but in one statement and in profile id order (the order
 * deletes and merges lock clusters in, so no cycle of waits); answers those that still exist.
 */
export async function lockEventProfiles(db: Queryable, accountId: string, profileIds: string[]): Promise<string[]> {
  const { rows } = await db.query<{ profile_id: string }>(
    // Ordered by the column, not by the text it is answered as (which would be another order).
    'select p.profile_id::text from profiles p where p.account_id = $1::bigint and p.profile_id = any($2::bigint[]) order by p.profile_id for key share',
    [accountId, idArray(profileIds)],
  );
  return rows.map((r) => r.profile_id);
}

/**
 * Appends events of many profiles in one section, each row naming its profile, locked before with
 * lockEventProfiles, and adds them to their profiles' sums: two statements, so that each is one
 * plain INSERT … SELECT, which Citus routes to the account's shard (the caller's transaction holds both).
 */
export async function insertEventsBulk(
  db: Queryable,
  accountId: string,
  sectionId: string,
  // A time as a Date, or as text PostgreSQL reads as a timestamptz (years BC, which a Date cannot print).
  events: { profileId: string; versionId: string; eventTime: Date | string; correlationId: string; data: unknown }[],
  createdAt: Date,
): Promise<void> {
  for (const { text, values } of insertEventsStatements(accountId, sectionId, events, createdAt))
    await db.query(text, values);
}

/** The two statements of insertEventsBulk: the events, and their sums. */
export function insertEventsStatements(
  accountId: string,
  sectionId: string,
  events: { profileId: string; versionId: string; eventTime: Date | string; correlationId: string; data: unknown }[],
  createdAt: Date,
): { text: string; values: unknown[] }[] {
  return [
    {
      text: `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select $1::bigint, e.p, $2::bigint, e.v, e.t, $4, e.c, e.d
     from json_to_recordset($3::json) as e(p bigint, v bigint, t timestamptz, c text, d jsonb)`,
      values: [
        accountId,
        sectionId,
        JSON.stringify(
          events.map((e) => ({ p: e.profileId, v: e.versionId, t: e.eventTime, c: e.correlationId, d: e.data })),
        ),
        createdAt,
      ],
    },
    {
      text: `${SUMMARISE_EVENTS}
     select $1::bigint, e.p, $2::bigint, e.v, count(*), min(e.t), max(e.t)
     from unnest($3::bigint[], $4::bigint[], $5::timestamptz[]) as e(p, v, t) group by e.p, e.v order by e.p, e.v
     ${SUMMARIES_GROW}`,
      values: [
        accountId,
        sectionId,
        events.map((e) => e.profileId),
        events.map((e) => e.versionId),
        events.map((e) => (typeof e.eventTime === 'string' ? e.eventTime : e.eventTime.toISOString())),
      ],
    },
  ];
}

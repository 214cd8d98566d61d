import type pg from 'pg';
import type { SqlValues } from '../aql/compile-sql.ts';
import {
  canonicalProfilesSql,
  clusterProfilesSql,
  sectionRowsSql,
  sectionValuesOf,
  sectionValuesSql,
  shownAttributesOf,
} from '../profiles/relations.ts';
import { cursorRows } from '../store/cursor.ts';
import type { Queryable } from '../store/pool.ts';
import type { Statement } from './kind.ts';

export type ExportStatus = 'queued' | 'in_progress' | 'ready' | 'failed' | 'expired';

/**
 * The columns `kind` (a key of the table in kinds.ts) and `request`: a body checked against its
 * kind's schema when the export was created (the single profile export's: a SingleExportRequest).
 */
export interface StoredRequest {
  kind: string;
  request: unknown;
}

export type ExportRowDb = StoredRequest & {
  export_id: string;
  status: ExportStatus;
  file_key: string | null;
  result: Record<string, number> | null;
  message: string | null;
  expires_at: Date | null;
};

/** Serialises export requests of one account, so the pending limit holds under concurrency. */
export async function lockAccountExports(db: Queryable, accountId: string): Promise<void> {
  await db.query("select pg_advisory_xact_lock(hashtext('exports'), $1::bigint::int)", [accountId]);
}

/** Exports waiting for the worker or being written. */
export async function countPendingExports(db: Queryable, accountId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "select count(*)::int as n from exports where account_id = $1::bigint and status in ('queued', 'in_progress')",
    [accountId],
  );
  return rows[0].n;
}

export async function insertExport(
  db: Queryable,
  accountId: string,
  e: {
    exportId: string;
    kind: StoredRequest['kind'];
    request: StoredRequest['request'];
    createdAt: Date;
    requestedBy: string | null;
  },
): Promise<void> {
  await db.query(
    "insert into exports (account_id, export_id, kind, request, status, created_at, requested_by) values ($1::bigint, $2::uuid, $3, $4, 'queued', $5, $6)",
    [accountId, e.exportId, e.kind, e.request, e.createdAt, e.requestedBy],
  );
}

/** The account's exports, newest first. */
export async function listExports(
  db: Queryable,
  accountId: string,
  limit: number,
): Promise<
  (ExportRowDb & { created_at: Date; ready_at: Date | null; row_count: number | null; requested_by: string | null })[]
> {
  const { rows } = await db.query(
    `select export_id::text, kind, request, status, file_key, result, message, created_at, ready_at, expires_at,
            row_count, requested_by
     from exports where account_id = $1::bigint order by created_at desc, export_id limit $2`,
    [accountId, limit],
  );
  return rows;
}

/** An export of the account; undefined for an id that is none (not a UUID, another account's, unknown). */
export async function findExport(db: Queryable, accountId: string, exportId: string): Promise<ExportRowDb | undefined> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(exportId)) return undefined;
  const { rows } = await db.query<ExportRowDb>(
    'select export_id::text, kind, request, status, file_key, result, message, expires_at from exports where account_id = $1::bigint and export_id = $2::uuid',
    [accountId, exportId],
  );
  return rows[0];
}

export async function setExportInProgress(db: Queryable, accountId: string, exportId: string): Promise<void> {
  await db.query(
    "update exports set status = 'in_progress' where account_id = $1::bigint and export_id = $2::uuid and status = 'queued'",
    [accountId, exportId],
  );
}

/** Marks an export ready with its file or its result, served until `expiresAt`. */
export async function setExportReady(
  db: Queryable,
  accountId: string,
  exportId: string,
  ready: {
    fileKey: string | null;
    result: Record<string, number> | null;
    rows?: number;
    readyAt: Date;
    expiresAt: Date;
  },
): Promise<string | undefined> {
  const { rows } = await db.query<{ kind: string }>(
    "update exports set status = 'ready', file_key = $3, result = $4, ready_at = $5, expires_at = $6, row_count = $7 where account_id = $1::bigint and export_id = $2::uuid returning kind",
    [accountId, exportId, ready.fileKey, ready.result, ready.readyAt, ready.expiresAt, ready.rows ?? null],
  );
  return rows[0]?.kind;
}

export async function setExportFailed(
  db: Queryable,
  accountId: string,
  exportId: string,
  message: string,
): Promise<string | undefined> {
  const { rows } = await db.query<{ kind: string }>(
    "update exports set status = 'failed', message = $3 where account_id = $1::bigint and export_id = $2::uuid returning kind",
    [accountId, exportId, message],
  );
  return rows[0]?.kind;
}

/** An expired export whose file is removed: the row stays, so that its poll URL answers 410 rather than "unknown". */
export async function setExportExpired(db: Queryable, accountId: string, exportId: string): Promise<void> {
  await db.query(
    "update exports set status = 'expired', file_key = null where account_id = $1::bigint and export_id = $2::uuid",
    [accountId, exportId],
  );
}

/**
 * Which profiles an export holds and what it needs of them (docs/exports.md). Every SQL fragment
 * here binds its values in the `values` the statement is built with.
 */
export interface ProfileSelection {
  /** Placeholder of the account id. */
  account: string;
  sectionId: string;
  /** Per segment, a predicate over the canonical profile `p` and its row SECTION_ROW in the section (compilePredicate with `joinedSection`). */
  segments: string[];
  /** Which profiles, as SQL over the segment columns named by `column`; null for every profile. */
  filter: ((column: (index: number) => string) => string) | null;
  /** Per channel: the attribute version of its addresses, and maySendSql's relation of the profiles with a permitting consent and its test of an address. */
  channels: { addressVersionId: string; permitting: string; sendable: (address: string) => string }[];
  /** Attribute version ids and tag ids of the file's columns. */
  attributes: string[];
  tags: string[];
  limit: number | null;
}

export interface ConsentSelection extends ProfileSelection {
  excludeUnsubscribed: boolean;
  duplicates: 'oldest' | 'latest' | 'keep';
}

/**
 * The alias of the export section's row in `base`, joined as a set (both in the order of profile
 * ids) rather than looked up profile by profile: segments compiled with `joinedSection` read it.
 */
export const SECTION_ROW = 'd';

/**
 * `base`: the account's canonical profiles (a merge cluster is its canonical profile), with their
 * cluster's values in the section (attrs, tags, updated_at), s<i> per segment and a<i> (the address)
 * per channel; `selected`: those the filter selects, with c<i> (may be contacted) per channel.
 * Where the file shows the segment columns, a fence keeps each segment judged once per profile.
 */
function selectedProfiles(values: SqlValues, sel: ProfileSelection, segmentColumnsShown = true): string {
  const section = values.add(sel.sectionId, 'bigint');
  const segmentColumns = sel.segments.map((predicate, i) => `, ${predicate} as s${i}`).join('');
  const addressColumns = sel.channels
    .map((c, i) => {
      const v = values.add(c.addressVersionId, 'text');
      const attrs = shownAttributesOf(SECTION_ROW);
      return `, case when jsonb_typeof(${attrs} -> ${v}) = 'string' then ${attrs} ->> ${v} end as a${i}`;
    })
    .join('');
  const filter = sel.filter ? sel.filter((i) => `b.s${i}`) : null;
  const contactColumns = sel.channels
    .map((c, i) => `, (k${i}.profile_id is not null and ${c.sendable(`b.a${i}`)}) as c${i}`)
    .join('');
  // Joined in the order of profile_id, as base comes, so that rows keep that order.
  const permitting = sel.channels
    .map((c, i) => ` left join (${c.permitting}) k${i} on k${i}.profile_id = b.profile_id`)
    .join('');
  const fence = segmentColumnsShown
    ? `
      -- A fence: the filter below reads the segment columns rather than judging the segments again.
      offset 0`
    : '';
  return `base as (
      select p.profile_id, p.export_key, ${sectionValuesOf(SECTION_ROW)}${segmentColumns}${addressColumns}
      from (${canonicalProfilesSql(sel.account)}) p
      left join (${sectionRowsSql(sel.account, section)}) ${SECTION_ROW} on ${SECTION_ROW}.profile_id = p.profile_id${fence}
    ), selected as (
      select b.*${contactColumns} from base b${permitting} ${filter === null ? '' : `where ${filter}`}
    )`;
}

/** `chosen`: the rows of `from`, or `limit` of them chosen at random (each set of that size equally likely). */
function chosen(values: SqlValues, from: string, limit: number | null): string {
  return `chosen as (select * from ${from} ${limit === null ? '' : `order by random() limit ${values.add(limit, 'bigint')}`})`;
}

/** An attribute value as a cell: strings as they are, other JSON as its text, nothing for null. */
const cell = (json: string) =>
  `case jsonb_typeof(${json}) when 'string' then (${json}) #>> '{}' when 'null' then null else (${json})::text end`;

/**
 * The cells of a row of `chosen c`: the export key, `leading`, the attributes, the tags (1 or 0),
 * with `segments` the segments (1 or 0), the address per channel where the profile may be contacted
 * on it, and `trailing`.
 */
function cells(
  values: SqlValues,
  sel: ProfileSelection,
  parts: { leading?: string[]; segments: boolean; trailing?: string[] },
): string {
  return [
    'c.export_key',
    ...(parts.leading ?? []),
    ...sel.attributes.map((v) => cell(`c.attrs -> ${values.add(v, 'text')}`)),
    ...sel.tags.map((t) => `case when c.tags -> ${values.add(t, 'text')} = 'true'::jsonb then '1' else '0' end`),
    ...(parts.segments ? sel.segments.map((_, i) => `case when c.s${i} then '1' else '0' end`) : []),
    ...sel.channels.map((_, i) => `case when c.c${i} then c.a${i} end`),
    ...(parts.trailing ?? []),
  ].join(', ');
}

/**
 * The profiles of an export by consent: those the segment filter selects, less those that may not
 * be contacted on any channel when unsubscribed profiles are excluded, less the duplicates of an
 * address (of the first channel: among profiles with the same address, compared lower-cased, the
 * least or most recently updated in the section is kept; profiles without one are never
 * duplicates), then at most `limit` of them.
 */
function chosenByConsent(values: SqlValues, sel: ConsentSelection): string {
  const anyContact = sel.channels.map((_, i) => `k.c${i}`).join(' or ');
  const order = sel.duplicates === 'latest' ? 'desc' : 'asc';
  return `with ${selectedProfiles(values, sel)}, kept as (
      select k.* from selected k ${sel.excludeUnsubscribed ? `where ${anyContact}` : ''}
    ), unique_addresses as (
      ${
        sel.duplicates === 'keep'
          ? 'select * from kept'
          : `select * from (
        select k.*, row_number() over (partition by lower(k.a0) order by k.updated_at ${order}, k.profile_id) as nth from kept k
      ) u where u.nth = 1 or coalesce(u.a0, '') = ''`
      }
    ), ${chosen(values, 'unique_addresses', sel.limit)}`;
}

/**
 * The file rows of an export by consent (for COPY), in the order of the profiles' creation, with 1
 * for `subscribed` when unsubscribed profiles are excluded.
 */
export function consentExportStatement(values: SqlValues, sel: ConsentSelection): string {
  return `${chosenByConsent(values, sel)} select ${cells(values, sel, { segments: true, trailing: sel.excludeUnsubscribed ? ["'1'"] : [] })} from chosen c order by c.profile_id`;
}

/** The count of an export by consent: its rows (`total`), and per channel i those whose address it would hold (`c<i>`). */
export function consentCountStatement(values: SqlValues, sel: ConsentSelection): string {
  const perChannel = sel.channels.map((_, i) => `, count(*) filter (where c.c${i})::int as c${i}`).join('');
  return `${chosenByConsent(values, sel)} select count(*)::int as total${perChannel} from chosen c`;
}

/** The counts of consentCountStatement. */
export async function countConsentExport(
  db: Queryable,
  statement: Statement,
  channels: number,
): Promise<{ total: number; channels: number[] }> {
  const { rows } = await db.query<Record<string, number>>(statement.text, statement.values);
  return { total: rows[0].total, channels: Array.from({ length: channels }, (_, i) => rows[0][`c${i}`]) };
}

/**
 * The file rows of a duplicate export (for COPY): of the profiles the filter selects, those whose
 * value of the attribute version is also another one's (texts compared trimmed and without case,
 * other values as JSON; no value or an empty text is never a duplicate), then at most `limit` of
 * them; ordered by that value, so that duplicates follow each other, then by creation. The value
 * comes right after the export key.
 */
export function duplicateExportStatement(
  values: SqlValues,
  sel: ProfileSelection & { duplicateVersionId: string },
): string {
  const value = `k.attrs -> ${values.add(sel.duplicateVersionId, 'text')}`;
  return `with ${selectedProfiles(values, sel)}, keyed as (
      select k.*, ${cell(value)} as dup_value,
        case jsonb_typeof(${value}) when 'string' then lower(btrim((${value}) #>> '{}')) when 'null' then null else (${value})::text end as dup_key
      from selected k
    ), duplicated as (
      select * from (select d.*, count(*) over (partition by d.dup_key) as copies from keyed d where d.dup_key <> '') x where x.copies > 1
    ), ${chosen(values, 'duplicated', sel.limit)}
    select ${cells(values, sel, { leading: ['c.dup_value'], segments: true })} from chosen c order by c.dup_key, c.profile_id`;
}

/**
 * The file rows of a profile in segment export (for COPY): the profiles of its one segment, known or
 * unknown only when `known` (a predicate over a profile id) is given, then at most `limit` of them,
 * in the order of their creation.
 */
export function segmentExportStatement(
  values: SqlValues,
  sel: ProfileSelection & { known: ((profile: string) => string) | null },
): string {
  // The file has no segment column: without the fence, PostgreSQL judges the segment in the join
  // itself, which it can then run in parallel (docs/benchmarks.md "Issue 26").
  return `with ${selectedProfiles(values, sel, false)}, wanted as (
      select * from selected k ${sel.known ? `where ${sel.known('k.profile_id')}` : ''}
    ), ${chosen(values, 'wanted', sel.limit)}
    select ${cells(values, sel, { segments: false })} from chosen c order by c.profile_id`;
}

/** What the statement of an event export selects; its SQL fragments bind their values in the statement's `values`. */
export interface EventSelection {
  /** Placeholder of the account id. */
  account: string;
  /** A predicate over the canonical profile `p` (compilePredicate); null for every profile. */
  segment: string | null;
  sectionIds: string[];
  /** The values wanted, each with its section: `key` in the file, `stored` in the section's map of attributes (a version id) or of tags (a tag id). */
  keys: { sectionId: string; key: string; stored: string; tag: boolean }[];
  /** The cluster's events in the window, as a relation over the SQL of a canonical profile id (clusterEventsSql); null for none. */
  events: ((profile: string) => string) | null;
}

/** A row of an event export: a profile's values in a section, or one of its events there. */
export type EventExportRow =
  | { kind: 'values'; exportKey: string; sectionId: string; attributes: Record<string, { value: unknown }> }
  | {
      kind: 'event';
      exportKey: string;
      sectionId: string;
      correlationId: string;
      eventTime: Date;
      versionId: string;
      createdAt: Date;
      data: unknown;
    };

/**
 * The rows of an event export: per canonical profile the segment selects (a merge cluster shows its cluster's values and its members'
 * events), in the order of creation, per requested section in the order of its id, one row of
 * values — the wanted attributes it has a value of (`{"value": …}`), the wanted tags it has set
 * (`{"value": null}`) — then its events, oldest first.
 */
export function eventExportStatement(values: SqlValues, sel: EventSelection): string {
  const { account } = sel;
  const wanted = `unnest(${values.add(
    sel.keys.map((k) => k.sectionId),
    'bigint[]',
  )}, ${values.add(
    sel.keys.map((k) => k.key),
    'text[]',
  )}, ${values.add(
    sel.keys.map((k) => k.stored),
    'text[]',
  )}, ${values.add(
    sel.keys.map((k) => k.tag),
    'boolean[]',
  )}) w(section_id, key, stored, tag)`;
  const events = sel.events
    ? `union all
      select e.section_id, 1, e.event_time, e.event_id, null, e.correlation_id, e.version_id, e.created_at, e.data from (${sel.events('c.profile_id')}) e`
    : '';
  return `with chosen as (
      select p.profile_id, p.export_key from (${canonicalProfilesSql(account)}) p ${sel.segment === null ? '' : `where ${sel.segment}`}
    )
    select c.export_key, x.section_id::text, x.attributes, x.correlation_id, x.event_time, x.version_id::text, x.created_at, x.data
    from chosen c cross join lateral (
      select s.section_id, 0 as kind, null::timestamptz as event_time, null::bigint as event_id,
        (select coalesce(jsonb_object_agg(w.key, jsonb_build_object('value', case when w.tag then null else d.attrs -> w.stored end)), '{}'::jsonb)
         from ${wanted}
         where w.section_id = s.section_id
           and case when w.tag then d.tags -> w.stored = 'true'::jsonb else coalesce(jsonb_typeof(d.attrs -> w.stored), 'null') <> 'null' end) as attributes,
        null::text as correlation_id, null::bigint as version_id, null::timestamptz as created_at, null::jsonb as data
      from unnest(${values.add(sel.sectionIds, 'bigint[]')}) s(section_id)
      left join lateral (${sectionValuesSql(account, 'c.profile_id', 's.section_id')}) d on true
      ${events}
    ) x
    order by c.profile_id, x.section_id, x.kind, x.event_time, x.event_id`;
}

/** Streams the rows of eventExportStatement through a cursor (never whole in memory). */
export async function* eventExportRows(pool: pg.Pool, statement: Statement): AsyncGenerator<EventExportRow> {
  for await (const [
    exportKey,
    sectionId,
    attributes,
    correlationId,
    eventTime,
    versionId,
    createdAt,
    data,
  ] of cursorRows(pool, statement)) {
    yield attributes === null
      ? {
          kind: 'event',
          exportKey: exportKey as string,
          sectionId: sectionId as string,
          correlationId: correlationId as string,
          eventTime: eventTime as Date,
          versionId: versionId as string,
          createdAt: createdAt as Date,
          data,
        }
      : {
          kind: 'values',
          exportKey: exportKey as string,
          sectionId: sectionId as string,
          attributes: attributes as Record<string, { value: unknown }>,
        };
  }
}

/** What the statement of an email event export selects; its SQL fragments bind their values in the statement's `values`. */
export interface EmailEventSelection {
  /** Placeholder of the account id. */
  account: string;
  /** The events, as the relation of the activities area's emailEventsSql. */
  events: string;
  /** Per section of the account: its id, discriminator, and the version of its email address attribute (null without one). */
  sections: { id: string; discriminator: string; addressVersionId: string | null }[];
  /** A predicate over the canonical profile `p` (compilePredicate); null for every profile. */
  segment: string | null;
  /** Source times before this are written as 0. */
  firstSourceTime: Date;
  /** The mapped columns, in order: an attribute version's value, or TAG where a tag is set, in a section. */
  mapped: ({ sectionId: string; versionId: string } | { sectionId: string; tagId: string })[];
}

/** Milliseconds since the epoch of a timestamptz, as text. */
const ms = (time: string) => `(floor(extract(epoch from ${time}) * 1000))::bigint::text`;

/** A text cell as a CSV field (RFC 4180, as csv-stringify writes it): quoted when it holds a comma, a quote or a line break; empty for null. */
const csvField = (text: string) =>
  `coalesce(case when ${text} ~ '[",\r\n]' then '"' || replace(${text}, '"', '""') || '"' else ${text} end, '')`;

/**
 * A line of CSV from the cells c.c0 … of a row and `c.line`, those cells joined by commas: the
 * line as it is when no cell holds a quote, a line break or a comma (a line of n cells holds n - 1
 * commas), which is most lines; else each cell as a field (csvField). Four searches of the line
 * cost PostgreSQL less than a regular expression per cell (docs/benchmarks.md "The email event
 * export").
 */
function csvLine(cells: number): string {
  const plain = `strpos(c.line, '"') = 0 and strpos(c.line, chr(10)) = 0 and strpos(c.line, chr(13)) = 0
      and octet_length(c.line) - octet_length(replace(c.line, ',', '')) = ${cells - 1}`;
  return `case when ${plain} then c.line else ${Array.from({ length: cells }, (_, i) => csvField(`c.c${i}`)).join(` || ',' || `)} end`;
}

/**
 * The lines of an email event export, each row written as a CSV line (without its line end) by
 * the database, in the columns of SPEC §2.16 then
 * the mapped ones: its events in the window, of every profile or of the profiles the segment
 * selects, by section, then event time, then event id. The address and the
 * mapped values are those the event's profile shows now (its merge cluster's, when it was merged
 * since); a field is written only for the types that carry it.
 */
export function emailEventStatement(values: SqlValues, sel: EmailEventSelection): string {
  const { account } = sel;
  const ids = values.add(
    sel.sections.map((s) => s.id),
    'bigint[]',
  );
  const bySection = (list: (string | null)[], cast: string) =>
    `(${values.add(list, cast)})[array_position(${ids}, e.section_id)]`;
  const addressVersions = sel.sections.map((s) => s.addressVersionId);
  const own = `d.attrs -> ${bySection(addressVersions, 'text[]')}`;
  // The address in the event's section; a profile without one there (recorded on a profile that
  // existed in another section) shows its address of the first section that holds one.
  const address = `coalesce(case when jsonb_typeof(${own}) = 'string' then ${own} #>> '{}' end, (
      select x.attrs ->> s.version from unnest(${ids}, ${values.add(addressVersions, 'text[]')}) s(section_id, version)
      cross join lateral (${sectionValuesSql(account, 'ep.canonical_id', 's.section_id')}) x
      where jsonb_typeof(x.attrs -> s.version) = 'string' order by s.section_id limit 1))`;
  const only = (types: string[], column: string) =>
    `case when e.type in (${types.map((t) => `'${t}'`).join(', ')}) then ${column} end`;
  const mappedSections = [...new Set(sel.mapped.map((m) => m.sectionId))];
  const mappedJoins = mappedSections
    .map(
      (sectionId, i) => `
    left join lateral (${sectionValuesSql(account, 'ep.canonical_id', values.add(sectionId, 'bigint'))}) m${i} on true`,
    )
    .join('');
  const mappedCells = sel.mapped.map((m) => {
    const at = `m${mappedSections.indexOf(m.sectionId)}`;
    return 'versionId' in m
      ? cell(`${at}.attrs -> ${values.add(m.versionId, 'text')}`)
      : `case when ${at}.tags -> ${values.add(m.tagId, 'text')} = 'true'::jsonb then 'TAG' end`;
  });
  const columns = [
    'e.activity_id',
    'coalesce(e.split_id, e.activity_id)',
    'e.activity_name',
    'coalesce(e.split_name, e.activity_name)',
    'coalesce(e.split_sender_name, e.sender_name)',
    'coalesce(e.split_email_subject, e.email_subject)',
    address,
    'e.variation',
    'e.type',
    'e.correlation_id',
    `case when e.source_time is null or e.source_time < ${values.add(sel.firstSourceTime, 'timestamptz')} then '0' else ${ms('e.source_time')} end`,
    ms('e.server_time'),
    only(['OPENED', 'CLICKED'], 'e.device'),
    only(['OPENED', 'CLICKED'], 'e.location'),
    only(['CLICKED'], 'e.link_id'),
    only(['CLICKED'], 'e.link_url'),
    only(['CLICKED'], 'e.link_title'),
    only(['BOUNCED'], 'e.bounce_code::text'),
    only(['UNSUBSCRIBED'], 'e.unsubscribe_topic'),
    only(
      ['ABUSE'],
      bySection(
        sel.sections.map((s) => s.discriminator),
        'text[]',
      ),
    ),
    ...mappedCells,
  ];
  return `${
    sel.segment === null
      ? ''
      : `with selected as materialized (
      select p.profile_id from (${canonicalProfilesSql(account)}) p where ${sel.segment}
    )`
  }
    select ${csvLine(columns.length)} from (select c.*, ${columns.map((_, i) => `coalesce(c.c${i}, '')`).join(` || ',' || `)} as line from (
    select ${columns.map((c, i) => `${c} as c${i}`).join(', ')}
    from (${sel.events}) e
    join (${clusterProfilesSql(account)}) ep on ep.profile_id = e.profile_id
    left join lateral (${sectionValuesSql(account, 'ep.canonical_id', 'e.section_id')}) d on true${mappedJoins}
    ${sel.segment === null ? '' : 'where ep.canonical_id in (select profile_id from selected)'}
    order by e.section_id, e.event_time, e.event_id
    -- offset 0 keeps the subqueries whole: each cell and each line computed once.
    offset 0) c offset 0) c`;
}

/** Streams the lines of emailEventStatement through a cursor (never whole in memory). */
export function emailEventLines(pool: pg.Pool, statement: Statement): AsyncGenerator<unknown[]> {
  return cursorRows(pool, statement, 1000, { whole: true });
}

/** Erases the exports of a deleted account. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from exports where account_id = $1::bigint', [accountId]);
}

import type pg from 'pg';
import type { SqlValues } from '../aql/compile-sql.ts';
import { cursorRows } from '../store/cursor.ts';
import type { Queryable } from '../store/pool.ts';
import type { ConsentCountBody, ConsentExportBody } from './schemas.ts';

export type ExportStatus = 'queued' | 'in_progress' | 'ready' | 'failed' | 'expired';

/** The columns `kind` and `request`: a body checked against its kind's schema when the export was created. */
type StoredRequest = { kind: 'consents'; request: ConsentExportBody } | { kind: 'consents-count'; request: ConsentCountBody };

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
  const { rows } = await db.query<{ n: number }>("select count(*)::int as n from exports where account_id = $1::bigint and status in ('queued', 'in_progress')", [accountId]);
  return rows[0].n;
}

export async function insertExport(db: Queryable, accountId: string, e: { exportId: string; kind: StoredRequest['kind']; request: StoredRequest['request']; createdAt: Date }): Promise<void> {
  await db.query(
    "insert into exports (account_id, export_id, kind, request, status, created_at) values ($1::bigint, $2::uuid, $3, $4, 'queued', $5)",
    [accountId, e.exportId, e.kind, e.request, e.createdAt],
  );
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
  await db.query("update exports set status = 'in_progress' where account_id = $1::bigint and export_id = $2::uuid and status = 'queued'", [accountId, exportId]);
}

/** Marks an export ready with its file or its result, served until `expiresAt`. */
export async function setExportReady(db: Queryable, accountId: string, exportId: string, ready: { fileKey: string | null; result: Record<string, number> | null; readyAt: Date; expiresAt: Date }): Promise<void> {
  await db.query(
    "update exports set status = 'ready', file_key = $3, result = $4, ready_at = $5, expires_at = $6 where account_id = $1::bigint and export_id = $2::uuid",
    [accountId, exportId, ready.fileKey, ready.result, ready.readyAt, ready.expiresAt],
  );
}

export async function setExportFailed(db: Queryable, accountId: string, exportId: string, message: string): Promise<void> {
  await db.query("update exports set status = 'failed', message = $3 where account_id = $1::bigint and export_id = $2::uuid", [accountId, exportId, message]);
}

/** An expired export whose file is removed: the row stays, so that its poll URL answers 410 rather than "unknown". */
export async function setExportExpired(db: Queryable, accountId: string, exportId: string): Promise<void> {
  await db.query("update exports set status = 'expired', file_key = null where account_id = $1::bigint and export_id = $2::uuid", [accountId, exportId]);
}

/**
 * Which profiles an export by consent holds, and what it needs of them (docs/exports.md). Every
 * SQL fragment here binds its values in the `values` the statement is built with.
 */
export interface ConsentSelection {
  /** Placeholder of the account id. */
  account: string;
  sectionId: string;
  /** Per segment name, a predicate over the canonical profile `p` (compilePredicate). */
  segments: string[];
  /** Which profiles, as SQL over the segment columns named by `column`; null for every profile. */
  filter: ((column: (index: number) => string) => string) | null;
  /** Per channel: the attribute version of its addresses, and maySendSql over a profile id and its address. */
  channels: { addressVersionId: string; maySend: (profile: string, address: string) => string }[];
  excludeUnsubscribed: boolean;
  duplicates: 'oldest' | 'latest' | 'keep';
  /** Attribute version ids and tag ids of the file's columns. */
  attributes: string[];
  tags: string[];
  limit: number | null;
}

/**
 * The rows of an export by consent, as a common table expression `chosen` of canonical profiles:
 * those the segment filter selects, less those that may not be contacted on any channel when
 * unsubscribed profiles are excluded, less the duplicates of an address (of the first channel:
 * among profiles with the same address, lower-cased, the least or most recently updated one in the
 * section is kept; profiles without one are never duplicates), then at most `limit` of them chosen
 * at random. Columns: profile_id, export_key, attrs and tags (the cluster's values in the section),
 * s<i> per segment, a<i> (address) and c<i> (may be contacted) per channel.
 */
function chosenProfiles(values: SqlValues, sel: ConsentSelection): string {
  const section = values.add(sel.sectionId, 'bigint');
  const segmentColumns = sel.segments.map((predicate, i) => `, ${predicate} as s${i}`).join('');
  const addressColumns = sel.channels.map((c, i) => {
    const v = values.add(c.addressVersionId, 'text');
    return `, case when jsonb_typeof(d.attrs -> ${v}) = 'string' then d.attrs ->> ${v} end as a${i}`;
  }).join('');
  const filter = sel.filter ? sel.filter((i) => `b.s${i}`) : null;
  const contactColumns = sel.channels.map((c, i) => `, ${c.maySend('b.profile_id', `b.a${i}`)} as c${i}`).join('');
  const anyContact = sel.channels.map((_, i) => `k.c${i}`).join(' or ');
  const order = sel.duplicates === 'latest' ? 'desc' : 'asc';
  return `with base as (
      select p.profile_id, p.export_key, d.attrs, d.tags, d.updated_at${segmentColumns}${addressColumns}
      from profiles p
      left join lateral (
        select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = p.account_id and ps.profile_id = p.profile_id and ps.section_id = ${section}
      ) d on true
      where p.account_id = ${sel.account} and p.canonical_id is null
    ), contactable as (
      select b.*${contactColumns} from base b ${filter === null ? '' : `where ${filter}`}
    ), kept as (
      select k.* from contactable k ${sel.excludeUnsubscribed ? `where ${anyContact}` : ''}
    ), unique_addresses as (
      ${sel.duplicates === 'keep' ? 'select * from kept' : `select * from (
        select k.*, row_number() over (partition by lower(k.a0) order by k.updated_at ${order}, k.profile_id) as nth from kept k
      ) u where u.nth = 1 or coalesce(u.a0, '') = ''`}
    ), chosen as (
      select * from unique_addresses ${sel.limit === null ? '' : `order by random() limit ${values.add(sel.limit, 'bigint')}`}
    )`;
}

/** An attribute value as a cell: strings as they are, other JSON as its text, nothing for null. */
const cell = (json: string) => `case jsonb_typeof(${json}) when 'string' then (${json}) #>> '{}' when 'null' then null else (${json})::text end`;

/**
 * Streams the file rows of an export by consent through a cursor (never whole in memory), in the
 * order of the profiles' creation: export key, attributes, tags (1 or 0), segments (1 or 0), the
 * address per channel where the profile may be contacted on it, and 1 for `subscribed` when
 * unsubscribed profiles are excluded (docs/exports.md).
 */
export function streamConsentExportRows(pool: pg.Pool, values: SqlValues, sel: ConsentSelection): AsyncGenerator<unknown[]> {
  const chosen = chosenProfiles(values, sel);
  const columns = [
    'c.export_key',
    ...sel.attributes.map((v) => cell(`c.attrs -> ${values.add(v, 'text')}`)),
    ...sel.tags.map((t) => `case when c.tags -> ${values.add(t, 'text')} = 'true'::jsonb then '1' else '0' end`),
    ...sel.segments.map((_, i) => `case when c.s${i} then '1' else '0' end`),
    ...sel.channels.map((_, i) => `case when c.c${i} then c.a${i} end`),
    ...(sel.excludeUnsubscribed ? ["'1'"] : []),
  ];
  return cursorRows(pool, { text: `${chosen} select ${columns.join(', ')} from chosen c order by c.profile_id`, values: values.values });
}

/** The count of an export by consent: its rows, and per channel those whose address it would hold. */
export async function countConsentExport(db: Queryable, values: SqlValues, sel: ConsentSelection): Promise<{ total: number; channels: number[] }> {
  const chosen = chosenProfiles(values, sel);
  const perChannel = sel.channels.map((_, i) => `, count(*) filter (where c.c${i})::int as c${i}`).join('');
  const { rows } = await db.query<Record<string, number>>(`${chosen} select count(*)::int as total${perChannel} from chosen c`, values.values);
  return { total: rows[0].total, channels: sel.channels.map((_, i) => rows[0][`c${i}`]) };
}

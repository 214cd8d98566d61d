import type { Queryable } from '../store/pool.ts';
import type { ImportRequest, ImportV1, ImportV2 } from './schemas.ts';

/** The columns `version` and `request`: a body checked against its version's schema when the import was created. */
type StoredRequest = { version: 1; request: ImportV1 } | { version: 2; request: ImportV2 };

export type ImportRowDb = StoredRequest & {
  import_id: string;
  section_id: string;
  status: string;
  file_key: string;
  upload_expires_at: Date;
  lanes_done: number[] | null;
  profiles_found: number;
  profiles_processed: number;
  profiles_failed: number;
  profiles_new: number;
  profiles_updated: number;
  profiles_not_changed: number;
  message: string | null;
  rows_total: number | null;
  created_at: Date;
  finished_at: Date | null;
};

/** The request an import was created with, as its row stores it. */
export function importRequestOf(row: StoredRequest): ImportRequest {
  return row.version === 1 ? { version: 1, body: row.request } : { version: 2, body: row.request };
}

export async function insertImport(
  db: Queryable,
  accountId: string,
  i: { importId: string; sectionId: string; request: ImportRequest; fileKey: string; uploadExpiresAt: Date },
): Promise<void> {
  await db.query(
    `insert into imports (account_id, import_id, section_id, version, request, status, file_key, upload_expires_at)
     values ($1::bigint, $2::uuid, $3::bigint, $4, $5, 'waiting_for_file', $6, $7)`,
    [accountId, i.importId, i.sectionId, i.request.version, i.request.body, i.fileKey, i.uploadExpiresAt],
  );
}

const IMPORT_COLUMNS = `import_id::text, section_id::text, version, request, status, file_key, upload_expires_at, lanes_done,
  profiles_found, profiles_processed, profiles_failed, profiles_new, profiles_updated, profiles_not_changed, message,
  rows_total, created_at, finished_at`;

export async function findImport(
  db: Queryable,
  accountId: string,
  importId: string,
  forUpdate = false,
): Promise<ImportRowDb | undefined> {
  if (!/^[0-9a-f-]{36}$/i.test(importId)) return undefined;
  const { text, values } = findImportStatement(accountId, importId, forUpdate);
  const { rows } = await db.query<ImportRowDb>(text, values);
  return rows[0];
}

/** The statement of `findImport`: one import, locked for the transaction when `forUpdate`. */
export function findImportStatement(accountId: string, importId: string, forUpdate: boolean) {
  return {
    text: `select ${IMPORT_COLUMNS} from imports where account_id = $1::bigint and import_id = $2::uuid${forUpdate ? ' for update' : ''}`,
    values: [accountId, importId],
  };
}

/** The imports of a section, newest first. */
export async function listImportsBySection(
  db: Queryable,
  accountId: string,
  sectionId: string,
  limit: number,
): Promise<ImportRowDb[]> {
  const { text, values } = listImportsStatement(accountId, sectionId, limit);
  const { rows } = await db.query<ImportRowDb>(text, values);
  return rows;
}

/** The statement of `listImportsBySection`. */
export function listImportsStatement(accountId: string, sectionId: string, limit: number) {
  return {
    text: `select ${IMPORT_COLUMNS} from imports where account_id = $1::bigint and section_id = $2::bigint
     order by created_at desc, import_id limit $3`,
    values: [accountId, sectionId, limit],
  };
}

/** Imports that hold a place: queued or running, or waiting for a file that may still come. */
export async function countPendingImports(db: Queryable, accountId: string, now: Date): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from imports where account_id = $1::bigint
       and (status in ('queued', 'in_progress') or (status = 'waiting_for_file' and upload_expires_at > $2))`,
    [accountId, now],
  );
  return rows[0].n;
}

/** Serialises import requests of one account, so the pending limit holds under concurrency. */
export async function lockAccountImports(db: Queryable, accountId: string): Promise<void> {
  await db.query("select pg_advisory_xact_lock(hashtext('imports'), $1::bigint::int)", [accountId]);
}

export async function setImportStatus(
  db: Queryable,
  accountId: string,
  importId: string,
  status: string,
  message: string | null = null,
): Promise<void> {
  const { text, values } = setImportStatusStatement(accountId, importId, status, message);
  await db.query(text, values);
}

/** The statement of `setImportStatus`: a finished import (completed or error) also gets its end time. */
export function setImportStatusStatement(accountId: string, importId: string, status: string, message: string | null) {
  // The end time is set by its own form of the statement: Citus takes no now() inside a CASE of an UPDATE.
  const finished = status === 'completed' || status === 'error' ? ', finished_at = now()' : '';
  return {
    text: `update imports set status = $3, message = coalesce($4, message)${finished}
     where account_id = $1::bigint and import_id = $2::uuid`,
    values: [accountId, importId, status, message],
  };
}

/** Queues an import whose file has come, with the number of data rows the file holds. */
export async function queueImport(
  db: Queryable,
  accountId: string,
  importId: string,
  rowsTotal: number,
): Promise<void> {
  await db.query(
    `update imports set status = 'queued', rows_total = $3 where account_id = $1::bigint and import_id = $2::uuid`,
    [accountId, importId, rowsTotal],
  );
}

/** Gives an import starting its first run its lanes, none with a row done yet. */
export async function startImportLanes(
  db: Queryable,
  accountId: string,
  importId: string,
  lanes: number,
): Promise<void> {
  await db.query(
    'update imports set lanes_done = array_fill(0, array[$3::int]) where account_id = $1::bigint and import_id = $2::uuid and lanes_done is null',
    [accountId, importId, lanes],
  );
}

/** A processed batch of a lane, as `recordImportBatch` takes it. */
export interface ImportBatch {
  lane: number;
  rowsDone: number;
  found: number;
  new: number;
  updated: number;
  notChanged: number;
  failures: { line: number; reason: string }[];
}

/** Records a processed batch of a lane: counters, the rows read so far, and the failed rows. */
export async function recordImportBatch(
  db: Queryable,
  accountId: string,
  importId: string,
  batch: ImportBatch,
): Promise<void> {
  for (const { text, values } of recordImportBatchStatements(accountId, importId, batch)) await db.query(text, values);
}

/** The statements of `recordImportBatch`: the import's counters, then its failed rows when it has some. */
export function recordImportBatchStatements(
  accountId: string,
  importId: string,
  batch: ImportBatch,
): { text: string; values: unknown[] }[] {
  const counters = {
    text: `update imports set lanes_done[$9::int + 1] = $3, profiles_found = profiles_found + $4,
       profiles_processed = profiles_processed + $5 + $6 + $7, profiles_new = profiles_new + $5,
       profiles_updated = profiles_updated + $6, profiles_not_changed = profiles_not_changed + $7,
       profiles_failed = profiles_failed + $8
     where account_id = $1::bigint and import_id = $2::uuid`,
    values: [
      accountId,
      importId,
      batch.rowsDone,
      batch.found,
      batch.new,
      batch.updated,
      batch.notChanged,
      batch.failures.length,
      batch.lane,
    ],
  };
  if (batch.failures.length === 0) return [counters];
  const failures = {
    text: `insert into import_failures (account_id, import_id, line, reason)
       select $1::bigint, $2::uuid, l, r from unnest($3::int[], $4::text[]) as f(l, r) on conflict do nothing`,
    values: [accountId, importId, batch.failures.map((f) => f.line), batch.failures.map((f) => f.reason)],
  };
  return [counters, failures];
}

export async function listImportFailures(
  db: Queryable,
  accountId: string,
  importId: string,
  limit: number,
): Promise<{ line: number; reason: string }[]> {
  const { rows } = await db.query<{ line: number; reason: string }>(
    'select line, reason from import_failures where account_id = $1::bigint and import_id = $2::uuid order by line limit $3',
    [accountId, importId, limit],
  );
  return rows;
}

/** Erases the imports of a deleted account and their failures. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from import_failures where account_id = $1::bigint', [accountId]);
  await db.query('delete from imports where account_id = $1::bigint', [accountId]);
}

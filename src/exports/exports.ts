import crypto from 'node:crypto';
import { pipeline, Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import type pg from 'pg';
import type { Clock } from '../core/clock.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections } from '../definitions/definitions.ts';
import type { FileStore } from '../files/store.ts';
import { enqueue, MAX_ATTEMPTS, type Job } from '../jobs/queue.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { consentCountResult, consentExportFile, planConsentCount, planConsentExport } from './by-consent.ts';
import { planSegmentExport, segmentExportFile } from './by-segment.ts';
import { duplicateExportFile, planDuplicateExport } from './duplicates.ts';
import { emailEventExportFile, planEmailEventExport } from './email-events.ts';
import { eventExportDocument, planEventExport } from './events.ts';
import { CSV_TYPE, JSON_TYPE, jsonFromCsv, XLSX_TYPE, xlsxFromCsv } from './formats.ts';
import type { ExportFile } from './plans.ts';
import * as q from './queries.ts';
import type { ExportBodies } from './schemas.ts';

/**
 * Exports and counts (SPEC §2.16, §3.3, §4.7; docs/exports.md): a request is checked and stored
 * with its job in one transaction; the worker writes its file (CSV, or JSON for the event export,
 * gzip-compressed in the file store) or its result; its poll URL answers while it is in progress,
 * serves it for one day once ready, then answers 410, and a sweeper job removes the file.
 */

export const EXPORT_JOB = 'export';
export const EXPORT_SWEEP_JOB = 'export-sweep';
/** SPEC §3.3, §8: a ready export is served for one day. */
export const EXPORT_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** A sweep that comes before the export's expiry (the database's clock ahead of the service's) tries again this much later. */
const SWEEP_RETRY_MS = 60_000;

/** An export request with the kind whose schema its body was checked against: code narrows on `kind`. */
export type ExportRequest = { [K in keyof ExportBodies]: { kind: K; body: ExportBodies[K] } }[keyof ExportBodies];

/** The request of a stored file or count export. Its body was checked against its kind's schema when it was created. */
function requestOf(row: Exclude<q.ExportRowDb, { kind: 'single' }>): ExportRequest {
  switch (row.kind) {
    case 'consents':
      return { kind: row.kind, body: row.request };
    case 'consents-count':
      return { kind: row.kind, body: row.request };
    case 'duplicates':
      return { kind: row.kind, body: row.request };
    case 'segments':
      return { kind: row.kind, body: row.request };
    case 'events':
      return { kind: row.kind, body: row.request };
    case 'email-events':
      return { kind: row.kind, body: row.request };
  }
}

/**
 * What an export produces: a CSV file (its header, its rows as a stream), a document (its text as a
 * stream: JSON, or CSV whose lines the database writes) or a count's result.
 */
type Output = { file: ExportFile } | { document: AsyncIterable<string> } | { result: Record<string, number> };

/**
 * Checks a request against the account's definitions (400 naming the field) and answers how to
 * produce it; the worker checks again, as definitions may have changed since. Nothing runs until
 * `produce` is called.
 */
function plan(scope: AccountScope, request: ExportRequest): { produce(pool: pg.Pool): Promise<Output> } {
  switch (request.kind) {
    case 'consents': {
      const p = planConsentExport(scope, request.body);
      return { produce: async (pool) => ({ file: consentExportFile(pool, scope, p) }) };
    }
    case 'consents-count': {
      const p = planConsentCount(scope, request.body);
      return { produce: async (pool) => ({ result: await consentCountResult(pool, scope, p) }) };
    }
    case 'duplicates': {
      const p = planDuplicateExport(scope, request.body);
      return { produce: async (pool) => ({ file: duplicateExportFile(pool, scope, p) }) };
    }
    case 'segments': {
      const p = planSegmentExport(scope, request.body);
      return { produce: async (pool) => ({ file: segmentExportFile(pool, scope, p) }) };
    }
    case 'events': {
      const p = planEventExport(scope, request.body);
      return { produce: async (pool) => ({ document: eventExportDocument(pool, scope, p) }) };
    }
    case 'email-events': {
      const p = planEmailEventExport(scope, request.body);
      return { produce: async (pool) => ({ document: emailEventExportFile(pool, scope, p) }) };
    }
  }
}

/**
 * Creates an export or count (SPEC §4.7): needs a key granted every section (SPEC §7.3), checks the
 * request, holds one of the account's pending places (429 beyond `pending_exports`), and stores it
 * with its job in the caller's transaction. Answers the export's id, the end of its poll URL.
 */
export async function createExport(tx: Queryable, scope: AccountScope, request: ExportRequest): Promise<string> {
  requireAllSections(scope, 'a data export');
  plan(scope, request);
  return queueExport(tx, scope, { kind: request.kind, request: request.body }, EXPORT_JOB);
}

/**
 * Holds one of the account's pending places (429 beyond `pending_exports`) and stores a checked
 * export request with its job of kind `job` in the caller's transaction. Answers the export's id.
 */
export async function queueExport(
  tx: Queryable,
  scope: AccountScope,
  stored: Pick<q.StoredRequest, 'kind' | 'request'>,
  job: string,
): Promise<string> {
  await q.lockAccountExports(tx, scope.accountId);
  const pending = await q.countPendingExports(tx, scope.accountId);
  const limit = scope.limits.pending_exports;
  if (limit !== null && pending >= limit)
    throw new Problem(
      'AUD-1905',
      `Pending export limit reached: the account has ${pending} exports in progress, at most ${limit}; retry when one is ready`,
    );
  const exportId = crypto.randomUUID();
  await q.insertExport(tx, scope.accountId, { ...stored, exportId, createdAt: scope.now });
  await enqueue(tx, scope.accountId, job, { export_id: exportId });
  return exportId;
}

/**
 * A ready file: the media types it can be sent as, the stored one first, and how to read it as
 * one of them (`compressed` when the stream is gzip-compressed, as stored).
 */
export interface ExportDownload {
  types: readonly string[];
  read(type: string): { stream: Readable; compressed: boolean };
}

/** What a poll answers when it does not answer a problem. */
export type PollAnswer = { inProgress: true } | ReadyAnswer;
/** A ready export: its file, or a count's result. */
export type ReadyAnswer = { file: ExportDownload } | { result: Record<string, number> };

/**
 * The forms of a stored file (SPEC §4.7, EXP-37 to EXP-40): the event export's and the single
 * profile export's JSON; the other files' CSV, or the same rows as an Excel workbook, and for the segment export as JSON too. The
 * other forms are produced from the stored CSV while they are sent (docs/exports.md "Excel and
 * JSON forms": nothing more is stored, and the rows are the CSV's by construction).
 */
function downloadOf(files: FileStore, kind: q.ExportRowDb['kind'], key: string): ExportDownload {
  const types =
    kind === 'events' || kind === 'single'
      ? [JSON_TYPE]
      : kind === 'segments'
        ? [CSV_TYPE, XLSX_TYPE, JSON_TYPE]
        : [CSV_TYPE, XLSX_TYPE];
  return {
    types,
    read(type) {
      if (type === types[0]) return { stream: files.read(key), compressed: true };
      return { stream: (type === XLSX_TYPE ? xlsxFromCsv : jsonFromCsv)(files.read(key)), compressed: false };
    },
  };
}

/**
 * A poll of an export (SPEC §3.3; ENDPOINTS.md "Facts"). The first form answers 404 while in
 * progress and 410 for an id that is unknown or no longer available; the v2 form answers
 * `inProgress` (202), 404 for an unknown id and 410 for one no longer available. A failed export
 * answers 503 in both. A ready file export answers its file, in the forms it can be sent in. The
 * `single` form, the data URL of a single profile export, answers as the first one but 404 for
 * an unknown id; each form knows only its own exports.
 */
export async function pollExport(
  db: Queryable,
  files: FileStore,
  scope: AccountScope,
  exportId: string,
  form: 'v1' | 'single',
): Promise<ReadyAnswer>;
export async function pollExport(
  db: Queryable,
  files: FileStore,
  scope: AccountScope,
  exportId: string,
  form: 'v1' | 'v2' | 'single',
): Promise<PollAnswer>;
export async function pollExport(
  db: Queryable,
  files: FileStore,
  scope: AccountScope,
  exportId: string,
  form: 'v1' | 'v2' | 'single',
): Promise<PollAnswer> {
  requireAllSections(scope, 'downloading a data export');
  const gone = new Problem(
    'AUD-1902',
    `The export "${exportId}" is no longer available (ready exports are kept for one day); request a new one`,
  );
  const found = await q.findExport(db, scope.accountId, exportId);
  // Each form knows only its own exports; an email event export is read at /emails/reports (email-events.ts).
  const row =
    found && found.kind !== 'email-events' && (found.kind === 'single') === (form === 'single') ? found : undefined;
  if (!row) {
    if (form !== 'v1') throw new Problem('AUD-1903', `No export "${exportId}"`);
    throw new Problem(
      'AUD-1902',
      `No export "${exportId}" is available: the id is unknown, or the export is no longer available`,
    );
  }
  switch (row.status) {
    case 'queued':
    case 'in_progress':
      if (form === 'v2') return { inProgress: true };
      throw new Problem('AUD-1901', `The export "${exportId}" is in progress; poll again later`);
    case 'failed':
      throw new Problem(
        'AUD-1904',
        `The export "${exportId}" failed (${row.message ?? 'no reason recorded'}); request a new export`,
      );
    case 'expired':
      throw gone;
    case 'ready':
      if (row.expires_at!.getTime() <= scope.now.getTime()) throw gone;
      if (row.file_key === null) return { result: row.result! };
      // A file removed behind the sweeper's back (the store emptied by hand) is gone too.
      if (!(await files.exists(row.file_key))) throw gone;
      return { file: downloadOf(files, row.kind, row.file_key) };
  }
}

/** What the export jobs work with. */
export interface ExportDeps {
  pool: pg.Pool;
  files: FileStore;
  clock: Clock;
  scopeOf: (accountId: string) => Promise<AccountScope>;
  /** Told the data rows of each CSV file an export job wrote, once the export is ready (for /metrics and the job's log line). */
  exported?: (kind: string, rows: number) => void;
}

/** Writes what `source` reads, through `transforms`, gzip-compressed into the store: streamed, never whole in memory. */
async function writeCompressed(
  files: FileStore,
  key: string,
  source: Readable,
  ...transforms: Transform[]
): Promise<void> {
  const gzip = zlib.createGzip();
  // A failing read (the database, a broken cursor or COPY) fails the gzip stream, and so the store's write, which then keeps nothing.
  pipeline([source, ...transforms, gzip], () => {});
  try {
    await files.put(key, gzip);
  } catch (err) {
    // A failing write stops the read, which then gives its connection back.
    source.destroy();
    throw err;
  }
}

const LF = 0x0a;
const QUOTE = 0x22;
const CRLF = Buffer.from('\r\n');

/**
 * A CSV file from the rows COPY writes: the header row first, then the rows, each ended by `\r\n`
 * (RFC 4180) where COPY ends it by `\n`. A line feed inside a quoted cell is part of the value
 * and stays as it is: quotes open and close such cells (a quote inside one is doubled, which
 * closes and opens again).
 */
function csvFile(columns: string[], counted: (rows: number) => void): Transform {
  let rows = 0;
  let header: Buffer | null = Buffer.from(stringifyCsv([columns], { record_delimiter: 'windows' }));
  let quoted = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const parts: Buffer[] = header ? [header] : [];
      header = null;
      let from = 0;
      let nextQuote = chunk.indexOf(QUOTE);
      for (let at = 0; at < chunk.length;) {
        if (quoted) {
          if (nextQuote === -1) break;
          quoted = false;
          at = nextQuote + 1;
          nextQuote = chunk.indexOf(QUOTE, at);
          continue;
        }
        const lf = chunk.indexOf(LF, at);
        if (nextQuote !== -1 && (lf === -1 || nextQuote < lf)) {
          quoted = true;
          at = nextQuote + 1;
          nextQuote = chunk.indexOf(QUOTE, at);
          continue;
        }
        if (lf === -1) break;
        parts.push(chunk.subarray(from, lf), CRLF);
        rows++;
        from = at = lf + 1;
      }
      parts.push(chunk.subarray(from));
      done(null, Buffer.concat(parts));
    },
    // A file without rows is its header.
    flush(done) {
      counted(rows);
      done(null, header ?? undefined);
    },
  });
}

/**
 * The worker's export job: checks the request again in the account's present definitions (a
 * problem now fails the export with its detail), writes the file or computes the result, and
 * marks the export ready for one day, with its sweeper job, in one transaction. A job that fails
 * for another reason is retried; after its last attempt the export fails.
 */
export async function runExport(deps: ExportDeps, job: Job): Promise<void> {
  const { accountId } = job;
  const exportId = String(job.payload.export_id);
  const row = await q.findExport(deps.pool, accountId, exportId);
  // A single profile export has jobs of its own (single.ts).
  if (!row || row.kind === 'single' || (row.status !== 'queued' && row.status !== 'in_progress')) return;
  await q.setExportInProgress(deps.pool, accountId, exportId);
  const scope = await deps.scopeOf(accountId);
  try {
    const planned = plan(scope, requestOf(row));
    // The event export's file is JSON; the others' CSV (the email event export's written as a document); a count has none.
    const fileKey =
      row.kind === 'consents-count'
        ? null
        : `exports/${accountId}/${exportId}.${row.kind === 'events' ? 'json' : 'csv'}.gz`;
    // A job taken up again after its worker died (its lease ran out) writes the file from the
    // start; what the dead worker had written of it, under a temporary name, goes first.
    if (fileKey !== null && job.attempts > 1) await deps.files.remove(fileKey);
    const output = await planned.produce(deps.pool);
    if ('result' in output)
      return await markExportReady(deps, accountId, exportId, { fileKey: null, result: output.result });
    let rows: number | undefined;
    if ('file' in output) {
      await writeCompressed(
        deps.files,
        fileKey!,
        output.file.rows,
        csvFile(output.file.columns, (n) => (rows = n)),
      );
    } else {
      await writeCompressed(deps.files, fileKey!, Readable.from(output.document));
    }
    await markExportReady(deps, accountId, exportId, { fileKey, result: null });
    if (rows !== undefined) deps.exported?.(row.kind, rows);
  } catch (err) {
    return failExport(deps, job, exportId, err);
  }
}

/**
 * Marks an export ready for one day with its file or its result and, for a file, queues its
 * sweeper, in one transaction with what `alongside` writes.
 */
export async function markExportReady(
  deps: ExportDeps,
  accountId: string,
  exportId: string,
  ready: { fileKey: string | null; result: Record<string, number> | null },
  alongside?: (tx: Queryable) => Promise<void>,
): Promise<void> {
  const readyAt = new Date(deps.clock());
  const expiresAt = new Date(readyAt.getTime() + EXPORT_LIFETIME_MS);
  await withTransaction(deps.pool, async (tx) => {
    await q.setExportReady(tx, accountId, exportId, { ...ready, readyAt, expiresAt });
    if (ready.fileKey !== null) await enqueue(tx, accountId, EXPORT_SWEEP_JOB, { export_id: exportId }, expiresAt);
    await alongside?.(tx);
  });
}

/**
 * What an export's job does with an error: a problem (the request no longer holds) fails the
 * export with its detail; any other error is thrown again, so that the job is retried, and fails
 * the export after the job's last attempt.
 */
export async function failExport(deps: ExportDeps, job: Job, exportId: string, err: unknown): Promise<void> {
  if (err instanceof Problem) return q.setExportFailed(deps.pool, job.accountId, exportId, err.detail);
  if (job.attempts >= MAX_ATTEMPTS)
    await q.setExportFailed(deps.pool, job.accountId, exportId, 'the export could not be written');
  throw err;
}

/**
 * The sweeper job of a ready export, due when it expires: removes its file from the store, then
 * marks it expired (a crash in between removes nothing twice: removing is idempotent and the job
 * runs again).
 */
export async function sweepExport(deps: ExportDeps, job: Job): Promise<void> {
  const { accountId } = job;
  const exportId = String(job.payload.export_id);
  const row = await q.findExport(deps.pool, accountId, exportId);
  if (!row || row.status !== 'ready' || row.file_key === null) return;
  if (row.expires_at!.getTime() > deps.clock()) {
    await enqueue(
      deps.pool,
      accountId,
      EXPORT_SWEEP_JOB,
      { export_id: exportId },
      new Date(row.expires_at!.getTime() + SWEEP_RETRY_MS),
    );
    return;
  }
  await deps.files.remove(row.file_key);
  await q.setExportExpired(deps.pool, accountId, exportId);
}

import crypto from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';
import { stringify as stringifyCsv } from 'csv-stringify/sync';
import type pg from 'pg';
import type { Clock } from '../core/clock.ts';
import type { Definitions } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import { pipeWhileWriting } from '../core/streams.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections } from '../definitions/definitions.ts';
import type { FileStore } from '../files/store.ts';
import { enqueue, MAX_ATTEMPTS, type Job, type JobKind, type JobPayloads } from '../jobs/queue.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { recordWebhookEvents } from '../webhooks/events.ts';
import { XLSX_TYPE, jsonFromCsv, xlsxFromCsv } from './formats.ts';
import type { StoredKind } from './kind.ts';
import { exportKind, storedKind, type BodyOf, type ExportKindName } from './kinds.ts';
import * as q from './queries.ts';

/**
 * The life cycle of exports and counts (SPEC §2.16, §3.3, §4.7; docs/exports.md), the same for
 * every kind of the table in kinds.ts: a request is checked into its kind's plan and stored with
 * its job, which carries the plan, in one transaction; the worker runs the plan, writing its file
 * (gzip-compressed in the file store) or its result; its poll URL answers while it is in progress,
 * serves it for one day once ready, then answers 410, and a sweeper job removes the file.
 */

export const EXPORT_JOB = 'export';
export const EXPORT_SWEEP_JOB = 'export-sweep';
/** A plan as the export job carries it: with a digest of the definitions it was made in. */
interface StoredPlan {
  definitions: string;
  plan: unknown;
}

/**
 * The payload of an export's jobs, here and in single.ts: the export, and for the export job the
 * plan made when it was requested (none in a job queued before plans were kept).
 */
export interface ExportJob {
  export_id: string;
  plan?: StoredPlan;
}
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [EXPORT_JOB]: ExportJob;
    [EXPORT_SWEEP_JOB]: ExportJob;
  }
}
/** The kinds of job that carry an export's id. */
type ExportJobKind = { [K in JobKind]: JobPayloads[K] extends ExportJob ? K : never }[JobKind];
/** SPEC §3.3, §8: a ready export is served for one day. */
export const EXPORT_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** A sweep that comes before the export's expiry (the database's clock ahead of the service's) tries again this much later. */
const SWEEP_RETRY_MS = 60_000;

/** An export request with the kind whose schema its body was checked against. */
export type ExportRequest = { [K in ExportKindName]: { kind: K; body: BodyOf<K> } }[ExportKindName];

const digests = new WeakMap<Definitions, string>();
/** A digest of an account's definitions: a plan is run as made while it stays the same. */
function definitionsDigest(defs: Definitions): string {
  let digest = digests.get(defs);
  if (digest === undefined) {
    digest = crypto.createHash('sha256').update(JSON.stringify(defs)).digest('base64url');
    digests.set(defs, digest);
  }
  return digest;
}

/**
 * Creates an export or count (SPEC §4.7): needs a key granted every section (SPEC §7.3), checks the
 * request, holds one of the account's pending places (429 beyond `pending_exports`), and stores it
 * with its job in the caller's transaction. Answers the export's id, the end of its poll URL.
 */
export async function createExport(tx: Queryable, scope: AccountScope, request: ExportRequest): Promise<string> {
  requireAllSections(scope, 'a data export');
  const plan = exportKind(request.kind)!.plan(scope, request.body);
  return queueExport(tx, scope, { kind: request.kind, request: request.body }, EXPORT_JOB, {
    definitions: definitionsDigest(scope.defs),
    plan,
  });
}

/**
 * Holds one of the account's pending places (429 beyond `pending_exports`) and stores a checked
 * export request with its job of kind `job` (carrying `plan`, when given) in the caller's
 * transaction. Answers the export's id.
 */
export async function queueExport(
  tx: Queryable,
  scope: AccountScope,
  stored: q.StoredRequest,
  job: ExportJobKind,
  plan?: StoredPlan,
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
  await q.insertExport(tx, scope.accountId, {
    ...stored,
    exportId,
    createdAt: scope.now,
    requestedBy: scope.caller?.clientId ?? null,
  });
  const payload: ExportJob = plan === undefined ? { export_id: exportId } : { export_id: exportId, plan };
  await enqueue(tx, scope.accountId, job, payload);
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
 * The forms of a stored file (SPEC §4.7, EXP-37 to EXP-40), those its kind names: the JSON of the
 * event export and the single profile export; the other files' CSV, or the same rows as an Excel
 * workbook, and for the segment export as JSON too. The other forms are produced from the stored
 * CSV while they are sent (docs/exports.md "Excel and JSON forms": nothing more is stored, and the
 * rows are the CSV's by construction).
 */
function downloadOf(files: FileStore, file: NonNullable<StoredKind['file']>, key: string): ExportDownload {
  const { types } = file;
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
  const kind = found && storedKind(found.kind);
  const row = kind && kind.readAt === (form === 'single' ? 'single' : 'reports') ? found : undefined;
  if (!kind || !row) {
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
      if (row.file_key === null || kind.file === null) return { result: row.result! };
      // A file removed behind the sweeper's back (the store emptied by hand) is gone too.
      if (!(await files.exists(row.file_key))) throw gone;
      return { file: downloadOf(files, kind.file, row.file_key) };
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

/**
 * A gzip stream for export files and their downloads, at level 3: on a CSV of a million profiles it
 * took a third of the default level's CPU time (0.9 s against 2.6 s) for a file 2% larger, and
 * the default level's compression was most of the server's share of a large export
 * (docs/benchmarks.md "Issue 26").
 */
export function createExportGzip(): zlib.Gzip {
  return zlib.createGzip({ level: 3 });
}

/** Writes what `source` reads, through `transforms`, gzip-compressed into the store: streamed, never whole in memory. */
async function writeCompressed(
  files: FileStore,
  key: string,
  source: Readable,
  ...transforms: Transform[]
): Promise<void> {
  // A failing read (the database, a broken cursor or COPY) fails the gzip stream, and so the
  // store's write, which then keeps nothing; the read's error is the caller's. A failing write
  // stops the read, which then gives its connection back.
  await pipeWhileWriting(source, [...transforms, createExportGzip()], (gzip) => files.put(key, gzip));
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
 * The worker's export job: runs the plan its job carries, writes the file or computes the result,
 * and marks the export ready for one day, with its sweeper job, in one transaction. When the
 * account's definitions changed since the request (or the job carries no plan), the request is
 * checked again in the present ones, and a problem now fails the export with its detail. A job
 * that fails for another reason is retried; after its last attempt the export fails.
 */
export async function runExport(deps: ExportDeps, job: Job<typeof EXPORT_JOB>): Promise<void> {
  const { accountId } = job;
  const { export_id: exportId, plan: stored } = job.payload;
  const row = await q.findExport(deps.pool, accountId, exportId);
  // A single profile export has jobs of its own (single.ts).
  const kind = row && exportKind(row.kind);
  if (!row || !kind || (row.status !== 'queued' && row.status !== 'in_progress')) return;
  await q.setExportInProgress(deps.pool, accountId, exportId);
  const scope = await deps.scopeOf(accountId);
  try {
    const plan =
      stored !== undefined && stored.definitions === definitionsDigest(scope.defs)
        ? stored.plan
        : kind.plan(scope, row.request);
    const fileKey = kind.file === null ? null : `exports/${accountId}/${exportId}.${kind.file.extension}.gz`;
    // A job taken up again after its worker died (its lease ran out) writes the file from the
    // start; what the dead worker had written of it, under a temporary name, goes first.
    if (fileKey !== null && job.attempts > 1) await deps.files.remove(fileKey);
    const output = await kind.produce(deps.pool, scope, plan);
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
    await markExportReady(deps, accountId, exportId, { fileKey, result: null, rows });
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
  ready: { fileKey: string | null; result: Record<string, number> | null; rows?: number },
  alongside?: (tx: Queryable) => Promise<void>,
): Promise<void> {
  const readyAt = new Date(deps.clock());
  const expiresAt = new Date(readyAt.getTime() + EXPORT_LIFETIME_MS);
  await withTransaction(deps.pool, async (tx) => {
    const kind = await q.setExportReady(tx, accountId, exportId, { ...ready, readyAt, expiresAt });
    await exportFinished(tx, accountId, exportId, kind, 'ready', null);
    const sweep: ExportJob = { export_id: exportId };
    if (ready.fileKey !== null) await enqueue(tx, accountId, EXPORT_SWEEP_JOB, sweep, expiresAt);
    await alongside?.(tx);
  });
}

/**
 * What an export's job does with an error: a problem (the request no longer holds) fails the
 * export with its detail; any other error is thrown again, so that the job is retried, and fails
 * the export after the job's last attempt.
 */
export async function failExport(
  deps: ExportDeps,
  job: Job<ExportJobKind>,
  exportId: string,
  err: unknown,
): Promise<void> {
  const fail = (message: string) => markExportFailed(deps.pool, job.accountId, exportId, message);
  if (err instanceof Problem) return fail(err.detail);
  if (job.attempts >= MAX_ATTEMPTS) await fail('the export could not be written');
  throw err;
}

/** Marks an export failed with `message`, with its export.finished event. */
export async function markExportFailed(pool: pg.Pool, accountId: string, exportId: string, message: string) {
  await withTransaction(pool, async (tx) => {
    const kind = await q.setExportFailed(tx, accountId, exportId, message);
    await exportFinished(tx, accountId, exportId, kind, 'failed', message);
  });
}

/** The export.finished event of an export, in the transaction that ends it (docs/webhooks.md). */
async function exportFinished(
  tx: Queryable,
  accountId: string,
  exportId: string,
  kind: string | undefined,
  status: 'ready' | 'failed',
  message: string | null,
): Promise<void> {
  if (kind === undefined) return;
  await recordWebhookEvents(tx, accountId, 'export.finished', () => [
    { orderingKey: null, data: { export_id: exportId, kind, status, message } },
  ]);
}

/**
 * The sweeper job of a ready export, due when it expires: removes its file from the store, then
 * marks it expired (a crash in between removes nothing twice: removing is idempotent and the job
 * runs again).
 */
export async function sweepExport(deps: ExportDeps, job: Job<typeof EXPORT_SWEEP_JOB>): Promise<void> {
  const { accountId } = job;
  const exportId = job.payload.export_id;
  const row = await q.findExport(deps.pool, accountId, exportId);
  if (!row || row.status !== 'ready' || row.file_key === null) return;
  if (row.expires_at!.getTime() > deps.clock()) {
    const payload: ExportJob = { export_id: exportId };
    await enqueue(
      deps.pool,
      accountId,
      EXPORT_SWEEP_JOB,
      payload,
      new Date(row.expires_at!.getTime() + SWEEP_RETRY_MS),
    );
    return;
  }
  await deps.files.remove(row.file_key);
  await q.setExportExpired(deps.pool, accountId, exportId);
}

/**
 * An account being deleted: `rows` erases its exports in the caller's transaction; `files`, once
 * that has committed, every file under the account's folder.
 */
export const forgetAccountExports = {
  rows: (tx: Queryable, accountId: string): Promise<void> => q.deleteAccountRows(tx, accountId),
  files: (store: FileStore, accountId: string): Promise<void> => store.removeAll(`exports/${accountId}`),
  /** The accounts with files here. */
  accounts: (store: FileStore): Promise<string[]> => store.folders('exports'),
};

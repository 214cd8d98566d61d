import type { ExportDeps } from '../exports/exports.ts';
import type { SingleExportDeps } from '../exports/single.ts';
import { settleHeap } from '../core/heap.ts';
import { accountScope, type ThreadServices } from '../services.ts';
import type { SendDeps } from '../transactional/run.ts';
import { Worker, type Job, type JobHandlers, type JobRun, type Lanes } from '../jobs/queue.ts';
import type { WebhookDeps } from '../webhooks/delivery.ts';

/**
 * Send jobs run at once besides the main loop's job: each waits on the mail server, and on its
 * share of a batch of sent messages being recorded, most of its time. A loop claims several in
 * one statement, and their reads (activity, suppression, profile) go together (docs/benchmarks.md
 * "Transactional mail").
 */
const SEND_LANES: Lanes = { loops: 4, jobs: 8 };

/**
 * Starts the worker role: the handlers of every job kind. `settleAfterImports`, for a thread of its
 * own: an import grows the thread's heap by 40-60 MB, which V8 keeps while the thread idles (as
 * after the start, src/core/heap.ts), so it is given back after each import (docs/benchmarks.md
 * "Imports"): 0.25-0.4 s once per import in the thread (on the loaded bench machine), but most
 * of a second where the same heap holds the API's (and the tests') objects. `onRun` hears of each
 * job run's start, end and failure, with the rows it wrote (the thread logs them). `dueByClock`:
 * jobs are due by the services' clock rather than the database's (the emulator's clock moves).
 * `beforeScope`: awaited as a job first reads its account (an import or an export has marked
 * itself in_progress by then): the emulator holds a job there for a test to observe.
 */
export async function startWorker(
  services: ThreadServices,
  onError: (err: unknown) => void,
  options: {
    settleAfterImports?: boolean;
    onRun?: (run: JobRun) => void;
    dueByClock?: boolean;
    /** Hears of a webhook endpoint paused by failures (the thread logs it: ids and a count). */
    onWebhookPaused?: WebhookDeps['paused'];
    beforeScope?: () => Promise<void>;
  } = {},
): Promise<Worker> {
  const { pool, files, clock, metrics } = services;
  const { beforeScope } = options;
  const scopeOf = beforeScope
    ? async (accountId: string) => {
        await beforeScope();
        return accountScope(services, accountId);
      }
    : (accountId: string) => accountScope(services, accountId);
  const exportDeps: ExportDeps = { pool, files, clock, scopeOf };
  // An export job's deps count its file's rows, for /metrics and for the job's log line.
  const exportDepsOf = (job: Job): ExportDeps => ({
    ...exportDeps,
    exported: (kind, rows) => {
      metrics.exportRows.inc({ kind }, rows);
      job.rows = rows;
    },
  });
  const singleDeps: SingleExportDeps = {
    ...exportDeps,
    outbound: services.outbound,
    publicUrl: services.config.publicUrl,
  };
  const sendDeps: SendDeps = {
    pool,
    scopeOf,
    mailer: services.mailer,
    vendor: services.config.vendor,
    trackingUrl: services.config.trackingUrl,
    serverSecret: services.serverSecret,
    ended: (status) => metrics.mail.inc({ outcome: status }),
  };
  const webhookDeps: WebhookDeps = {
    pool,
    outbound: services.outbound,
    scopeOf,
    paused: options.onWebhookPaused,
    attempted: (outcome) => metrics.webhookAttempts.inc({ outcome }),
  };
  // Each kind's module is loaded at its first job, not at the start: a worker thread that runs no
  // import does not load ingestion, nor one that sends no mail the templates (the thread's start
  // took 0.8 s of CPU with all of them, docs/benchmarks.md "Start"). The kinds are named here as
  // their modules name them (IMPORT_JOB …); tsc checks each name against JobPayloads, and that
  // every kind has its handler.
  const handlers: JobHandlers = {
    import: async (job) => {
      const committed = (rows: number) => {
        metrics.importRows.inc(rows);
        job.rows = (job.rows ?? 0) + rows;
      };
      const { runImport } = await import('../imports/ingest.ts');
      await runImport({ pool, files, scopeOf, committed }, job);
      if (options.settleAfterImports) settleHeap();
    },
    'import-upload-window': async (job) =>
      (await import('../imports/imports.ts')).closeUploadWindow({ pool, files }, job),
    export: async (job) => (await import('../exports/exports.ts')).runExport(exportDepsOf(job), job),
    'export-sweep': async (job) => (await import('../exports/exports.ts')).sweepExport(exportDeps, job),
    'export-single': async (job) => (await import('../exports/single.ts')).runSingleExport(singleDeps, job),
    'export-single-ready': async (job) => (await import('../exports/single.ts')).sendReadyCallback(singleDeps, job),
    'transactional-send': async (job) => (await import('../transactional/run.ts')).runSend(sendDeps, job),
    'webhook-delivery': async (job) => (await import('../webhooks/delivery.ts')).runWebhookDeliveries(webhookDeps, job),
    'webhook-retention': async (job) =>
      (await import('../webhooks/retention.ts')).runWebhookRetention(webhookDeps, job),
    'live-segments': async (job) => (await import('../segments/live.ts')).runLiveSegments({ pool, scopeOf }, job),
  };
  const worker = new Worker(
    pool,
    handlers,
    onError,
    metrics,
    { 'transactional-send': SEND_LANES },
    options.onRun,
    options.dueByClock ? clock : undefined,
  );
  await worker.start();
  return worker;
}

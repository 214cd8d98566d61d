import { EXPORT_JOB, EXPORT_SWEEP_JOB, runExport, sweepExport, type ExportDeps } from '../exports/exports.ts';
import {
  runSingleExport,
  sendReadyCallback,
  SINGLE_EXPORT_JOB,
  SINGLE_EXPORT_READY_JOB,
  type SingleExportDeps,
} from '../exports/single.ts';
import { settleHeap } from '../core/heap.ts';
import { runImport } from '../imports/ingest.ts';
import { closeUploadWindow, IMPORT_JOB, UPLOAD_WINDOW_JOB } from '../imports/imports.ts';
import { accountScope, type ThreadServices } from '../services.ts';
import { runSend, SEND_JOB, type SendDeps } from '../transactional/transactional.ts';
import { Worker, type Job, type JobHandlers, type JobRun, type Lanes } from '../jobs/queue.ts';
import { runWebhookDeliveries, type WebhookDeps } from '../webhooks/delivery.ts';
import { WEBHOOK_DELIVERY_JOB } from '../webhooks/events.ts';

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
  } = {},
): Promise<Worker> {
  const { pool, files, clock, metrics } = services;
  const scopeOf = (accountId: string) => accountScope(services, accountId);
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
  const handlers: JobHandlers = {
    [IMPORT_JOB]: async (job) => {
      const committed = (rows: number) => {
        metrics.importRows.inc(rows);
        job.rows = (job.rows ?? 0) + rows;
      };
      await runImport({ pool, files, scopeOf, committed }, job);
      if (options.settleAfterImports) settleHeap();
    },
    [UPLOAD_WINDOW_JOB]: (job) => closeUploadWindow({ pool, files }, job),
    [EXPORT_JOB]: (job) => runExport(exportDepsOf(job), job),
    [EXPORT_SWEEP_JOB]: (job) => sweepExport(exportDeps, job),
    [SINGLE_EXPORT_JOB]: (job) => runSingleExport(singleDeps, job),
    [SINGLE_EXPORT_READY_JOB]: (job) => sendReadyCallback(singleDeps, job),
    [SEND_JOB]: (job) => runSend(sendDeps, job),
    [WEBHOOK_DELIVERY_JOB]: (job) => runWebhookDeliveries(webhookDeps, job),
  };
  const worker = new Worker(
    pool,
    handlers,
    onError,
    metrics,
    { [SEND_JOB]: SEND_LANES },
    options.onRun,
    options.dueByClock ? clock : undefined,
  );
  await worker.start();
  return worker;
}

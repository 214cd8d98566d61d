import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../core/clock.ts';
import { createLogger, logDestination } from '../core/log.ts';
import { flushCompileCache } from '../core/compile-cache.ts';
import { settleWhenIdle } from '../core/heap.ts';
import { createThreadServices } from '../services.ts';
import { createPool } from '../store/pool.ts';
import type { ThreadData } from './thread.ts';
import { startWorker } from './worker.ts';

/** The worker thread of src/worker/thread.ts: its own pool and services, and the worker role. */
const { config, databaseUrl, secrets } = workerData as ThreadData;
// Each import lane and the job queue's listener hold a connection; send lanes hold one only
// between their waits on the mail server, and the writer of sent messages one more.
const pool = createPool(databaseUrl, 10);
const services = await createThreadServices(config, pool, systemClock, secrets);
services.metrics.watchPool(pool, 'worker');
const logger = createLogger(config.logLevel, logDestination(config.logFormat));
const worker = await startWorker(services, (err) => logger.error({ err }, 'job error'), {
  settleAfterImports: true,
  // A line for each run's start, end and failure: kind, account, job, attempt, rows, seconds, outcome.
  onRun: (run) =>
    run.outcome === 'failed for good'
      ? logger.error(run, 'job failed for good')
      : run.outcome === 'failed'
        ? logger.warn(run, 'job failed; tried again later')
        : logger.info(run, `job ${run.outcome}`),
  // The account is told on the endpoint (its state, in the API); the operator here: ids and a count only.
  onWebhookPaused: (notice) => logger.warn(notice, 'webhook endpoint paused after failed deliveries'),
});
parentPort!.on('message', async (message) => {
  // The process's /metrics asks for this thread's counters (src/worker/thread.ts).
  if (typeof message?.metrics === 'number')
    return parentPort!.postMessage({
      metrics: message.metrics,
      json: await services.metrics.registry.getMetricsAsJSON(),
    });
  if (message !== 'stop') return;
  stopSettling();
  await worker.stop();
  await services.close();
  await pool.end();
  parentPort!.close();
});
// The start-up's garbage goes at the first quiet moment (src/core/heap.ts), and a busy spell's after it.
const stopSettling = settleWhenIdle();
parentPort!.postMessage('ready');
flushCompileCache();

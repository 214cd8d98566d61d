import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../core/clock.ts';
import { settleHeap } from '../core/heap.ts';
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
const worker = await startWorker(
  services,
  (err) => console.error(JSON.stringify({ level: 50, msg: 'job failed', err: String((err as Error)?.stack ?? err) })),
  { settleAfterImports: true },
);
parentPort!.on('message', async (message) => {
  // The process's /metrics asks for this thread's counters (src/worker/thread.ts).
  if (typeof message?.metrics === 'number')
    return parentPort!.postMessage({
      metrics: message.metrics,
      json: await services.metrics.registry.getMetricsAsJSON(),
    });
  if (message !== 'stop') return;
  await worker.stop();
  await services.close();
  await pool.end();
  parentPort!.close();
});
// The start-up's garbage goes before the first job (src/core/heap.ts).
settleHeap();
parentPort!.postMessage('ready');

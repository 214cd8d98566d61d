import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../core/clock.ts';
import { createServices } from '../services.ts';
import { createPool } from '../store/pool.ts';
import type { ThreadData } from './thread.ts';
import { startWorker } from './worker.ts';

/** The worker thread of src/jobs/thread.ts: its own pool and services, and the worker role. */
const { config, databaseUrl, secrets } = workerData as ThreadData;
// Each import lane and the job queue's listener hold a connection.
const pool = createPool(databaseUrl, 6);
const services = await createServices(config, pool, systemClock, secrets);
const worker = await startWorker(services, (err) => console.error(JSON.stringify({ level: 50, msg: 'job failed', err: String((err as Error)?.stack ?? err) })));
parentPort!.on('message', async (message) => {
  if (message !== 'stop') return;
  await worker.stop();
  await services.close();
  await pool.end();
  parentPort!.close();
});
parentPort!.postMessage('ready');

import { runImport } from '../imports/ingest.ts';
import { IMPORT_JOB } from '../imports/imports.ts';
import { accountScope, type ThreadServices } from '../services.ts';
import { Worker } from './queue.ts';

/** Starts the worker role: the handlers of every job kind. */
export async function startWorker(services: ThreadServices, onError: (err: unknown) => void): Promise<Worker> {
  const { pool, files, metrics } = services;
  const worker = new Worker(pool, {
    [IMPORT_JOB]: (job, lease) => runImport({ pool, files, scopeOf: (id) => accountScope(services, id), committed: (rows) => metrics.importRows.inc(rows) }, job, lease),
  }, onError, metrics);
  await worker.start();
  return worker;
}

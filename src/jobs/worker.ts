import { runImport } from '../imports/ingest.ts';
import { IMPORT_JOB } from '../imports/imports.ts';
import { accountScope, type Services } from '../services.ts';
import { Worker } from './queue.ts';

/** Starts the worker role: the handlers of every job kind. */
export async function startWorker(services: Services, onError: (err: unknown) => void): Promise<Worker> {
  const worker = new Worker(services.pool, {
    [IMPORT_JOB]: (job, lease) => runImport({ pool: services.pool, files: services.files, scopeOf: (id) => accountScope(services, id) }, job, lease),
  }, onError);
  await worker.start();
  return worker;
}

import { runImport } from '../imports/ingest.ts';
import { IMPORT_JOB } from '../imports/imports.ts';
import type { ProfileScope } from '../profiles/profiles.ts';
import type { Services } from '../services.ts';
import { Worker } from './queue.ts';

/** The profile scope of an account for work done outside a request. */
export async function accountScope(services: Services, accountId: string): Promise<ProfileScope> {
  const account = await services.accounts.get(accountId);
  if (!account) throw new Error(`account ${accountId} no longer exists`);
  return { accountId, defs: await services.definitions.get(accountId), limits: account.limits, secret: services.serverSecret, now: new Date(services.clock()) };
}

/** Starts the worker role: the handlers of every job kind. */
export async function startWorker(services: Services, onError: (err: unknown) => void): Promise<Worker> {
  const worker = new Worker(services.pool, {
    [IMPORT_JOB]: (job, lease) => runImport({ pool: services.pool, files: services.files, scopeOf: (id) => accountScope(services, id) }, job, lease),
  }, onError);
  await worker.start();
  return worker;
}

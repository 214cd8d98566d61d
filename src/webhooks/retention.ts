import type pg from 'pg';
import type { AccountScope } from '../core/scope.ts';
import { enqueueUnlessWaiting, type Job } from '../jobs/queue.ts';
import { WEBHOOK_RETENTION_JOB } from './events.ts';
import * as q from './queries.ts';

/**
 * The retention sweep of an account (docs/webhooks.md "Retention"): an event written more than
 * `webhook_retention_days` ago (by the account's time) none of whose deliveries is pending goes,
 * with its deliveries and their attempts. The delivery job queues a sweep for when the first
 * delivery it ended falls out of retention; a sweep queues the next one for the oldest event left.
 */

/** Events removed by one statement: a sweep of a large backlog takes several short ones. */
const SWEEP_BATCH = 1000;
const DAY_MS = 86_400_000;

export interface RetentionDeps {
  pool: pg.Pool;
  scopeOf: (accountId: string) => Promise<AccountScope>;
}

/** Queues the account's sweep for when deliveries ended at the scope's time fall out of retention, unless one comes by then. */
export async function queueRetention(db: pg.Pool, scope: AccountScope): Promise<void> {
  const days = scope.limits.webhook_retention_days;
  if (days === null) return;
  await enqueueUnlessWaiting(
    db,
    scope.accountId,
    WEBHOOK_RETENTION_JOB,
    {},
    new Date(scope.now.getTime() + days * DAY_MS),
  );
}

export async function runWebhookRetention(deps: RetentionDeps, job: Job<typeof WEBHOOK_RETENTION_JOB>): Promise<void> {
  const scope = await deps.scopeOf(job.accountId);
  const days = scope.limits.webhook_retention_days;
  if (days === null) return;
  const before = new Date(scope.now.getTime() - days * DAY_MS);
  while ((await q.sweepEvents(deps.pool, job.accountId, before, SWEEP_BATCH)) === SWEEP_BATCH);
  const oldest = await q.oldestSettledEvent(deps.pool, job.accountId);
  if (oldest)
    await enqueueUnlessWaiting(
      deps.pool,
      job.accountId,
      WEBHOOK_RETENTION_JOB,
      {},
      new Date(oldest.getTime() + days * DAY_MS),
    );
}

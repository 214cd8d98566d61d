import type pg from 'pg';
import type { AccountScope } from '../core/scope.ts';
import { enqueueUnlessWaiting, type Job } from '../jobs/queue.ts';
import { OutboundError, type Outbound } from '../outbound/outbound.ts';
import { WEBHOOK_DELIVERY_JOB } from './events.ts';
import * as q from './queries.ts';
import { queueRetention } from './retention.ts';
import { SecretBox, sign } from './signing.ts';

/**
 * The delivery job of an account (docs/webhooks.md "Delivery"): it leases the deliveries due now,
 * each the oldest pending one of its profile on its endpoint, POSTs them at once through the
 * address filter of src/outbound/, records every attempt, and goes on while some are due; then it
 * queues its next run for the next retry, and the retention sweep of the deliveries it ended. A delivery leased by a worker that dies is sent again
 * once its lease ends (at-least-once, with the same webhook-id).
 */

/** Deliveries sent at once by one run. */
const BATCH = 64;
/** An attempt that has not been answered in this time failed. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** How long a run holds the deliveries it sends: beyond an attempt's timeout and recording it. */
const LEASE_SECONDS = 20;
/** The waits after each failed attempt; the last repeats until the delivery's day of retries ends. */
export const RETRY_DELAYS_SECONDS = [1, 5, 30, 120, 600, 1800, 3600, 7200, 14_400, 28_800];

export interface WebhookDeps {
  pool: pg.Pool;
  outbound: Outbound;
  scopeOf: (accountId: string) => Promise<AccountScope>;
  /** Hears of an endpoint paused by failures (a log line: ids and counts, no personal data). */
  paused?: (notice: { account: string; endpoint: string; consecutive_failures: number }) => void;
  /** Hears of each attempt, for /metrics (outcome) and the bench. */
  attempted?: (outcome: 'delivered' | 'failed') => void;
}

export async function runWebhookDeliveries(deps: WebhookDeps, job: Job<typeof WEBHOOK_DELIVERY_JOB>): Promise<void> {
  const { accountId } = job;
  const scope = await deps.scopeOf(accountId);
  const box = new SecretBox(scope.secret);
  let ended = false;
  for (;;) {
    const due = await q.leaseDue(deps.pool, accountId, BATCH, LEASE_SECONDS);
    if (due.length === 0) break;
    const results = await Promise.all(due.map((d) => attempt(deps, box, d)));
    await q.recordAttempts(deps.pool, accountId, results);
    ended ||= results.some((r) => r.state !== 'pending');
    const byEndpoint = new Map<string, { endpoint_id: string; failures: number; succeeded: boolean }>();
    for (const r of results) {
      const e = byEndpoint.get(r.endpoint_id) ?? { endpoint_id: r.endpoint_id, failures: 0, succeeded: false };
      if (r.state === 'delivered') e.succeeded = true;
      else e.failures++;
      byEndpoint.set(r.endpoint_id, e);
      deps.attempted?.(r.state === 'delivered' ? 'delivered' : 'failed');
    }
    const paused = await q.countFailures(
      deps.pool,
      accountId,
      [...byEndpoint.values()],
      scope.limits.webhook_failures_before_pause,
      new Date(),
    );
    for (const p of paused)
      deps.paused?.({ account: accountId, endpoint: p.endpoint_id, consecutive_failures: p.consecutive_failures });
  }
  if (ended) await queueRetention(deps.pool, scope);
  const next = await q.nextDue(deps.pool, accountId);
  if (next) await enqueueUnlessWaiting(deps.pool, accountId, WEBHOOK_DELIVERY_JOB, {}, next);
}

/** One attempt of a delivery, signed with the endpoint's secret (and the one it replaced, during their overlap). */
async function attempt(deps: WebhookDeps, box: SecretBox, d: q.LeasedDelivery): Promise<q.AttemptResult> {
  const body = JSON.stringify({ type: d.type, timestamp: d.created_at.toISOString(), data: d.data });
  const attemptedAt = new Date();
  const timestamp = Math.floor(attemptedAt.getTime() / 1000);
  const secrets = [d.secret, ...(d.previous_secret ? [d.previous_secret] : [])].map((s) => box.open(s));
  const headers = {
    'webhook-id': d.event_id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => sign(s, d.event_id, timestamp, body)).join(' '),
  };
  const started = performance.now();
  let status: number | null = null;
  let error: string | null = null;
  try {
    status = await deps.outbound.post(d.url, body, { timeoutMs: ATTEMPT_TIMEOUT_MS, headers, kind: 'webhook' });
    if (status < 200 || status > 299)
      error = `the endpoint answered ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`;
  } catch (err) {
    error = err instanceof OutboundError ? err.message : `the call failed: ${(err as Error).message}`;
  }
  const latency = Math.round(performance.now() - started);
  const base = {
    endpoint_id: d.endpoint_id,
    event_seq: d.event_seq,
    attempt: d.attempts + 1,
    attempted_at: attemptedAt,
    status,
    latency_ms: latency,
    error,
    leased_until: d.leased_until,
  };
  if (error === null) return { ...base, state: 'delivered', retries: d.retries, next_attempt_at: null };
  const wait = RETRY_DELAYS_SECONDS[Math.min(d.retries, RETRY_DELAYS_SECONDS.length - 1)];
  const next = new Date(Date.now() + wait * 1000);
  if (next > d.retry_until) return { ...base, state: 'failed', retries: d.retries + 1, next_attempt_at: null };
  return { ...base, state: 'pending', retries: d.retries + 1, next_attempt_at: next };
}

import client, { type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type pg from 'pg';
import { VERSION } from './version.ts';

/** The metrics of a registry, as `getMetricsAsJSON()` gives them and `AggregatorRegistry.aggregate()` merges them. */
export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The metrics a process (or its worker thread) counts where the work happens: each thread has its
 * own, and `/metrics` merges the worker thread's into its process's (src/worker/thread.ts). Figures
 * that are rows (the job queue) are read from the database at scrape time instead (src/http/routes/operations.ts).
 */
export class Metrics {
  readonly registry = new client.Registry();
  readonly rateLimitRefusals = new client.Counter({
    name: 'audience_rate_limit_refusals_total',
    help: 'Requests refused with 429, by the limit they met',
    labelNames: ['limit'],
    registers: [this.registry],
  });
  readonly jobDuration = new client.Histogram({
    name: 'audience_job_duration_seconds',
    help: 'Runs of jobs by kind and outcome (completed, failed): a failed run is retried until its last attempt',
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900],
  });
  readonly importRows = new client.Counter({
    name: 'audience_import_rows_total',
    help: 'Data rows of import files committed (written or refused with a reason); rate() gives rows per second',
    registers: [this.registry],
  });
  readonly mail = new client.Counter({
    name: 'audience_mail_total',
    help: 'Transactional messages by outcome: sent (the mail server took it), failed, bounced (the recipient was refused), suppressed (not sent)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly activityEvents = new client.Counter({
    name: 'audience_activity_events_total',
    help: 'Activity events received by the ingestion route, by outcome: recorded, duplicate (recorded before), skipped (a locked profile)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly authenticationFailures = new client.Counter({
    name: 'audience_authentication_failures_total',
    help: 'Requests refused with 401, by the credential they lacked: bearer (an API token), client (the token route), operator, metrics',
    labelNames: ['credential'],
    registers: [this.registry],
  });
  readonly exportRows = new client.Counter({
    name: 'audience_export_rows_total',
    help: 'Data rows written to the CSV files of exports, by export kind; rate() gives rows per second',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly webhookAttempts = new client.Counter({
    name: 'audience_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome: delivered (a 2xx answer), failed (tried again later, or given up)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly pools = new Map<string, pg.Pool>();

  constructor() {
    // Every series from the start, at 0, so that rate() and alerts see the first one counted.
    for (const outcome of ['sent', 'failed', 'bounced', 'suppressed']) this.mail.inc({ outcome }, 0);
    for (const outcome of ['recorded', 'duplicate', 'skipped']) this.activityEvents.inc({ outcome }, 0);
    for (const outcome of ['delivered', 'failed']) this.webhookAttempts.inc({ outcome }, 0);
    for (const credential of ['bearer', 'client', 'operator', 'metrics'])
      this.authenticationFailures.inc({ credential }, 0);
    const pools = this.pools;
    new client.Gauge({
      name: 'audience_build_info',
      help: 'The version of the program this process runs, as its label; always 1',
      labelNames: ['version'],
      registers: [this.registry],
      // Each thread reports it; /metrics merges them into one series, not their sum.
      aggregator: 'max',
    }).set({ version: VERSION }, 1);
    new client.Gauge({
      name: 'audience_db_pool_connections',
      help: 'Database connections of each pool of this process: total, idle, and callers waiting for one',
      labelNames: ['pool', 'state'],
      registers: [this.registry],
      collect() {
        for (const [name, pool] of pools) {
          this.set({ pool: name, state: 'total' }, pool.totalCount);
          this.set({ pool: name, state: 'idle' }, pool.idleCount);
          this.set({ pool: name, state: 'waiting' }, pool.waitingCount);
        }
      },
    });
  }

  /** Reports the use of `pool` under the name of the thread it serves (main, worker). */
  watchPool(pool: pg.Pool, name: string): void {
    this.pools.set(name, pool);
  }
}

import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';
import type { Clock } from '../core/clock.ts';
import type { Metrics } from '../core/metrics.ts';
import { Problem } from '../core/problems.ts';
import type { Queryable } from '../store/pool.ts';

/**
 * The payload of each job kind. The area that owns a kind declares it beside its constant, so that
 * enqueueing it and handling it are checked against one type (the queue imports no area):
 *
 *     export const IMPORT_JOB = 'import';
 *     declare module '../jobs/queue.ts' {
 *       interface JobPayloads { [IMPORT_JOB]: { import_id: string } }
 *     }
 */
export interface JobPayloads {}
export type JobKind = keyof JobPayloads;
/** The payload of a kind: the declared one; any JSON object for a kind no area declares (a test's own). */
export type PayloadOf<K extends string> = K extends JobKind ? JobPayloads[K] : Record<string, unknown>;

/** A job as its handler sees it. */
export interface Job<K extends string = JobKind> {
  accountId: string;
  jobId: string;
  kind: K;
  payload: PayloadOf<K>;
  attempts: number;
  /** The rows the run wrote (an import's committed rows, an export file's), as its handler counts them, for the run's log line. */
  rows?: number;
}

/** A run of a job as the worker reports it (a log line each): its start, its end, or its failure. */
export interface JobRun {
  kind: string;
  account: string;
  job: string;
  attempt: number;
  /** failed: tried again later; failed for good: after its last attempt, kept as failed. */
  outcome: 'started' | 'completed' | 'failed' | 'failed for good';
  rows?: number;
  seconds?: number;
}

/**
 * Runs a job. It answers 'completed' when it has deleted the job itself (completeJob, in the
 * transaction of its last writes, which then need no commit of their own); else the worker
 * deletes the job when it resolves. The worker renews the job's lease while it runs.
 */
export type JobHandler<K extends string = JobKind> = (job: Job<K>) => Promise<void | 'completed'>;
/** A handler for every declared kind, each seeing its kind's payload (the worker role's table). */
export type JobHandlers = { [K in JobKind]: JobHandler<K> };

const CHANNEL = 'audience_jobs';
/** How long a job stays leased without renewal; a dead worker's job is taken up after this. */
export const LEASE_SECONDS = 15;
/** Runs of a job before it is given up; a handler that must record its failure checks `attempts` against this. */
export const MAX_ATTEMPTS = 5;

/** Where a job is: waiting its turn (a retry too), leased by a worker, or failed for good. */
export const JOB_STATES = ['waiting', 'running', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];
const STATE_OF = `case when failed_at is not null then 'failed' when locked_until > now() then 'running' else 'waiting' end`;

/**
 * Enqueues a job in the caller's transaction, so it exists exactly when the record it serves does;
 * `runAt` delays it (the database's clock decides when it is due).
 */
export async function enqueue<K extends string>(
  tx: Queryable,
  accountId: string,
  kind: K,
  payload: PayloadOf<K>,
  runAt?: Date,
): Promise<void> {
  await enqueueWith(tx, kind, [{ accountId, payload }], { text: 'select', values: [] }, runAt);
}

/**
 * Enqueues jobs of `kind` in one statement with a write of the caller (`write`: a statement with
 * its values, $1 and on, that answers rows, an insert ending in `returning`; they are answered): the record and the
 * jobs that serve it then commit together in one round trip, autocommitted or in the caller's
 * transaction, without the caller writing the queue's table (transactional sends,
 * docs/benchmarks.md "Transactional mail").
 */
export async function enqueueWith<R extends pg.QueryResultRow, K extends string = string>(
  db: Queryable,
  kind: K,
  jobs: { accountId: string; payload: PayloadOf<K> }[],
  write: { text: string; values: unknown[] },
  runAt?: Date,
): Promise<R[]> {
  const n = write.values.length;
  const values = [
    ...write.values,
    JSON.stringify(jobs.map((j) => ({ account_id: j.accountId, payload: j.payload }))),
    kind,
    runAt ?? null,
  ];
  const insert = `insert into jobs (account_id, kind, payload, run_at)
    select j.account_id, $${n + 2}::text, j.payload, coalesce($${n + 3}::timestamptz, now()) from json_to_recordset($${n + 1}::json) as j(account_id bigint, payload jsonb) returning kind`;
  // A transaction that notifies holds a lock of the whole database from its commit's start to its
  // end, WAL flush included: with a notification each, concurrent enqueues (transactional sends)
  // committed one at a time. So a process notifies a kind once per NOTIFY_EVERY_MS; the workers
  // that notification wakes keep taking jobs while they find some, and look again soon after.
  const now = performance.now();
  if (jobs.length === 0 || now - (notified.get(kind) ?? -Infinity) < NOTIFY_EVERY_MS) {
    return (await db.query<R>(`with written as (${write.text}), job as (${insert}) select * from written`, values))
      .rows;
  }
  notified.set(kind, now);
  // The notification is a select: it runs because the answer joins it. As text: Citus keeps a
  // CTE's rows to read them, and a column of type void cannot be kept.
  const { rows } = await db.query<R>(
    `with written as (${write.text}), job as (${insert}), woken as (select pg_notify($${n + 4}, kind)::text from job limit 1)
     select written.* from written cross join (select count(*) from woken) w`,
    [...values, CHANNEL],
  );
  return rows;
}

/**
 * Enqueues a job of `kind` for the account, due at `runAt` (now by default), unless one of that
 * kind is waiting already and due by then: a job that serves all of an account's pending work
 * (webhook deliveries) needs one waiting run, not one per write. A running job does not count, so
 * a write it may have missed gets a run of its own. Two transactions that race may both enqueue:
 * the second run then finds nothing to do.
 */
export async function enqueueUnlessWaiting<K extends string>(
  db: Queryable,
  accountId: string,
  kind: K,
  payload: PayloadOf<K>,
  runAt?: Date,
): Promise<void> {
  const insert = `insert into jobs (account_id, kind, payload, run_at)
    select $1::bigint, $2::text, $3::jsonb, coalesce($4::timestamptz, now())
    where not exists (select 1 from jobs where account_id = $1::bigint and kind = $2::text and failed_at is null
      and (locked_until is null or locked_until < now()) and run_at <= coalesce($4::timestamptz, now()))
    returning kind`;
  const values = [accountId, kind, JSON.stringify(payload), runAt ?? null];
  const now = performance.now();
  if (runAt !== undefined || now - (notified.get(kind) ?? -Infinity) < NOTIFY_EVERY_MS) {
    await db.query(insert, values);
    return;
  }
  const { rows } = await db.query<{ kind: string }>(`with job as (${insert}) select kind from job`, values);
  if (rows.length === 0) return;
  notified.set(kind, now);
  await db.query('select pg_notify($1, $2)', [CHANNEL, kind]);
}

/** At most one notification per kind and process this often; a worker woken looks again after twice this while jobs keep coming. */
const NOTIFY_EVERY_MS = 100;
const notified = new Map<string, number>();
/** How long a worker that found nothing waits for a notification before it looks again: shortly after a wake, else a second. */
const RECHECK_MS = { afterWake: 2 * NOTIFY_EVERY_MS, idle: 1000 };

/** Deletes finished jobs in the caller's transaction (their handlers then answer 'completed'). */
export async function completeJobs(tx: Queryable, jobs: Pick<Job<string>, 'accountId' | 'jobId'>[]): Promise<void> {
  if (jobs.length === 0) return;
  await tx.query(
    'delete from jobs j using json_to_recordset($1::json) as d(account_id bigint, job_id bigint) where j.account_id = d.account_id and j.job_id = d.job_id',
    [JSON.stringify(jobs.map((j) => ({ account_id: j.accountId, job_id: j.jobId })))],
  );
}

/** Erases every job of a deleted account, failed ones included (a running one finds its rows gone). */
export async function forgetAccountJobs(tx: Queryable, accountId: string): Promise<void> {
  await tx.query('delete from jobs where account_id = $1::bigint', [accountId]);
}

/** Loops of their own for a job kind: how many, and how many jobs each claims together and runs at once. */
export interface Lanes {
  loops: number;
  jobs: number;
}

interface JobRow {
  account_id: string;
  job_id: string;
  kind: string;
  payload: Record<string, unknown>;
  attempts: number;
}

/** A job as the operator sees it. */
export interface JobRecord {
  account_id: string;
  job_id: string;
  kind: string;
  state: JobState;
  payload: Record<string, unknown>;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  run_at: Date;
  failed_at: Date | null;
}

/** Jobs in `state` (every state when absent), of one account (every account when absent), oldest first. */
export async function listJobs(
  db: Queryable,
  filter: { state?: JobState; kind?: string; accountId?: string; limit: number },
): Promise<JobRecord[]> {
  const { rows } = await db.query<JobRecord>(
    `select account_id::text, job_id::text, kind, state, payload, attempts, last_error, created_at, run_at, failed_at
     from (select *, ${STATE_OF} as state from jobs where ($4::bigint is null or account_id = $4::bigint)) j
     where ($1::text is null or state = $1) and ($2::text is null or kind = $2)
     order by created_at, job_id limit $3`,
    [filter.state ?? null, filter.kind ?? null, filter.limit, filter.accountId ?? null],
  );
  return rows;
}

/**
 * Gives a failed job of the account a new run now, with its attempts counted from none again (its
 * last error stays until that run ends). 404 (AUD-1015) for no such job, 409 (AUD-1016) for a job
 * that has not failed: it is waiting or running already.
 */
export async function retryJob(db: Queryable, accountId: string, jobId: string): Promise<JobRecord> {
  const { rows } = await db.query<JobRecord>(
    `update jobs set failed_at = null, attempts = 0, run_at = now(), locked_until = null
     where account_id = $1::bigint and job_id = $2::bigint and failed_at is not null
     returning account_id::text, job_id::text, kind, 'waiting' as state, payload, attempts, last_error, created_at, run_at, failed_at`,
    [accountId, jobId],
  );
  if (rows[0]) return rows[0];
  const found = await db.query('select 1 from jobs where account_id = $1::bigint and job_id = $2::bigint', [
    accountId,
    jobId,
  ]);
  if (found.rowCount === 0) throw new Problem('AUD-1015', `Account ${accountId} has no job ${jobId}`);
  throw new Problem('AUD-1016', `Job ${jobId} has not failed: it is waiting for its turn or running`);
}

/**
 * The queue by kind and state: how many jobs, and how long the one due longest ago has waited since
 * it was due (seconds; 0 when none is due). A job due later (an export's sweeper, a day after its
 * file; a retry's back-off) waits for its time, not for a worker, so it adds nothing to that wait.
 */
export async function jobFigures(
  db: Queryable,
): Promise<{ kind: string; state: JobState; count: number; overdue_seconds: number }[]> {
  const { rows } = await db.query(
    `select kind, ${STATE_OF} as state, count(*)::int as count,
       coalesce(extract(epoch from now() - min(run_at) filter (where run_at <= now())), 0)::float8 as overdue_seconds
     from jobs group by 1, 2 order by 1, 2`,
  );
  return rows;
}

/**
 * Runs jobs from the `jobs` table. Any number of workers in any number of processes share the
 * table: each takes a job with FOR UPDATE SKIP LOCKED and a lease it renews while the job runs.
 * (A library queue was the design's choice; both candidates keep a crashed worker's job locked for
 * minutes to hours, where an import must resume within seconds of a restart.)
 */
/**
 * The job a handler runs, for code below it that is told nothing of jobs: the emulator's record
 * of outbound calls names the account (the namespace) a call was made for.
 */
export const runningJob = new AsyncLocalStorage<Job<string>>();

export class Worker {
  private readonly pool: pg.Pool;
  private readonly handlers: Record<string, JobHandler<never>>;
  private running = false;
  private readonly waiting = new Set<() => void>();
  private loops: Promise<void>[] = [];
  private listener: pg.PoolClient | undefined;
  private readonly onError: (err: unknown, job?: Job<string>) => void;
  private readonly onRun: (run: JobRun) => void;
  private readonly metrics: Metrics;
  private readonly lanes: Record<string, Lanes>;
  /** When the last notification came (performance.now()). */
  private lastWake = -Infinity;
  /** Jobs due by this clock's time (the emulator's, moved ahead) or the database's, whichever is later, are taken; unset: the database's time. */
  private readonly dueBy: Clock | undefined;
  /** False: the loops take no job; jobs run only when asked (`runDue`, `runById`): the emulator's manual mode. */
  private automatic = true;

  /**
   * `handlers`: the worker role's `JobHandlers` (or a test's own kinds). `lanes`: job kinds that
   * get loops of their own besides the one that takes every kind, each claiming up to `jobs` jobs
   * at a time and running them at once (a send job waits on a mail server most of its time).
   * `onRun` hears of each run's start, end and failure. `dueBy`: the clock that says which jobs
   * are due (the emulator's); by default the database's.
   */
  constructor(
    pool: pg.Pool,
    handlers: Record<string, JobHandler<never>>,
    onError: (err: unknown, job?: Job<string>) => void,
    metrics: Metrics,
    lanes: Record<string, Lanes> = {},
    onRun: (run: JobRun) => void = () => {},
    dueBy?: Clock,
  ) {
    this.dueBy = dueBy;
    this.pool = pool;
    this.handlers = handlers;
    this.onError = onError;
    this.onRun = onRun;
    this.metrics = metrics;
    this.lanes = lanes;
  }

  async start(): Promise<void> {
    this.running = true;
    this.listener = await this.pool.connect();
    this.listener.on('notification', () => {
      this.lastWake = performance.now();
      this.wakeAll();
    });
    this.listener.on('error', () => {});
    await this.listener.query(`listen ${CHANNEL}`);
    this.loops = [
      this.run(Object.keys(this.handlers), 1),
      ...Object.entries(this.lanes).flatMap(([kind, l]) =>
        Array.from({ length: l.loops }, () => this.run([kind], l.jobs)),
      ),
    ];
  }

  /** Whether the worker's loops take jobs by themselves; false leaves every job waiting until `runDue` or `runById`. */
  get takesJobs(): boolean {
    return this.automatic;
  }

  /** Lets the loops take jobs again, or stops them taking any (jobs already taken run to their end). */
  setTakesJobs(on: boolean): void {
    this.automatic = on;
    if (on) this.wakeAll();
  }

  private wakeAll(): void {
    for (const wake of this.waiting) wake();
  }

  /** Stops taking jobs and waits for the running ones. */
  async stop(): Promise<void> {
    this.running = false;
    this.wakeAll();
    await Promise.all(this.loops);
    if (this.listener) {
      await this.listener.query(`unlisten ${CHANNEL}`).catch(() => {});
      this.listener.release();
    }
  }

  private async run(kinds: string[], max: number): Promise<void> {
    while (this.running) {
      let worked = false;
      try {
        if (this.automatic) worked = await this.runOne(kinds, max);
      } catch (err) {
        this.onError(err);
      }
      if (!worked && this.running) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            this.waiting.delete(wake);
            resolve();
          };
          const timer = setTimeout(
            wake,
            performance.now() - this.lastWake < RECHECK_MS.idle ? RECHECK_MS.afterWake : RECHECK_MS.idle,
          );
          this.waiting.add(wake);
        });
      }
    }
  }

  /**
   * Takes and runs ready jobs of `kinds` (every kind it handles by default), up to `max` of them
   * claimed in one statement and run at once; false when there was none.
   */
  async runOne(kinds: string[] = Object.keys(this.handlers), max = 1): Promise<boolean> {
    // The oldest ready jobs, leased; claim_jobs (migrations 0018, 0022) commits without waiting for the WAL flush.
    const { rows } = await this.pool.query<JobRow>(
      'select account_id::text, job_id::text, kind, payload, attempts from claim_jobs($1::text[], $2, $3, $4)',
      [kinds, LEASE_SECONDS, max, this.dueBy ? new Date(this.dueBy()) : null],
    );
    // Every one to its end before the loop claims again, so that a loop never has more than `max` under way.
    const failed = (await Promise.allSettled(rows.map((row) => this.runJob(row)))).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return rows.length > 0;
  }

  /**
   * Runs every job due now (by `dueBy`) until none is left, those that jobs enqueue meanwhile and
   * those the worker's own loops had taken included; answers how many this call ran. A job whose
   * retry comes later than now waits for its time. Gives up waiting after `withinMs`.
   */
  async runDue(withinMs = 30_000): Promise<number> {
    const until = performance.now() + withinMs;
    let ran = 0;
    while (performance.now() < until) {
      if (await this.runOne()) {
        ran++;
        continue;
      }
      // A job taken by one of the worker's loops is still due until it ends.
      const { rows } = await this.pool.query<{ running: boolean }>(
        'select exists (select 1 from jobs where failed_at is null and run_at <= greatest($1::timestamptz, now()) and locked_until >= now()) as running',
        [this.dueBy ? new Date(this.dueBy()) : null],
      );
      if (!rows[0].running) return ran;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`jobs still running after ${withinMs} ms`);
  }

  /**
   * Runs one job now, due or not (an export's sweep a day ahead too): false when there is no such
   * waiting job (none of that id, one running or one failed for good).
   */
  async runById(accountId: string, jobId: string): Promise<boolean> {
    const { rows } = await this.pool.query<JobRow>(
      `update jobs j set locked_until = now() + make_interval(secs => $3), attempts = j.attempts + 1
       where account_id = $1::bigint and job_id = $2::bigint and failed_at is null
         and (locked_until is null or locked_until < now())
       returning account_id::text, job_id::text, kind, payload, attempts`,
      [accountId, jobId, LEASE_SECONDS],
    );
    if (!rows[0]) return false;
    await this.runJob(rows[0]);
    return true;
  }

  private async runJob(row: JobRow): Promise<void> {
    const job: Job<string> = {
      accountId: row.account_id,
      jobId: row.job_id,
      kind: row.kind,
      payload: row.payload,
      attempts: row.attempts,
    };
    const renew = async () => {
      await this.pool.query(
        'update jobs set locked_until = now() + make_interval(secs => $3) where account_id = $1::bigint and job_id = $2::bigint',
        [job.accountId, job.jobId, LEASE_SECONDS],
      );
    };
    const heartbeat = setInterval(() => renew().catch(() => {}), (LEASE_SECONDS * 1000) / 3);
    const timer = this.metrics.jobDuration.startTimer({ kind: job.kind });
    const run = { kind: job.kind, account: job.accountId, job: job.jobId, attempt: job.attempts };
    const report = (outcome: JobRun['outcome'], seconds: number) =>
      this.onRun({ ...run, outcome, ...(job.rows === undefined ? {} : { rows: job.rows }), seconds });
    this.onRun({ ...run, outcome: 'started' });
    let outcome: void | 'completed';
    try {
      // The row's payload is the one enqueue took for this kind, so it has the kind's type.
      outcome = await runningJob.run(job, () => this.handlers[job.kind](job as Job<never>));
    } catch (err) {
      // After its last attempt a job is kept, failed, for the operator; before it, it is tried
      // again later, each wait twice the one before.
      const last = job.attempts >= MAX_ATTEMPTS;
      report(last ? 'failed for good' : 'failed', timer({ outcome: 'failed' }));
      this.onError(err, job);
      await this.pool.query(
        `update jobs set locked_until = null, last_error = $3,
           failed_at = case when $4 then now() end, run_at = case when $4 then run_at else now() + make_interval(secs => $5) end
         where account_id = $1::bigint and job_id = $2::bigint`,
        [job.accountId, job.jobId, String((err as Error)?.message ?? err), last, 2 ** job.attempts],
      );
      return;
    } finally {
      clearInterval(heartbeat);
    }
    report('completed', timer({ outcome: 'completed' }));
    if (outcome !== 'completed')
      await this.pool.query('delete from jobs where account_id = $1::bigint and job_id = $2::bigint', [
        job.accountId,
        job.jobId,
      ]);
  }
}

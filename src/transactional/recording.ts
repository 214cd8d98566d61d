import type { ActivityEventInput } from '../activities/schemas.ts';
import { recordActivityEvents } from '../activities/events.ts';
import type { AccountScope } from '../core/scope.ts';
import { completeJobs } from '../jobs/queue.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';
import * as q from './queries.ts';
import type { SendJobRun } from './sends.ts';
import type { TrackedLink } from './tracking.ts';

/**
 * What the sends record (docs/mail.md "Lifecycle and statuses"): their events on their activity, the
 * transaction id as correlation id, and the messages the mail server took, marked sent in batches.
 */

/** What recording needs of the send job's dependencies. */
export interface RecordDeps {
  pool: pg.Pool;
  vendor: string;
}

/** What the events of a send name. */
export type SendRef = Pick<q.SendRow, 'account_id' | 'transaction_id' | 'activity_id' | 'keyspace_id' | 'profile_key'>;

/** Records events of sends of one account through the activities area: the transaction id is their correlation id. */
export async function recordEvents(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  events: ({ send: SendRef } & Omit<
    ActivityEventInput,
    'activity_id' | 'keyspace_discriminator' | 'profile_key' | 'correlation_id'
  >)[],
): Promise<void> {
  const inputs: ActivityEventInput[] = [];
  for (const { send, ...event } of events) {
    const keyspace = scope.defs.keyspaces.find((k) => k.keyspace_id === send.keyspace_id);
    // A keyspace removed since the send: the events have no profile to land on.
    if (!keyspace) continue;
    inputs.push({
      ...event,
      activity_id: send.activity_id,
      keyspace_discriminator: keyspace.discriminator,
      profile_key: send.profile_key,
      correlation_id: send.transaction_id,
    });
  }
  if (inputs.length > 0) await recordActivityEvents(tx, scope, vendor, inputs);
}

/** A message the mail server took, to be recorded as sent. */
export interface Sent {
  job: SendJobRun;
  scope: AccountScope;
  send: SendRef;
  links: TrackedLink[];
  messageId: string;
}

/**
 * Records sent messages: their sends marked sent, SENT recorded on their activities and their jobs
 * completed, in one transaction for every message that was taken while the previous one ran
 * (a commit, and the statements of recordActivityEvents, for many sends instead of one each).
 * When a batch fails, each of its messages is recorded alone, so that only the one at fault fails.
 */
class SentRecorder {
  private readonly deps: RecordDeps;
  private waiting: { sent: Sent; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private running = false;

  constructor(deps: RecordDeps) {
    this.deps = deps;
  }

  record(sent: Sent): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ sent, resolve, reject });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, SENT_BATCH);
      try {
        await this.write(batch.map((w) => w.sent));
        for (const w of batch) w.resolve();
      } catch (err) {
        if (batch.length === 1) batch[0].reject(err);
        else for (const w of batch) await this.write([w.sent]).then(w.resolve, w.reject);
      }
    }
    this.running = false;
  }

  private async write(batch: Sent[]): Promise<void> {
    await withTransaction(this.deps.pool, async (tx) => {
      await q.markSendsSent(
        tx,
        batch.map(({ send, links, messageId, scope }) => ({
          accountId: send.account_id,
          transactionId: send.transaction_id,
          links,
          messageId,
          sentAt: scope.now,
        })),
      );
      for (const sends of Map.groupBy(batch, (b) => b.send.account_id).values()) {
        await recordEvents(
          tx,
          sends[0].scope,
          this.deps.vendor,
          sends.map((b) => ({ send: b.send, type: 'SENT' })),
        );
      }
      await completeJobs(
        tx,
        batch.map((b) => b.job),
      );
    });
  }
}

/** Sends recorded in one transaction at most. */
const SENT_BATCH = 200;

const recorders = new WeakMap<RecordDeps, SentRecorder>();

export function sentRecorder(deps: RecordDeps): SentRecorder {
  let recorder = recorders.get(deps);
  if (!recorder) {
    recorder = new SentRecorder(deps);
    recorders.set(deps, recorder);
  }
  return recorder;
}

import crypto from 'node:crypto';
import { enqueueUnlessWaiting } from '../jobs/queue.ts';
import type { Queryable } from '../store/pool.ts';
import * as q from './queries.ts';

/**
 * The events an endpoint can subscribe to. A new kind is one more name here, its data's schema in `EVENT_DATA` (schemas.ts), and a call of
 * `recordWebhookEvents` in the transaction of the change that causes it.
 */
export const WEBHOOK_EVENT_TYPES = [
  'consent.changed',
  'profile.merged',
  'profile.unmerged',
  'profile.deleted',
  'import.finished',
  'export.finished',
  'segment.entered',
  'segment.exited',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The job that delivers an account's pending webhook deliveries (src/webhooks/delivery.ts). */
export const WEBHOOK_DELIVERY_JOB = 'webhook-delivery';
/** The job that removes an account's events older than its retention (src/webhooks/retention.ts). */
export const WEBHOOK_RETENTION_JOB = 'webhook-retention';
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [WEBHOOK_DELIVERY_JOB]: Record<string, never>;
    [WEBHOOK_RETENTION_JOB]: Record<string, never>;
  }
}

/** One event to record: its data, and the key its deliveries keep the order of (a profile's id), if any. */
export interface WebhookEvent {
  orderingKey: string | null;
  data: Record<string, unknown>;
}

/** A new event id: the webhook-id of its deliveries (Standard Webhooks' `msg_…`). */
export function newEventId(): string {
  return `msg_${crypto.randomBytes(18).toString('base64url')}`;
}

/**
 * Writes events of `type` to the outbox, in the caller's transaction (the one of the change that
 * causes them: a killed process loses none), with a delivery for each enabled endpoint of the
 * account subscribed to the type, and a run of the delivery job. An account with no such endpoint
 * pays one indexed read: `build` (which may read more, export keys) is then not called.
 */
export async function recordWebhookEvents(
  tx: Queryable,
  accountId: string,
  type: WebhookEventType,
  build: () => WebhookEvent[] | Promise<WebhookEvent[]>,
): Promise<void> {
  if (!(await q.isSubscribed(tx, accountId, type))) return;
  const events = await build();
  if (events.length === 0) return;
  const deliveries = await q.insertEvents(
    tx,
    accountId,
    type,
    events.map((e) => ({ event_id: newEventId(), ordering_key: e.orderingKey, data: e.data })),
  );
  if (deliveries > 0) await enqueueUnlessWaiting(tx, accountId, WEBHOOK_DELIVERY_JOB, {});
}

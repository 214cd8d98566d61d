import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import type { Queryable } from '../store/pool.ts';
import * as q from './queries.ts';
import { recordEvents } from './recording.ts';
import { readTracking, trackingKey, type TrackingKind, type TrackingTarget } from './tracking.ts';

/**
 * What the tracking links of a sent message record (docs/mail.md "Tracking"): an open, a click;
 * a link this service did not make, or whose message was not sent, is 404.
 */

/** The device class of a user agent, as OPENED and CLICKED events tell it (SPEC §2.16). */
export function deviceOf(userAgent: string | undefined): string {
  if (!userAgent) return 'UNKNOWN';
  if (/smart-?tv|hbbtv|appletv|googletv|crkey|roku/i.test(userAgent)) return 'SMART_TV';
  if (/ipad|tablet|kindle|silk|playbook|android(?!.*mobile)/i.test(userAgent)) return 'TABLET';
  if (/mobi|iphone|ipod|android|blackberry|windows phone/i.test(userAgent)) return 'MOBILE';
  return 'DESKTOP';
}

/** What a tracking link names, read with the server secret; 404 (AUD-2102) for a link this service did not make. */
export function readTrackingLink(serverSecret: string, kind: TrackingKind, token: string): TrackingTarget {
  return readTracking(trackingKey(serverSecret), kind, token);
}

/** The send a tracking link names; 404 when it is gone (its account or activity deleted). */
export async function trackedSend(db: Queryable, scope: AccountScope, target: TrackingTarget): Promise<q.SendRow> {
  const send = await q.findSend(db, scope.accountId, target.transactionId);
  if (!send || send.status === 'queued' || send.status === 'failed' || send.status === 'suppressed')
    throw new Problem('AUD-2102', "This link's message was not sent");
  return send;
}

/** The open pixel was loaded: OPENED, once per send (the activities area keeps events once per correlation id). */
export async function trackOpen(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
  userAgent: string | undefined,
): Promise<void> {
  await recordEvents(tx, scope, vendor, [
    { send: await trackedSend(tx, scope, target), type: 'OPENED', device: deviceOf(userAgent) },
  ]);
}

/** A click link was followed: CLICKED, once per send, and the address of the link the message held there. */
export async function trackClick(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
  userAgent: string | undefined,
): Promise<string> {
  const send = await trackedSend(tx, scope, target);
  const link = send.links[target.link ?? -1];
  if (!link) throw new Problem('AUD-2102', 'This click link names no link of its message');
  await recordEvents(tx, scope, vendor, [
    {
      send,
      type: 'CLICKED',
      device: deviceOf(userAgent),
      link_id: String(target.link),
      link_url: link.url,
      link_title: link.title,
    },
  ]);
  return link.url;
}

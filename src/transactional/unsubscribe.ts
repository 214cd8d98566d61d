import { addSuppression } from '../consents/consents.ts';
import type { AccountScope } from '../core/scope.ts';
import { namespace } from '../definitions/builtins.ts';
import type { Queryable } from '../store/pool.ts';
import { recordEvents } from './recording.ts';
import { trackedSend } from './tracked-events.ts';
import type { TrackingTarget } from './tracking.ts';

/**
 * The unsubscribe link or the one-click unsubscribe (RFC 8058): the address the message went to
 * is suppressed on the email channel, so that nothing more is sent to it, and UNSUBSCRIBED is
 * recorded once.
 */
export async function unsubscribe(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
): Promise<void> {
  const send = await trackedSend(tx, scope, target);
  await addSuppression(tx, scope, {
    channel_discriminator: `${namespace(vendor)}.channels.email`,
    address: send.to_address,
    reason: `Unsubscribed from transactional activity ${send.activity_id}`,
  });
  await recordEvents(tx, scope, vendor, [{ send, type: 'UNSUBSCRIBED' }]);
}

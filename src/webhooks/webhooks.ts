import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections } from '../definitions/definitions.ts';
import { enqueueUnlessWaiting } from '../jobs/queue.ts';
import type { Queryable } from '../store/pool.ts';
import { WEBHOOK_DELIVERY_JOB } from './events.ts';
import * as q from './queries.ts';
import type { Endpoint, EndpointCreate, EndpointPatch, ManifestWebhook } from './schemas.ts';
import { newSecret, SecretBox } from './signing.ts';

/**
 * Webhook endpoints of an account and their deliveries (docs/webhooks.md). A key restricted to
 * sections may not manage them: the events carry profiles of every section.
 */

const access = (scope: AccountScope) => requireAllSections(scope, 'managing webhooks');

/** What an endpoint's URL may be refused with, wherever it is given (the webhook operations, a manifest). */
export const WEBHOOK_URL_PROBLEMS: ProblemCode[] = ['AUD-2302'];

function checkUrl(url: string, field = 'url'): void {
  if (!URL.canParse(url)) throw new Problem('AUD-2302', `${field} "${url}" is not a URL`);
  const { protocol } = new URL(url);
  if (protocol !== 'http:' && protocol !== 'https:')
    throw new Problem('AUD-2302', `${field}: the scheme "${protocol.slice(0, -1)}" is not http or https`);
}

function view(row: q.EndpointRow): Endpoint {
  return {
    id: row.endpoint_id,
    url: row.url,
    event_types: row.event_types as Endpoint['event_types'],
    description: row.description,
    enabled: row.enabled,
    state: !row.enabled ? 'disabled' : row.paused_at ? 'paused' : 'active',
    paused_at: row.paused_at?.toISOString() ?? null,
    consecutive_failures: row.consecutive_failures,
    // Only while the old secret still signs: a past overlap is none.
    previous_secret_until:
      row.previous_secret_until && row.previous_secret_until > new Date()
        ? row.previous_secret_until.toISOString()
        : null,
    created_at: row.created_at.toISOString(),
  };
}

const notFound = (id: string) => new Problem('AUD-2301', `The account has no webhook endpoint ${id}`);

/** Endpoint ids are bigints; anything else names none. */
const isId = (id: string) => /^[0-9]{1,18}$/.test(id);

export async function listEndpoints(db: Queryable, scope: AccountScope): Promise<Endpoint[]> {
  access(scope);
  return (await q.listEndpoints(db, scope.accountId)).map(view);
}

export async function getEndpoint(db: Queryable, scope: AccountScope, id: string): Promise<Endpoint> {
  access(scope);
  const row = isId(id) ? await q.getEndpoint(db, scope.accountId, id) : undefined;
  if (!row) throw notFound(id);
  return view(row);
}

/** Subscribes an endpoint; answers it with its secret (given, or new), shown this once. 409 for a URL the account has subscribed. */
export async function createEndpoint(
  db: Queryable,
  scope: AccountScope,
  body: EndpointCreate,
): Promise<Endpoint & { secret: string }> {
  access(scope);
  checkUrl(body.url);
  const secret = body.secret ?? newSecret();
  const row = await q.insertEndpoint(db, scope.accountId, {
    url: body.url,
    event_types: body.event_types,
    description: body.description ?? '',
    enabled: body.enabled ?? true,
    secret: new SecretBox(scope.secret).seal(secret),
  });
  if (!row) throw new Problem('AUD-2303', `url: the account has an endpoint for "${body.url}" already`);
  return { ...view(row), secret };
}

/** Changes an endpoint; `enabled: true` resumes one paused by failures, and its waiting deliveries go. */
export async function updateEndpoint(
  db: Queryable,
  scope: AccountScope,
  id: string,
  body: EndpointPatch,
): Promise<Endpoint> {
  access(scope);
  if (body.url !== undefined) checkUrl(body.url);
  if (!isId(id)) throw notFound(id);
  if (body.url !== undefined) {
    const other = await q.findEndpointByUrl(db, scope.accountId, body.url);
    if (other !== undefined && other !== id)
      throw new Problem('AUD-2303', `url: the account has an endpoint for "${body.url}" already`);
  }
  const row = await q.updateEndpoint(db, scope.accountId, id, body);
  if (!row) throw notFound(id);
  if (body.enabled) {
    await q.dueNow(db, scope.accountId, id);
    await enqueueUnlessWaiting(db, scope.accountId, WEBHOOK_DELIVERY_JOB, {});
  }
  return view(row);
}

export async function deleteEndpoint(db: Queryable, scope: AccountScope, id: string): Promise<void> {
  access(scope);
  if (!isId(id) || !(await q.deleteEndpoint(db, scope.accountId, id))) throw notFound(id);
}

/**
 * Rotates an endpoint's secret: the new one (given, or made) signs from now on, and the old one
 * beside it for `overlapSeconds`, so that a receiver that still knows only the old one keeps
 * verifying until it is given the new one. Answers the endpoint with the new secret.
 */
export async function rotateSecret(
  db: Queryable,
  scope: AccountScope,
  id: string,
  body: { secret?: string; overlap_seconds?: number },
): Promise<Endpoint & { secret: string }> {
  access(scope);
  if (!isId(id)) throw notFound(id);
  const secret = body.secret ?? newSecret();
  const until = new Date(Date.now() + (body.overlap_seconds ?? 86_400) * 1000);
  const row = await q.rotateSecret(db, scope.accountId, id, new SecretBox(scope.secret).seal(secret), until);
  if (!row) throw notFound(id);
  return { ...view(row), secret };
}

function deliveryView(row: q.DeliveryRow) {
  return {
    event_id: row.event_id,
    event_type: row.event_type as Endpoint['event_types'][number],
    created_at: row.created_at.toISOString(),
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at.toISOString() : null,
    delivered_at: row.delivered_at?.toISOString() ?? null,
    last_attempt: row.last_attempt ? attemptView(row.last_attempt) : null,
  };
}

const attemptView = (a: q.AttemptRow) => ({ ...a, attempted_at: new Date(a.attempted_at).toISOString() });

function checkWindow(since: string | undefined, until: string | undefined): void {
  if (since !== undefined && until !== undefined && Date.parse(until) < Date.parse(since))
    throw new Problem('AUD-2305', `until (${until}) is before since (${since})`);
}

/** An endpoint's deliveries, newest first, each with its last attempt. */
export async function listDeliveries(
  db: Queryable,
  scope: AccountScope,
  id: string,
  filter: { status?: string; since?: string; until?: string; limit: number },
) {
  await getEndpoint(db, scope, id);
  checkWindow(filter.since, filter.until);
  return (await q.listDeliveries(db, scope.accountId, id, filter)).map(deliveryView);
}

/** One delivery with its payload and every attempt. */
export async function getDelivery(db: Queryable, scope: AccountScope, id: string, eventId: string) {
  await getEndpoint(db, scope, id);
  const row = await q.getDelivery(db, scope.accountId, id, eventId);
  if (!row) throw new Problem('AUD-2304', `Endpoint ${id} has no delivery of the event "${eventId}"`);
  return {
    ...deliveryView(row),
    payload: { type: row.event_type, timestamp: row.created_at.toISOString(), data: row.data },
    attempt_log: row.attempt_log.map(attemptView),
  };
}

/** Sends a delivery again (same webhook-id), with a new day of retries. */
export async function replayDelivery(db: Queryable, scope: AccountScope, id: string, eventId: string) {
  await getEndpoint(db, scope, id);
  if ((await q.replay(db, scope.accountId, id, { eventId })) === 0)
    throw new Problem('AUD-2304', `Endpoint ${id} has no delivery of the event "${eventId}"`);
  await enqueueUnlessWaiting(db, scope.accountId, WEBHOOK_DELIVERY_JOB, {});
  return getDelivery(db, scope, id, eventId);
}

/** Sends again the deliveries of events written in [since, until); answers how many. */
export async function replayRange(
  db: Queryable,
  scope: AccountScope,
  id: string,
  body: { since: string; until: string; failed_only?: boolean },
): Promise<{ replayed: number }> {
  await getEndpoint(db, scope, id);
  checkWindow(body.since, body.until);
  const replayed = await q.replay(db, scope.accountId, id, {
    since: body.since,
    until: body.until,
    failedOnly: body.failed_only ?? false,
  });
  if (replayed > 0) await enqueueUnlessWaiting(db, scope.accountId, WEBHOOK_DELIVERY_JOB, {});
  return { replayed };
}

/** Erases the webhooks of an account being deleted. */
export async function forgetAccountWebhooks(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

/** The account's endpoints as the manifest lists them: every field but the secret, which is never read back. */
export async function manifestWebhooks(db: Queryable, accountId: string): Promise<ManifestWebhook[]> {
  return (await q.listEndpoints(db, accountId)).map((e) => ({
    url: e.url,
    event_types: e.event_types as ManifestWebhook['event_types'],
    description: e.description,
    enabled: e.enabled,
  }));
}

/**
 * Applies the manifest's endpoints, matched by URL: a new one is subscribed (with its secret, or
 * a new one), a listed one takes the listed fields (`enabled` only when it differs, so that
 * applying a read manifest back does not resume a paused endpoint), and a listed secret that is
 * not the current one is rotated in with the default overlap. Endpoints not listed stay.
 */
export async function applyManifestWebhooks(
  tx: Queryable,
  scope: Pick<AccountScope, 'accountId' | 'secret'>,
  webhooks: ManifestWebhook[],
): Promise<void> {
  const box = new SecretBox(scope.secret);
  const current = new Map((await q.listEndpoints(tx, scope.accountId)).map((e) => [e.url, e]));
  for (const [i, w] of webhooks.entries()) {
    checkUrl(w.url, `webhooks[${i}].url`);
    const found = current.get(w.url);
    if (!found) {
      await q.insertEndpoint(tx, scope.accountId, {
        url: w.url,
        event_types: w.event_types,
        description: w.description ?? '',
        enabled: w.enabled ?? true,
        secret: box.seal(w.secret ?? newSecret()),
      });
      continue;
    }
    const enabled = w.enabled ?? true;
    await q.updateEndpoint(tx, scope.accountId, found.endpoint_id, {
      event_types: w.event_types,
      description: w.description ?? '',
      ...(enabled === found.enabled ? {} : { enabled }),
    });
    if (w.secret !== undefined) {
      const sealed = await q.endpointSecret(tx, scope.accountId, found.endpoint_id);
      if (sealed && box.open(sealed) !== w.secret)
        await q.rotateSecret(
          tx,
          scope.accountId,
          found.endpoint_id,
          box.seal(w.secret),
          new Date(Date.now() + 86_400_000),
        );
    }
  }
}

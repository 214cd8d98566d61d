import { Type } from 'typebox';
import type { ProblemCode } from '../../core/problems.ts';
import {
  DeliveryQuery,
  Delivery,
  DeliveryWithAttempts,
  Endpoint,
  EndpointCreate,
  EndpointPatch,
  EndpointWithSecret,
  ReplayRange,
  Rotation,
} from '../../webhooks/schemas.ts';
import * as webhooks from '../../webhooks/webhooks.ts';
import { operation, type Operation, type OperationTable } from '../operation.ts';
import { AccountId } from '../schemas/common.ts';
import { NoContent } from '../schemas/problem.ts';

/**
 * Webhook endpoints and their deliveries (docs/webhooks.md): the same operations for a key of every
 * section (`/webhooks…`) and for the operator (`/admin/accounts/{account_id}/webhooks…`).
 */

const EndpointId = Type.String({ description: 'Endpoint id' });
const EventId = Type.String({ description: 'The event id: the webhook-id of its deliveries' });

const EXAMPLE_ENDPOINT = {
  id: '1',
  url: 'https://hooks.example.com/audience',
  event_types: ['consent.changed', 'profile.deleted'],
  description: 'CRM sync',
  enabled: true,
  state: 'active',
  paused_at: null,
  consecutive_failures: 0,
  previous_secret_until: null,
  created_at: '2026-11-28T10:00:00.000Z',
};
const EXAMPLE_SECRET = 'whsec_KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=';
const EXAMPLE_ATTEMPT = {
  attempt: 1,
  attempted_at: '2026-11-28T10:00:01.000Z',
  status: 200,
  latency_ms: 42,
  error: null,
};
const EXAMPLE_DELIVERY = {
  event_id: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
  event_type: 'profile.deleted',
  created_at: '2026-11-28T10:00:00.500Z',
  status: 'delivered',
  attempts: 1,
  next_attempt_at: null,
  delivered_at: '2026-11-28T10:00:01.000Z',
  last_attempt: EXAMPLE_ATTEMPT,
};

/** The ids of a path (its schema differs between the two tables, which TypeScript does not follow). */
const ids = (params: unknown) => params as { webhook_id: string; event_id: string };

/** The operations under `base`, with the params of `params` and the scope `scope`. */
function webhookOperations(
  base: string,
  paramsOf: <T extends Record<string, ReturnType<typeof Type.String>>>(fields: T) => ReturnType<typeof Type.Object>,
  scope: 'account' | 'operator-account',
): Operation[] {
  const errors = (...codes: ProblemCode[]): ProblemCode[] => (scope === 'account' ? ['AUD-1107', ...codes] : codes);
  const who =
    scope === 'account'
      ? ' A key restricted to sections may not use it (403): events carry profiles of every section.'
      : '';
  const one = `${base}/:webhook_id`;
  const EndpointParams = paramsOf({ webhook_id: EndpointId });
  const DeliveryParams = paramsOf({ webhook_id: EndpointId, event_id: EventId });
  return [
    operation({
      method: 'GET',
      path: base,
      summary: 'List webhook endpoints',
      description: `The endpoints the account has subscribed, with their state.${who}`,
      errors: errors(),
      params: paramsOf({}),
      response: { 200: Type.Object({ items: Type.Array(Endpoint) }) },
      examples: { response: { 200: { items: [EXAMPLE_ENDPOINT] } } },
      scope,
      handle: async ({ db, scope }) => ({ items: await webhooks.listEndpoints(db, scope) }),
    }),
    operation({
      method: 'POST',
      path: base,
      summary: 'Subscribe a webhook endpoint',
      description: `Subscribes an endpoint to event types. The answer holds its signing secret (given, or made: \`whsec_…\`), shown only here and when it is rotated. Where the URL leads is checked at each delivery: private, loopback and link-local addresses are refused.${who}`,
      errors: errors(...webhooks.WEBHOOK_URL_PROBLEMS, 'AUD-2303'),
      params: paramsOf({}),
      body: EndpointCreate,
      response: { 201: EndpointWithSecret },
      examples: {
        body: { url: EXAMPLE_ENDPOINT.url, event_types: EXAMPLE_ENDPOINT.event_types, description: 'CRM sync' },
        response: { 201: { ...EXAMPLE_ENDPOINT, secret: EXAMPLE_SECRET } },
      },
      scope,
      transaction: true,
      handle: ({ db, scope, body }) => webhooks.createEndpoint(db, scope, body),
    }),
    operation({
      method: 'GET',
      path: one,
      summary: 'Get a webhook endpoint',
      description: `One endpoint and its state: active, paused by failures, or disabled.${who}`,
      errors: errors('AUD-2301'),
      params: EndpointParams,
      response: { 200: Endpoint },
      examples: { response: { 200: EXAMPLE_ENDPOINT } },
      scope,
      handle: ({ db, scope, params }) => webhooks.getEndpoint(db, scope, ids(params).webhook_id),
    }),
    operation({
      method: 'PATCH',
      path: one,
      summary: 'Change a webhook endpoint',
      description: `Changes the fields given. \`enabled: true\` resumes an endpoint paused by failures: its waiting deliveries go, in order.${who}`,
      errors: errors('AUD-2301', ...webhooks.WEBHOOK_URL_PROBLEMS, 'AUD-2303'),
      params: EndpointParams,
      body: EndpointPatch,
      response: { 200: Endpoint },
      examples: { body: { enabled: true }, response: { 200: EXAMPLE_ENDPOINT } },
      scope,
      transaction: true,
      handle: ({ db, scope, params, body }) => webhooks.updateEndpoint(db, scope, ids(params).webhook_id, body),
    }),
    operation({
      method: 'DELETE',
      path: one,
      summary: 'Delete a webhook endpoint',
      description: `Deletes an endpoint with its deliveries and their attempts.${who}`,
      errors: errors('AUD-2301'),
      params: EndpointParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => webhooks.deleteEndpoint(db, scope, ids(params).webhook_id),
    }),
    operation({
      method: 'POST',
      path: `${one}/secret`,
      summary: "Rotate a webhook endpoint's secret",
      description: `A new secret (given, or made) signs from now on; the old one signs beside it for \`overlap_seconds\` (a day by default), so each delivery carries both signatures until the receiver has the new secret.${who}`,
      errors: errors('AUD-2301'),
      params: EndpointParams,
      // A POST without a body rotates with the defaults.
      preValidation: async (request) => {
        request.body ??= {};
      },
      body: Rotation,
      response: { 200: EndpointWithSecret },
      examples: {
        body: { overlap_seconds: 86400 },
        response: {
          200: { ...EXAMPLE_ENDPOINT, previous_secret_until: '2026-11-29T10:00:00.000Z', secret: EXAMPLE_SECRET },
        },
      },
      scope,
      transaction: true,
      handle: ({ db, scope, params, body }) => webhooks.rotateSecret(db, scope, ids(params).webhook_id, body),
    }),
    operation({
      method: 'GET',
      path: `${one}/deliveries`,
      summary: 'List webhook deliveries',
      description: `The deliveries of an endpoint, newest first, each with its status and last attempt; \`since\` and \`until\` bound the time of their events.${who}`,
      errors: errors('AUD-2301', 'AUD-2305'),
      params: EndpointParams,
      query: DeliveryQuery,
      response: { 200: Type.Object({ items: Type.Array(Delivery) }) },
      examples: { response: { 200: { items: [EXAMPLE_DELIVERY] } } },
      scope,
      handle: async ({ db, scope, params, query }) => ({
        items: await webhooks.listDeliveries(db, scope, ids(params).webhook_id, query),
      }),
    }),
    operation({
      method: 'GET',
      path: `${one}/deliveries/:event_id`,
      summary: 'Get a webhook delivery',
      description: `One delivery with the body it sends and every attempt: when, the answer's status, the latency, the error.${who}`,
      errors: errors('AUD-2301', 'AUD-2304'),
      params: DeliveryParams,
      response: { 200: DeliveryWithAttempts },
      examples: {
        response: {
          200: {
            ...EXAMPLE_DELIVERY,
            payload: {
              type: 'profile.deleted',
              timestamp: EXAMPLE_DELIVERY.created_at,
              data: { profiles: [{ export_key: 'b7Rk2mQ9' }], locked: false },
            },
            attempt_log: [EXAMPLE_ATTEMPT],
          },
        },
      },
      scope,
      handle: ({ db, scope, params }) => webhooks.getDelivery(db, scope, ids(params).webhook_id, ids(params).event_id),
    }),
    operation({
      method: 'POST',
      path: `${one}/deliveries/:event_id/replay`,
      summary: 'Replay a webhook delivery',
      description: `Sends a delivery again, with the same webhook-id and a new day of retries, whatever its status.${who}`,
      errors: errors('AUD-2301', 'AUD-2304'),
      params: DeliveryParams,
      response: { 202: DeliveryWithAttempts },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) =>
        webhooks.replayDelivery(db, scope, ids(params).webhook_id, ids(params).event_id),
    }),
    operation({
      method: 'POST',
      path: `${one}/replay`,
      summary: 'Replay webhook deliveries of a time range',
      description: `Sends again the endpoint's deliveries of events written from \`since\` to before \`until\` (only those whose retries ended, with \`failed_only\`), in their order; answers how many.${who}`,
      errors: errors('AUD-2301', 'AUD-2305'),
      params: EndpointParams,
      body: ReplayRange,
      response: { 202: Type.Object({ replayed: Type.Integer() }) },
      examples: {
        body: { since: '2026-11-28T00:00:00Z', until: '2026-11-28T12:00:00Z', failed_only: true },
        response: { 202: { replayed: 12 } },
      },
      scope,
      transaction: true,
      handle: ({ db, scope, params, body }) => webhooks.replayRange(db, scope, ids(params).webhook_id, body),
    }),
  ];
}

/** For API keys of every section. */
export const webhooksRoutes: OperationTable = {
  tags: ['webhooks'],
  operations: webhookOperations('/webhooks', (fields) => Type.Object(fields), 'account'),
};

/** For the operator, on an account. */
export const adminWebhooksRoutes: OperationTable = {
  tags: ['operator'],
  operations: webhookOperations(
    '/admin/accounts/:account_id/webhooks',
    (fields) => Type.Object({ account_id: AccountId, ...fields }),
    'operator-account',
  ),
};

import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { accountScope, type Services } from '../../services.ts';
import { Problem } from '../../core/problems.ts';
import { emptyOutbox, listOutbox, readOutboxMessage } from '../../transactional/outbox.ts';
import {
  OutboxMessage,
  OutboxMessageParams,
  OutboxQuery,
  SEND_BODY_LIMIT,
  SendBody,
  SendList,
  SendListParams,
  SendListQuery,
  SendParams,
  TrackingParams,
  Transaction,
  TransactionParams,
  TransactionStatus,
} from '../../transactional/schemas.ts';
import { acceptSend, listSends, sendStatus } from '../../transactional/sends.ts';
import { readTrackingLink, trackClick, trackOpen } from '../../transactional/tracked-events.ts';
import { unsubscribe } from '../../transactional/unsubscribe.ts';
import { PIXEL, type TrackingKind } from '../../transactional/tracking.ts';
import { operation, type OperationTable } from '../operation.ts';
import { AccountParams } from '../schemas/common.ts';

/** Transactional sends and their status (SPEC §4.8; ENDPOINTS.md "Activities and transactional email"). */
export const transactionalRoutes: OperationTable = {
  tags: ['transactional email'],
  operations: [
    operation({
      method: 'POST',
      path: '/emails/sections/:section_discriminator/activities/transactional/:activity_id/transactions',
      // TX-08: attachments and variables take the body above the general 100 KB.
      bodyLimit: SEND_BODY_LIMIT,
      summary: 'Send a transactional email',
      errors: [
        'AUD-1007',
        'AUD-1101',
        'AUD-1102',
        'AUD-1107',
        'AUD-1203',
        'AUD-2001',
        'AUD-2101',
        'AUD-2104',
        'AUD-2105',
        'AUD-2107',
      ],
      description:
        "Answers the id of the send at once; the message is rendered and sent by the worker (docs/mail.md). Fields the body omits are the activity's.",
      params: SendParams,
      body: SendBody,
      response: { 201: Transaction },
      scope: 'account',
      handle: async ({ services, scope, params, body }) => ({
        id: await acceptSend(services.pool, scope, params, body),
      }),
    }),
    operation({
      method: 'GET',
      path: '/emails/sections/:section_discriminator/activities/:activity_id/transactions',
      summary: 'List transactional sends',
      description:
        "The service's own route (for its console): the newest sends of a transactional activity, with their status and the events recorded of each.",
      errors: ['AUD-1102', 'AUD-1107', 'AUD-2001'],
      params: SendListParams,
      query: SendListQuery,
      response: { 200: SendList },
      scope: 'account',
      handle: async ({ db, scope, params, query }) => ({
        items: await listSends(db, scope, { ...params, limit: query.limit }),
      }),
    }),
    operation({
      method: 'GET',
      path: '/emails/sections/:section_discriminator/activities/:activity_id/transactions/:transaction_id',
      summary: 'Get the status of a transactional send',
      description: 'Where one transactional send is: queued, sent, or failed with why.',
      errors: ['AUD-1102', 'AUD-1107', 'AUD-2001', 'AUD-2106'],
      params: TransactionParams,
      response: { 200: TransactionStatus },
      scope: 'account',
      handle: ({ db, scope, params }) => sendStatus(db, scope, params),
    }),
  ],
};

const NoStore = { 'cache-control': 'no-store' };

/** The token of a tracking link's path, read as a link of this kind: its target, or 404 for a link this service did not sign. */
const linkOf = (kind: TrackingKind, request: FastifyRequest, services: Services) =>
  readTrackingLink(services.serverSecret, kind, (request.params as { token: string }).token);

/** The scope of the account a tracking link names. */
const linkScope = (kind: TrackingKind) => (request: FastifyRequest, services: Services) =>
  accountScope(services, linkOf(kind, request, services).accountId).catch(() => {
    throw new Problem('AUD-2102', "This link's account no longer exists");
  });

const page = (reply: FastifyReply, title: string, body: string) =>
  reply
    .headers(NoStore)
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head><body style="font-family:sans-serif;max-width:32em;margin:3em auto">${body}</body></html>`,
    );

/**
 * The tracking links of messages (docs/mail.md "Tracking"): open pixel, click redirect, and
 * unsubscribe (a page with a button, and RFC 8058's one-click POST). No token: the link's
 * signature is its credential, and a link this service did not sign is 404. They are links in
 * messages, not operations of the API, so the OpenAPI document leaves them out.
 */
export const trackingRoutes: OperationTable = {
  tags: ['transactional email'],
  operations: [
    operation({
      method: 'GET',
      path: '/mail/open/:token',
      hide: true,
      errors: ['AUD-2102'],
      summary: 'Open pixel of a message: records OPENED once',
      description: 'A link in messages, not an operation of the API.',
      params: TrackingParams,
      response: { 200: Type.Unknown({ description: 'A 1×1 GIF' }) },
      scope: 'link',
      resolve: linkScope('open'),
      transaction: true,
      handle: async ({ db, scope, services, request, reply }) => {
        const target = linkOf('open', request, services);
        await trackOpen(db, scope, services.config.vendor, target, request.headers['user-agent']);
        return reply.headers(NoStore).type('image/gif').send(PIXEL);
      },
    }),
    operation({
      method: 'GET',
      path: '/mail/click/:token',
      hide: true,
      errors: ['AUD-2102'],
      summary: 'Click link of a message: records CLICKED once and redirects to the link the message held',
      description: 'A link in messages, not an operation of the API.',
      params: TrackingParams,
      response: { 302: Type.Null({ description: 'To the link (Location)' }) },
      scope: 'link',
      resolve: linkScope('click'),
      transaction: true,
      handle: async ({ db, scope, services, request, reply }) => {
        const target = linkOf('click', request, services);
        const url = await trackClick(db, scope, services.config.vendor, target, request.headers['user-agent']);
        return reply.headers(NoStore).redirect(url, 302);
      },
    }),
    operation({
      method: 'GET',
      path: '/mail/unsubscribe/:token',
      hide: true,
      errors: ['AUD-2102'],
      summary: 'Unsubscribe page of a message',
      description:
        'A link in messages, not an operation of the API: a button that unsubscribes (mail scanners follow links, so a GET changes nothing).',
      params: TrackingParams,
      response: { 200: Type.Unknown({ description: 'An HTML page' }) },
      scope: 'public',
      handle: async ({ services, request, reply }) => {
        linkOf('unsubscribe', request, services);
        return page(
          reply,
          'Unsubscribe',
          `<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><p>Stop receiving these emails?</p><button type="submit">Unsubscribe</button></form>`,
        );
      },
    }),
    operation({
      method: 'POST',
      path: '/mail/unsubscribe/:token',
      hide: true,
      errors: ['AUD-2102'],
      summary: 'Unsubscribe, one click (RFC 8058): suppresses the address and records UNSUBSCRIBED once',
      description: 'A link in messages, not an operation of the API.',
      params: TrackingParams,
      response: { 200: Type.Unknown({ description: 'An HTML page' }) },
      scope: 'link',
      resolve: linkScope('unsubscribe'),
      transaction: true,
      handle: async ({ db, scope, services, request, reply }) => {
        await unsubscribe(db, scope, services.config.vendor, linkOf('unsubscribe', request, services));
        return page(
          reply,
          'Unsubscribed',
          '<p>You are unsubscribed: no more of these emails will be sent to this address.</p>',
        );
      },
    }),
  ],
};

/** The operator's view of the built-in outbox (docs/mail.md "The outbox"). */
export const outboxRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/outbox',
      summary: 'List the outbox',
      description: 'The messages kept in the built-in outbox (when SMTP_URL is unset), newest first.',
      params: AccountParams,
      query: OutboxQuery,
      response: { 200: Type.Object({ items: Type.Array(Type.Omit(OutboxMessage, ['source', 'html', 'text'])) }) },
      scope: 'operator-account',
      handle: async ({ db, scope, query }) => ({ items: await listOutbox(db, scope.accountId, query.limit) }),
    }),
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/outbox/:message_id',
      summary: 'Read an outbox message',
      description:
        'One message of the outbox, with its headers, links and source, and its HTML and text parts decoded (so a client need not parse MIME).',
      errors: ['AUD-2103'],
      params: OutboxMessageParams,
      response: { 200: OutboxMessage },
      scope: 'operator',
      handle: ({ db, params }) => readOutboxMessage(db, params.account_id, params.message_id),
    }),
    operation({
      method: 'DELETE',
      path: '/admin/accounts/:account_id/outbox',
      summary: 'Empty the outbox of an account',
      description: "Deletes every message of the account's outbox.",
      params: AccountParams,
      response: { 200: Type.Object({ deleted: Type.Integer() }) },
      scope: 'operator-account',
      handle: async ({ db, scope }) => ({ deleted: await emptyOutbox(db, scope.accountId) }),
    }),
  ],
};

import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountScope, type Services } from '../../services.ts';
import * as accounts from '../../accounts/accounts.ts';
import { Problem } from '../../core/problems.ts';
import type { AccountScope } from '../../core/scope.ts';
import { withTransaction, type Queryable } from '../../store/pool.ts';
import { emptyOutbox, listOutbox, readOutboxMessage } from '../../transactional/outbox.ts';
import {
  OutboxMessage,
  OutboxMessageParams,
  OutboxQuery,
  SEND_BODY_LIMIT,
  SendBody,
  SendParams,
  TrackingParams,
  Transaction,
  TransactionParams,
  TransactionStatus,
} from '../../transactional/schemas.ts';
import * as transactional from '../../transactional/transactional.ts';
import { PIXEL, type TrackingKind, type TrackingTarget } from '../../transactional/tracking.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import { responses } from '../schemas/problem.ts';

const AccountParams = Type.Object({ account_id: Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' }) });

/** Transactional sends and their status (SPEC §4.8; ENDPOINTS.md "Activities and transactional email"). */
export function transactionalRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['transactional email'];

    app.post(
      '/emails/sections/:section_discriminator/activities/transactional/:activity_id/transactions',
      {
        // TX-08: attachments and variables take the body above the general 100 KB.
        bodyLimit: SEND_BODY_LIMIT,
        schema: {
          summary: 'Send a transactional email (in development)',
          description:
            "Answers the id of the send at once; the message is rendered and sent by the worker (docs/mail.md). Fields the body omits are the activity's.",
          tags,
          params: SendParams,
          body: SendBody,
          response: responses({ 201: Transaction }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        const id = await transactional.acceptSend(services.pool, scope, request.params, request.body);
        return reply.code(201).send({ id });
      },
    );

    app.get(
      '/emails/sections/:section_discriminator/activities/:activity_id/transactions/:transaction_id',
      {
        schema: {
          summary: 'Get the status of a transactional send',
          tags,
          params: TransactionParams,
          response: responses({ 200: TransactionStatus }),
        },
      },
      async (request) => transactional.sendStatus(services.pool, await scopeOf(request), request.params),
    );
  };
}

const NoStore = { 'cache-control': 'no-store' };

/**
 * The tracking links of messages (docs/mail.md "Tracking"): open pixel, click redirect, and
 * unsubscribe (a page with a button, and RFC 8058's one-click POST). No token: the link's
 * signature is its credential, and a link this service did not sign is 404. They are links in
 * messages, not operations of the API, so the OpenAPI document leaves them out.
 */
export function trackingRoutes(services: Services) {
  const { pool } = services;
  const { vendor } = services.config;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const config = { auth: 'none' as const };
    const tags = ['transactional email'];
    /** Reads the link, then runs `work` in a transaction with the scope of its account. */
    const tracked = async <T>(
      kind: TrackingKind,
      token: string,
      work: (tx: Queryable, scope: AccountScope, target: TrackingTarget) => Promise<T>,
    ) => {
      const target = transactional.readTrackingLink(services.serverSecret, kind, token);
      const scope = await accountScope(services, target.accountId).catch(() => {
        throw new Problem('AUD-2102', "This link's account no longer exists");
      });
      return withTransaction(pool, (tx) => work(tx, scope, target));
    };
    const page = (reply: FastifyReply, title: string, body: string) =>
      reply
        .headers(NoStore)
        .type('text/html; charset=utf-8')
        .send(
          `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head><body style="font-family:sans-serif;max-width:32em;margin:3em auto">${body}</body></html>`,
        );

    app.get(
      '/mail/open/:token',
      {
        config,
        schema: {
          hide: true,
          summary: 'Open pixel of a message: records OPENED once',
          tags,
          params: TrackingParams,
          response: responses({ 200: Type.Unknown({ description: 'A 1×1 GIF' }) }),
        },
      },
      async (request, reply) => {
        await tracked('open', request.params.token, (tx, scope, target) =>
          transactional.trackOpen(tx, scope, vendor, target, request.headers['user-agent']),
        );
        return reply.headers(NoStore).type('image/gif').send(PIXEL);
      },
    );

    app.get(
      '/mail/click/:token',
      {
        config,
        schema: {
          hide: true,
          summary: 'Click link of a message: records CLICKED once and redirects to the link the message held',
          tags,
          params: TrackingParams,
          response: responses({ 302: Type.Null({ description: 'To the link (Location)' }) }),
        },
      },
      async (request, reply) => {
        const url = await tracked('click', request.params.token, (tx, scope, target) =>
          transactional.trackClick(tx, scope, vendor, target, request.headers['user-agent']),
        );
        return reply.headers(NoStore).redirect(url, 302);
      },
    );

    app.get(
      '/mail/unsubscribe/:token',
      {
        config,
        schema: {
          hide: true,
          summary:
            'Unsubscribe page of a message: a button that unsubscribes (mail scanners follow links, so a GET changes nothing)',
          tags,
          params: TrackingParams,
          response: responses({ 200: Type.Unknown({ description: 'An HTML page' }) }),
        },
      },
      async (request, reply) => {
        transactional.readTrackingLink(services.serverSecret, 'unsubscribe', request.params.token);
        return page(
          reply,
          'Unsubscribe',
          `<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><p>Stop receiving these emails?</p><button type="submit">Unsubscribe</button></form>`,
        );
      },
    );

    app.post(
      '/mail/unsubscribe/:token',
      {
        config,
        schema: {
          hide: true,
          summary: 'Unsubscribe, one click (RFC 8058): suppresses the address and records UNSUBSCRIBED once',
          tags,
          params: TrackingParams,
          response: responses({ 200: Type.Unknown({ description: 'An HTML page' }) }),
        },
      },
      async (request, reply) => {
        await tracked('unsubscribe', request.params.token, (tx, scope, target) =>
          transactional.unsubscribe(tx, scope, vendor, target),
        );
        return page(
          reply,
          'Unsubscribed',
          '<p>You are unsubscribed: no more of these emails will be sent to this address.</p>',
        );
      },
    );
  };
}

/** The operator's view of the built-in outbox (docs/mail.md "The outbox"). */
export function outboxRoutes(services: Services) {
  const { pool } = services;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const config = { auth: 'admin' as const };
    const tags = ['operator'];

    app.get(
      '/admin/accounts/:account_id/outbox',
      {
        config,
        schema: {
          tags,
          summary: 'List the messages kept in the outbox (SMTP_URL unset), newest first',
          params: AccountParams,
          querystring: OutboxQuery,
          response: responses({ 200: Type.Object({ items: Type.Array(Type.Omit(OutboxMessage, ['source'])) }) }),
        },
      },
      async (request) => {
        await accounts.getAccount(pool, request.params.account_id);
        return { items: await listOutbox(pool, request.params.account_id, request.query.limit) };
      },
    );

    app.get(
      '/admin/accounts/:account_id/outbox/:message_id',
      {
        config,
        schema: {
          tags,
          summary: 'Read a message of the outbox, with its source',
          params: OutboxMessageParams,
          response: responses({ 200: OutboxMessage }),
        },
      },
      async (request) => readOutboxMessage(pool, request.params.account_id, request.params.message_id),
    );

    app.delete(
      '/admin/accounts/:account_id/outbox',
      {
        config,
        schema: {
          tags,
          summary: 'Empty the outbox of an account',
          params: AccountParams,
          response: responses({ 200: Type.Object({ deleted: Type.Integer() }) }),
        },
      },
      async (request) => {
        await accounts.getAccount(pool, request.params.account_id);
        return { deleted: await emptyOutbox(pool, request.params.account_id) };
      },
    );
  };
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Services } from '../../services.ts';
import * as accounts from '../../accounts/accounts.ts';
import { emptyOutbox, listOutbox, readOutboxMessage } from '../../transactional/outbox.ts';
import { OutboxMessage, OutboxMessageParams, OutboxQuery } from '../../transactional/schemas.ts';
import { responses } from '../schemas/problem.ts';

const AccountParams = Type.Object({ account_id: Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' }) });

/** The operator's view of the built-in outbox (docs/mail.md "The outbox"). */
export function outboxRoutes(services: Services) {
  const { pool } = services;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const config = { auth: 'admin' as const };
    const tags = ['operator'];

    app.get('/admin/accounts/:account_id/outbox', {
      config,
      schema: {
        tags, summary: 'List the messages kept in the outbox (SMTP_URL unset), newest first', params: AccountParams, querystring: OutboxQuery,
        response: responses({ 200: Type.Object({ items: Type.Array(Type.Omit(OutboxMessage, ['source'])) }) }),
      },
    }, async (request) => {
      await accounts.getAccount(pool, request.params.account_id);
      return { items: await listOutbox(pool, request.params.account_id, request.query.limit) };
    });

    app.get('/admin/accounts/:account_id/outbox/:message_id', {
      config, schema: { tags, summary: 'Read a message of the outbox, with its source', params: OutboxMessageParams, response: responses({ 200: OutboxMessage }) },
    }, async (request) => readOutboxMessage(pool, request.params.account_id, request.params.message_id));

    app.delete('/admin/accounts/:account_id/outbox', {
      config, schema: { tags, summary: 'Empty the outbox of an account', params: AccountParams, response: responses({ 200: Type.Object({ deleted: Type.Integer() }) }) },
    }, async (request) => {
      await accounts.getAccount(pool, request.params.account_id);
      return { deleted: await emptyOutbox(pool, request.params.account_id) };
    });
  };
}

import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { REGIONS } from '../../config.ts';
import type { Services } from '../../services.ts';
import * as accounts from '../../accounts/accounts.ts';
import { LIMIT_NAMES, LIMIT_RANGES } from '../../core/limits.ts';
import { AccountManifest, applyAccountManifest } from '../../accounts/manifest.ts';
import * as consents from '../../consents/consents.ts';
import { Suppression } from '../../consents/schemas.ts';
import { addIntegration, listIntegrations } from '../../definitions/integrations.ts';
import { Integration, IntegrationSystem, ManifestSummary } from '../../definitions/schemas.ts';
import { withTransaction } from '../../store/pool.ts';
import { JOB_STATES, listJobs } from '../../jobs/queue.ts';
import { Problem } from '../../core/problems.ts';
import { DateTime } from '../../core/schemas.ts';
import { NoContent, responses } from '../schemas/problem.ts';

const LimitsSchema = Type.Object(
  Object.fromEntries(
    LIMIT_NAMES.map((n) => [
      n,
      Type.Optional(Type.Union([Type.Integer(LIMIT_RANGES[n] ?? { minimum: 0 }), Type.Null()])),
    ]),
  ),
  {
    additionalProperties: false,
    description: 'Limit overrides; null lifts a limit (token_lifetime_seconds: back to 24 hours)',
  },
);
const Account = Type.Object({
  id: Type.String(),
  name: Type.String(),
  region: Type.String(),
  limit_overrides: Type.Record(Type.String(), Type.Union([Type.Integer(), Type.Null()])),
  limits: Type.Record(Type.String(), Type.Union([Type.Integer(), Type.Null()]), { description: 'The limits in force' }),
  created_at: DateTime,
});
// Account ids are bigints: more than 18 digits could not be one, and PostgreSQL would refuse the cast.
const AccountId = Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' });
const AccountParams = Type.Object({ account_id: AccountId });
const KeyParams = Type.Object({ account_id: AccountId, client_id: Type.String() });
const ApiKey = Type.Object({
  client_id: Type.String(),
  name: Type.String(),
  section_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
  created_at: DateTime,
  client_secret: Type.Optional(Type.String({ description: 'Shown only when the key is created' })),
});

const JobSchema = Type.Object({
  account_id: Type.String(),
  job_id: Type.String(),
  kind: Type.String(),
  state: Type.Union(
    JOB_STATES.map((s) => Type.Literal(s)),
    { description: 'waiting (a retry too), running, or failed after its last attempt' },
  ),
  payload: Type.Record(Type.String(), Type.Unknown()),
  attempts: Type.Integer(),
  last_error: Type.Union([Type.String(), Type.Null()], { description: 'The error of the last failed attempt' }),
  created_at: DateTime,
  run_at: DateTime,
  failed_at: Type.Union([DateTime, Type.Null()]),
});

/** The operator API (/admin): accounts, API keys, manifests and signing keys. Everything the public API only reads is written here. */
export function adminRoutes(services: Services) {
  const { pool, feed } = services;
  const { vendor } = services.config;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const config = { auth: 'admin' as const };
    const tags = ['operator'];

    app.get(
      '/admin/accounts',
      {
        config,
        schema: {
          tags,
          summary: 'List accounts',
          response: responses({ 200: Type.Object({ items: Type.Array(Account) }) }),
        },
      },
      async () => ({ items: await accounts.listAccounts(pool) }),
    );

    app.post(
      '/admin/accounts',
      {
        config,
        schema: {
          tags,
          summary: 'Create an account',
          body: Type.Object(
            {
              name: Type.String({ minLength: 1 }),
              region: Type.Optional(Type.Enum(REGIONS, { description: 'The region the account belongs to' })),
              limits: Type.Optional(LimitsSchema),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: Account }),
        },
      },
      async (request, reply) => {
        const account = await withTransaction(pool, (tx) =>
          accounts.createAccount(tx, feed, vendor, { region: services.config.region, ...request.body }),
        );
        return reply.code(201).send(account);
      },
    );

    app.get(
      '/admin/accounts/:account_id',
      {
        config,
        schema: { tags, summary: 'Get an account', params: AccountParams, response: responses({ 200: Account }) },
      },
      async (request) => accounts.getAccount(pool, request.params.account_id),
    );

    app.patch(
      '/admin/accounts/:account_id',
      {
        config,
        schema: {
          tags,
          summary: 'Rename an account or replace its limit overrides',
          params: AccountParams,
          body: Type.Object(
            { name: Type.Optional(Type.String({ minLength: 1 })), limits: Type.Optional(LimitsSchema) },
            { additionalProperties: false },
          ),
          response: responses({ 200: Account }),
        },
      },
      async (request) =>
        withTransaction(pool, (tx) => accounts.updateAccount(tx, feed, request.params.account_id, request.body)),
    );

    app.put(
      '/admin/accounts/:account_id/manifest',
      {
        config,
        bodyLimit: 10 * 1024 * 1024,
        schema: {
          tags,
          summary: 'Apply a manifest to an account (idempotent); answers what it created, changed and left alone',
          params: AccountParams,
          body: AccountManifest,
          response: responses({ 200: ManifestSummary }),
        },
      },
      async (request) =>
        withTransaction(pool, (tx) =>
          applyAccountManifest(tx, feed, vendor, request.params.account_id, request.body, new Date(services.clock())),
        ),
    );

    app.get(
      '/admin/accounts/:account_id/integrations',
      {
        config,
        schema: {
          tags,
          summary: 'List connected integrations',
          params: AccountParams,
          response: responses({ 200: Type.Object({ items: Type.Array(Integration) }) }),
        },
      },
      async (request) => {
        const accountId = request.params.account_id;
        await accounts.getAccount(pool, accountId);
        return { items: listIntegrations((await services.definitions.get(accountId)).keyspaces, vendor) };
      },
    );

    app.post(
      '/admin/accounts/:account_id/integrations',
      {
        config,
        schema: {
          tags,
          summary:
            'Connect an integration: creates its keyspace (201), or answers the one the account has for that system (200)',
          params: AccountParams,
          body: Type.Object({ system: IntegrationSystem }, { additionalProperties: false }),
          response: responses({ 200: Integration, 201: Integration }),
        },
      },
      async (request, reply) => {
        const accountId = request.params.account_id;
        const { created, ...integration } = await withTransaction(pool, async (tx) => {
          await accounts.getAccount(tx, accountId);
          return addIntegration(tx, feed, vendor, accountId, request.body.system);
        });
        return reply.code(created ? 201 : 200).send(integration);
      },
    );

    app.get(
      '/admin/accounts/:account_id/suppressions',
      {
        config,
        schema: {
          tags,
          summary: 'List suppressed addresses',
          params: AccountParams,
          response: responses({ 200: Type.Object({ items: Type.Array(Suppression) }) }),
        },
      },
      async (request) => {
        const accountId = request.params.account_id;
        await accounts.getAccount(pool, accountId);
        return {
          items: await consents.listSuppressions(pool, { accountId, defs: await services.definitions.get(accountId) }),
        };
      },
    );

    app.put(
      '/admin/accounts/:account_id/suppressions',
      {
        config,
        schema: {
          tags,
          summary: 'Suppress an address on a channel',
          params: AccountParams,
          body: Suppression,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        const accountId = request.params.account_id;
        await accounts.getAccount(pool, accountId);
        await consents.addSuppression(
          pool,
          { accountId, defs: await services.definitions.get(accountId) },
          request.body,
        );
        return reply.code(204).send();
      },
    );

    app.delete(
      '/admin/accounts/:account_id/suppressions/:channel_discriminator/:address',
      {
        config,
        schema: {
          tags,
          summary: 'Lift a suppression',
          params: Type.Object({ account_id: AccountId, channel_discriminator: Type.String(), address: Type.String() }),
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        const { account_id: accountId, channel_discriminator, address } = request.params;
        await accounts.getAccount(pool, accountId);
        await consents.removeSuppression(
          pool,
          { accountId, defs: await services.definitions.get(accountId) },
          channel_discriminator,
          address,
        );
        return reply.code(204).send();
      },
    );

    app.get(
      '/admin/accounts/:account_id/keys',
      {
        config,
        schema: {
          tags,
          summary: 'List API keys',
          params: AccountParams,
          response: responses({ 200: Type.Object({ items: Type.Array(ApiKey) }) }),
        },
      },
      async (request) => {
        await accounts.getAccount(pool, request.params.account_id);
        return { items: await services.apiKeys.listApiKeys(pool, request.params.account_id) };
      },
    );

    app.post(
      '/admin/accounts/:account_id/keys',
      {
        config,
        schema: {
          tags,
          summary: 'Create an API key; its secret is shown once',
          params: AccountParams,
          body: Type.Object(
            {
              name: Type.Optional(Type.String()),
              section_discriminators: Type.Optional(
                Type.Array(Type.String(), { description: 'Sections the key may use; all when omitted' }),
              ),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: ApiKey }),
        },
      },
      async (request, reply) => {
        const accountId = request.params.account_id;
        await accounts.getAccount(pool, accountId);
        const defs = await services.definitions.get(accountId);
        const sectionIds = request.body?.section_discriminators?.map((d) => {
          const section = defs.sections.find((s) => s.discriminator === d);
          if (!section) throw new Problem('AUD-1111', `section_discriminators names the unknown section "${d}"`);
          return section.id;
        });
        const key = await services.apiKeys.createApiKey(pool, accountId, {
          name: request.body?.name,
          sectionIds: sectionIds ?? null,
        });
        return reply.code(201).send(key);
      },
    );

    app.delete(
      '/admin/accounts/:account_id/keys/:client_id',
      {
        config,
        schema: { tags, summary: 'Delete an API key', params: KeyParams, response: responses({ 204: NoContent }) },
      },
      async (request, reply) => {
        await withTransaction(pool, (tx) =>
          services.apiKeys.deleteApiKey(tx, request.params.account_id, request.params.client_id),
        );
        return reply.code(204).send();
      },
    );

    app.get(
      '/admin/jobs',
      {
        config,
        schema: {
          tags,
          summary: 'List jobs, oldest first: failed ones stay until the account is deleted',
          querystring: Type.Object(
            {
              state: Type.Optional(Type.Union(JOB_STATES.map((s) => Type.Literal(s)))),
              kind: Type.Optional(Type.String()),
              limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
            },
            { additionalProperties: false },
          ),
          response: responses({ 200: Type.Object({ items: Type.Array(JobSchema) }) }),
        },
      },
      async (request) => ({ items: await listJobs(pool, request.query) }),
    );

    app.post(
      '/admin/signing-keys',
      {
        config,
        schema: {
          tags,
          summary: 'Rotate the token signing key',
          description:
            'The old keys keep verifying the tokens they signed until those expire (24 hours), unless revoke_old is true: then every token they signed is refused at once, and every client must ask for a new token.',
          querystring: Type.Object(
            {
              revoke_old: Type.Optional(
                Type.Boolean({ description: 'Stop the old keys at once rather than after 24 hours' }),
              ),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: Type.Object({ kid: Type.String() }) }),
        },
      },
      async (request, reply) =>
        reply.code(201).send(await services.apiKeys.rotateSigningKey({ revokeOld: request.query.revoke_old === true })),
    );
  };
}

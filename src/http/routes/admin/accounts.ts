import { Type } from 'typebox';
import { REGIONS } from '../../../config.ts';
import * as accounts from '../../../accounts/accounts.ts';
import { AccountManifest, applyAccountManifest } from '../../../accounts/manifest.ts';
import { LIMIT_NAMES, LIMIT_RANGES } from '../../../core/limits.ts';
import { DateTime } from '../../../core/schemas.ts';
import { ManifestSummary } from '../../../definitions/schemas.ts';
import { operation, type OperationTable } from '../../operation.ts';
import { AccountParams } from '../../schemas/common.ts';

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

/** The operator's accounts: create, read, rename, limits, and the whole-account manifest. */
export const adminAccountsRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts',
      summary: 'List accounts',
      response: { 200: Type.Object({ items: Type.Array(Account) }) },
      scope: 'operator',
      handle: async ({ db }) => ({ items: await accounts.listAccounts(db) }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts',
      summary: 'Create an account',
      body: Type.Object(
        {
          name: Type.String({ minLength: 1 }),
          region: Type.Optional(Type.Enum(REGIONS, { description: 'The region the account belongs to' })),
          limits: Type.Optional(LimitsSchema),
        },
        { additionalProperties: false },
      ),
      response: { 201: Account },
      scope: 'operator',
      transaction: true,
      handle: ({ db, services, body }) =>
        accounts.createAccount(db, services.feed, services.config.vendor, { region: services.config.region, ...body }),
    }),
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id',
      summary: 'Get an account',
      params: AccountParams,
      response: { 200: Account },
      scope: 'operator',
      handle: ({ db, params }) => accounts.getAccount(db, params.account_id),
    }),
    operation({
      method: 'PATCH',
      path: '/admin/accounts/:account_id',
      summary: 'Rename an account or replace its limit overrides',
      params: AccountParams,
      body: Type.Object(
        { name: Type.Optional(Type.String({ minLength: 1 })), limits: Type.Optional(LimitsSchema) },
        { additionalProperties: false },
      ),
      response: { 200: Account },
      scope: 'operator',
      transaction: true,
      handle: ({ db, services, params, body }) => accounts.updateAccount(db, services.feed, params.account_id, body),
    }),
    operation({
      method: 'PUT',
      path: '/admin/accounts/:account_id/manifest',
      bodyLimit: 10 * 1024 * 1024,
      summary: 'Apply a manifest to an account (idempotent); answers what it created, changed and left alone',
      params: AccountParams,
      body: AccountManifest,
      response: { 200: ManifestSummary },
      scope: 'operator',
      transaction: true,
      handle: ({ db, services, params, body }) =>
        applyAccountManifest(
          db,
          services.feed,
          services.config.vendor,
          params.account_id,
          body,
          new Date(services.clock()),
        ),
    }),
  ],
};

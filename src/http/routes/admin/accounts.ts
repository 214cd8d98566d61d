import { Type } from 'typebox';
import { REGIONS } from '../../../config.ts';
import * as accounts from '../../../accounts/accounts.ts';
import { deleteAccount } from '../../../accounts/delete.ts';
import {
  AccountManifest,
  applyAccountManifest,
  applyNamedManifest,
  previewAccountManifest,
} from '../../../accounts/manifest.ts';
import { LIMIT_NAMES, LIMIT_RANGES } from '../../../core/limits.ts';
import { DateTime } from '../../../core/schemas.ts';
import { ManifestSummary } from '../../../definitions/schemas.ts';
import { answer, operation, type OperationTable } from '../../operation.ts';
import { NoContent } from '../../schemas/problem.ts';
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

const NamedManifestSummary = Type.Object({ account: Account, ...ManifestSummary.properties });

/** The operator's accounts: create, read, rename, limits, delete, and the whole-account manifest (by id, or by the account's name). */
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
      method: 'DELETE',
      path: '/admin/accounts/:account_id',
      summary:
        'Delete an account and everything of it: profiles, definitions, keys (their tokens stop at once), jobs, imports, exports, mail and files',
      params: AccountParams,
      response: { 204: NoContent },
      scope: 'operator',
      // Its own transaction: the files go once it has committed.
      handle: ({ services, params }) => deleteAccount(services.pool, services, params.account_id),
    }),
    operation({
      method: 'PUT',
      path: '/admin/manifest',
      bodyLimit: 10 * 1024 * 1024,
      summary:
        'Apply a manifest to the account its account.name names, created (201) when no account has that name; nothing changes when it fails',
      query: Type.Object(
        {
          region: Type.Optional(
            Type.Enum(REGIONS, {
              description: 'The region of the account when it is created; the server’s by default',
            }),
          ),
        },
        { additionalProperties: false },
      ),
      body: AccountManifest,
      response: { 200: NamedManifestSummary, 201: NamedManifestSummary },
      scope: 'operator',
      transaction: true,
      handle: async ({ db, services, query, body }) => {
        const { created_account, ...applied } = await applyNamedManifest(
          db,
          { feed: services.feed, vendor: services.config.vendor },
          { manifest: body, region: query.region ?? services.config.region, now: new Date(services.clock()) },
        );
        return answer(created_account ? 201 : 200, applied);
      },
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
          { feed: services.feed, vendor: services.config.vendor },
          { accountId: params.account_id, manifest: body, now: new Date(services.clock()) },
        ),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/manifest/preview',
      bodyLimit: 10 * 1024 * 1024,
      summary:
        'What applying a manifest to an account would create, change and leave alone, or why it would fail; nothing changes',
      params: AccountParams,
      body: AccountManifest,
      response: { 200: ManifestSummary },
      scope: 'operator',
      handle: ({ services, params, body }) =>
        previewAccountManifest(
          services.pool,
          { feed: services.feed, vendor: services.config.vendor },
          { accountId: params.account_id, manifest: body, now: new Date(services.clock()) },
        ),
    }),
  ],
};

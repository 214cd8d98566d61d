import { TIME_ZONE_PROBLEMS } from '../../../aql/time.ts';
import { Type } from 'typebox';
import { WEBHOOK_URL_PROBLEMS } from '../../../webhooks/webhooks.ts';
import { REGIONS } from '../../../config.ts';
import * as accounts from '../../../accounts/accounts.ts';
import { deleteAccount } from '../../../accounts/delete.ts';
import {
  AccountManifest,
  applyAccountManifest,
  applyNamedManifest,
  getAccountManifest,
  previewAccountManifest,
} from '../../../accounts/manifest.ts';
import { LIMIT_NAMES, LIMIT_RANGES } from '../../../core/limits.ts';
import type { ProblemCode } from '../../../core/problems.ts';
import { AccountName, DateTime } from '../../../core/schemas.ts';
import { ManifestSummary } from '../../../definitions/schemas.ts';
import { answer, operation, type OperationTable } from '../../operation.ts';
import { NoContent } from '../../schemas/problem.ts';
import type { Services } from '../../../services.ts';
import { AccountParams } from '../../schemas/common.ts';
import { AQL_PROBLEMS } from '../../../aql/errors.ts';

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
const Account = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    region: Type.String(),
    limit_overrides: Type.Record(Type.String(), Type.Union([Type.Integer(), Type.Null()])),
    limits: Type.Record(Type.String(), Type.Union([Type.Integer(), Type.Null()]), {
      description: 'The limits in force',
    }),
    created_at: DateTime,
  },
  { title: 'Account' },
);

const NamedManifestSummary = Type.Object({ account: Account, ...ManifestSummary.properties });

/** What the operations that apply or preview a manifest share: its size limit, its refusals, what an apply needs. */
const MANIFEST_BODY_LIMIT = 10 * 1024 * 1024;
const MANIFEST_REFUSALS: ProblemCode[] = [
  ...AQL_PROBLEMS,
  ...TIME_ZONE_PROBLEMS,
  'AUD-1109',
  'AUD-1113',
  'AUD-1114',
  'AUD-1115',
  'AUD-1116',
  'AUD-1117',
  'AUD-1607',
  'AUD-2101',
  ...WEBHOOK_URL_PROBLEMS,
];
const manifestDeps = (services: Services) => ({
  feed: services.feed,
  vendor: services.config.vendor,
  serverSecret: services.serverSecret,
});

/** The operator's accounts: create, read, rename, limits, delete, and the whole-account manifest (by id, or by the account's name). */
export const adminAccountsRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts',
      summary: 'List accounts',
      description: 'Every account of this service, with its limits and their overrides.',
      response: { 200: Type.Object({ items: Type.Array(Account) }) },
      scope: 'operator',
      handle: async ({ db }) => ({ items: await accounts.listAccounts(db) }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts',
      summary: 'Create an account',
      description:
        'Creates an empty account in a region. Apply a manifest to give it definitions, and create an API key for its clients.',
      body: Type.Object(
        {
          name: AccountName,
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
      description: 'One account, with its limits and their overrides.',
      errors: ['AUD-1110'],
      params: AccountParams,
      response: { 200: Account },
      scope: 'operator',
      handle: ({ db, params }) => accounts.getAccount(db, params.account_id),
    }),
    operation({
      method: 'PATCH',
      path: '/admin/accounts/:account_id',
      summary: 'Change an account',
      description: 'Renames an account or replaces its limit overrides (`null` lifts a limit).',
      errors: ['AUD-1110'],
      params: AccountParams,
      body: Type.Object(
        { name: Type.Optional(AccountName), limits: Type.Optional(LimitsSchema) },
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
      summary: 'Delete an account',
      description:
        'Deletes an account and everything of it: profiles, definitions, keys (their tokens stop at once), jobs, imports, exports, mail and files.',
      errors: ['AUD-1110'],
      params: AccountParams,
      response: { 204: NoContent },
      scope: 'operator',
      // Its own transaction: the files go once it has committed.
      handle: ({ services, params }) => deleteAccount(services.pool, services, params.account_id),
    }),
    operation({
      method: 'PUT',
      path: '/admin/manifest',
      bodyLimit: MANIFEST_BODY_LIMIT,
      summary: 'Apply a manifest by account name',
      description:
        'Applies a manifest (keyspaces, sections, attributes, tags, events, topics, segments, activities) to the account its `account.name` names; creates that account (201) when none has the name. Nothing changes when it fails.',
      errors: ['AUD-1112', 'AUD-1118', ...MANIFEST_REFUSALS],
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
        const { created_account, ...applied } = await applyNamedManifest(db, manifestDeps(services), {
          manifest: body,
          region: query.region ?? services.config.region,
          now: new Date(services.clock()),
        });
        return answer(created_account ? 201 : 200, applied);
      },
    }),
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/manifest',
      summary: 'Read an account as a manifest',
      description:
        'Answers what the account defines as a manifest: its name and limit overrides, keyspaces, channels, sections with their attributes, tags, events, topic folders and topics, segments (their queries as stored, with numeric ids), suppressions and activities. Applying it back to the account creates and changes nothing; edited, it is the starting point of the next apply.',
      errors: ['AUD-1110'],
      params: AccountParams,
      response: { 200: AccountManifest },
      scope: 'operator',
      handle: ({ db, services, params }) => getAccountManifest(db, services.config.vendor, params.account_id),
    }),
    operation({
      method: 'PUT',
      path: '/admin/accounts/:account_id/manifest',
      bodyLimit: MANIFEST_BODY_LIMIT,
      summary: 'Apply a manifest',
      description:
        'Applies a manifest to an account, idempotently, and answers what it created, changed and left alone. Nothing changes when it fails.',
      errors: ['AUD-1110', ...MANIFEST_REFUSALS],
      params: AccountParams,
      body: AccountManifest,
      response: { 200: ManifestSummary },
      scope: 'operator',
      transaction: true,
      handle: ({ db, services, params, body }) =>
        applyAccountManifest(db, manifestDeps(services), {
          accountId: params.account_id,
          manifest: body,
          now: new Date(services.clock()),
        }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/manifest/preview',
      bodyLimit: MANIFEST_BODY_LIMIT,
      summary: 'Preview a manifest',
      description:
        'Answers what applying the manifest to the account would create, change and leave alone, or the refusal the apply would meet; nothing changes (the apply runs in a transaction that is rolled back, so it meets every check of a real one).',
      errors: ['AUD-1110', ...MANIFEST_REFUSALS],
      params: AccountParams,
      body: AccountManifest,
      response: { 200: ManifestSummary },
      scope: 'operator',
      handle: ({ services, params, body }) =>
        previewAccountManifest(services.pool, manifestDeps(services), {
          accountId: params.account_id,
          manifest: body,
          now: new Date(services.clock()),
        }),
    }),
  ],
};

import { Type } from 'typebox';
import { Problem } from '../../../core/problems.ts';
import { DateTime } from '../../../core/schemas.ts';
import { operation, type OperationTable } from '../../operation.ts';
import { AccountId, AccountParams } from '../../schemas/common.ts';
import { NoContent } from '../../schemas/problem.ts';

const KeyParams = Type.Object({ account_id: AccountId, client_id: Type.String() });
const ApiKey = Type.Object({
  client_id: Type.String(),
  name: Type.String(),
  section_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
  created_at: DateTime,
  client_secret: Type.Optional(Type.String({ description: 'Shown only when the key is created' })),
});

/** Whether a rotation deletes the old signing keys at once. */
const RevokeOld = Type.Object(
  {
    revoke_old: Type.Optional(Type.Boolean({ description: 'Stop the old keys at once rather than after 24 hours' })),
  },
  { additionalProperties: false },
);

/** The operator's API keys of an account, and the rotation of the service's token signing key. */
export const adminApiKeysRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/keys',
      summary: 'List API keys',
      description: 'The API keys of the account, without their secrets.',
      params: AccountParams,
      response: { 200: Type.Object({ items: Type.Array(ApiKey) }) },
      scope: 'operator-account',
      handle: async ({ db, scope, services }) => ({ items: await services.apiKeys.listApiKeys(db, scope.accountId) }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/keys',
      summary: 'Create an API key',
      description:
        'Creates a client id and secret, optionally limited to some sections. The secret is shown in this answer only.',
      errors: ['AUD-1111'],
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
      response: { 201: ApiKey },
      scope: 'operator-account',
      handle: ({ db, scope, services, body }) => {
        const sectionIds = body?.section_discriminators?.map((d) => {
          const section = scope.defs.sections.find((s) => s.discriminator === d);
          if (!section) throw new Problem('AUD-1111', `section_discriminators names the unknown section "${d}"`);
          return section.id;
        });
        return services.apiKeys.createApiKey(db, scope.accountId, { name: body?.name, sectionIds: sectionIds ?? null });
      },
    }),
    operation({
      method: 'DELETE',
      path: '/admin/accounts/:account_id/keys/:client_id',
      summary: 'Delete an API key',
      description: 'Deletes an API key: its tokens stop working at once.',
      errors: ['AUD-1'],
      params: KeyParams,
      response: { 204: NoContent },
      scope: 'operator',
      transaction: true,
      handle: ({ db, services, params }) => services.apiKeys.deleteApiKey(db, params.account_id, params.client_id),
    }),
    operation({
      method: 'POST',
      path: '/admin/signing-keys',
      summary: 'Rotate the token signing key',
      description:
        'The old keys keep verifying the tokens they signed until those expire (24 hours), unless revoke_old is true (in the body, as the operator API takes its settings, or in the query): then they are deleted, every token they signed is refused at once, and every client must ask for a new token.',
      query: RevokeOld,
      // A POST without a body (the command line's) is a rotation that keeps the old keys.
      preValidation: async (request) => {
        request.body ??= {};
      },
      body: RevokeOld,
      response: { 201: Type.Object({ kid: Type.String() }) },
      scope: 'operator',
      handle: ({ services, query, body }) =>
        services.apiKeys.rotateSigningKey({ revokeOld: query.revoke_old === true || body.revoke_old === true }),
    }),
  ],
};

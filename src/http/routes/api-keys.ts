import { Type } from 'typebox';
import { operation, type OperationTable } from '../operation.ts';
import { spend } from '../plugins/auth.ts';

const TokenRequest = Type.Object(
  {
    grant_type: Type.Literal('client_credentials', { description: 'Always client_credentials' }),
    client_id: Type.String({ minLength: 1, description: 'Client ID of an API key' }),
    client_secret: Type.String({ minLength: 1, description: 'Secret of the API key' }),
  },
  { additionalProperties: false },
);

const TokenResponse = Type.Object({
  access_token: Type.String({ description: 'Signed JWT to send as "Authorization: Bearer <token>"' }),
  expires_in: Type.Integer({ description: 'Seconds until the token expires (deprecated; read exp in the token)' }),
  token_type: Type.Literal('Bearer'),
});

const Jwks = Type.Object({
  keys: Type.Array(Type.Record(Type.String(), Type.Unknown()), { description: 'Public keys that verify tokens' }),
});

/** POST /oauth/token (SPEC §4.1) and the public signing keys. */
export const apiKeysRoutes: OperationTable = {
  tags: ['auth'],
  operations: [
    operation({
      method: 'POST',
      path: '/oauth/token',
      summary: 'Obtain an access token',
      body: TokenRequest,
      response: { 200: TokenResponse },
      scope: 'public',
      // RFC 6749 §5.1: no cache keeps a token, nor an answer about credentials: set on request, so
      // that every answer has them, refusals of parsing and validation included.
      headers: { 'cache-control': 'no-store', pragma: 'no-cache' },
      handle: async ({ services, request, body }) => {
        const { client_id, client_secret } = body;
        // SPEC §8: token requests are limited per account; unknown clients per address.
        const accountId = await services.apiKeys.accountOfClient(client_id);
        if (accountId) await spend(services, accountId, accountId, 'token_requests_per_minute');
        else await spend(services, null, `ip:${request.ip}`, 'token_requests_per_minute');
        return services.apiKeys.issueToken(
          client_id,
          client_secret,
          async (id) => (await services.accounts.get(id)) ?? undefined,
        );
      },
    }),
    operation({
      method: 'GET',
      path: '/.well-known/jwks.json',
      summary: 'Public keys that verify access tokens',
      response: { 200: Jwks },
      scope: 'public',
      handle: async ({ services }) => services.apiKeys.jwks(),
    }),
  ],
};

import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { callerAccount } from '../../accounts/accounts.ts';
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

/**
 * RFC 6749 §2.3.1: a client may send its id and secret as HTTP Basic credentials instead of body
 * fields (the "Authorize" dialog of the reference at /docs does). They fill the fields the body
 * lacks, before validation, so that a request without either is refused as before.
 */
async function credentialsFromBasic(request: FastifyRequest): Promise<void> {
  const [scheme, encoded] = (request.headers.authorization ?? '').split(' ');
  if (scheme?.toLowerCase() !== 'basic' || !encoded) return;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return;
  const body = (request.body ?? {}) as Record<string, unknown>;
  if (typeof body !== 'object' || Array.isArray(body)) return;
  // Form-encoding of the two parts (RFC 6749 §2.3.1) is undone as the standard asks.
  const part = (text: string) => decodeURIComponent(text.replaceAll('+', ' '));
  try {
    body.client_id ??= part(decoded.slice(0, colon));
    body.client_secret ??= part(decoded.slice(colon + 1));
  } catch {
    return;
  }
  request.body = body;
}

/** POST /oauth/token (SPEC §4.1) and the public signing keys. */
export const apiKeysRoutes: OperationTable = {
  tags: ['auth'],
  operations: [
    operation({
      method: 'POST',
      path: '/oauth/token',
      summary: 'Obtain an access token',
      description:
        'Exchanges the client id and secret of an API key for a signed bearer token (a JWT whose `exp` says when it expires; `expires_in` gives the seconds). The body is JSON or `application/x-www-form-urlencoded`; the credentials may also come as HTTP Basic (`Authorization: Basic base64(client_id:client_secret)`). Token requests are limited per account (10 a minute by default); answers are never cached.',
      errors: ['AUD-1009', 'AUD-1002'],
      body: TokenRequest,
      response: { 200: TokenResponse },
      scope: 'public',
      preValidation: credentialsFromBasic,
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
      path: '/audience/account',
      summary: "The caller's account and API key",
      description:
        "The service's own route (its console's header shows it): the account of the access token, its name, and the API key's client id and name.",
      response: {
        200: Type.Object({
          id: Type.String({ description: 'Account id' }),
          name: Type.String({ description: 'Account name' }),
          key: Type.Object({
            client_id: Type.String({ description: "The API key's client id" }),
            name: Type.String({ description: "The API key's name (empty when it has none)" }),
          }),
        }),
      },
      scope: 'account',
      handle: ({ db, scope, services }) => callerAccount(db, scope, services.apiKeys),
    }),
    operation({
      method: 'GET',
      path: '/.well-known/jwks.json',
      summary: 'Public keys that verify access tokens',
      description:
        'The JSON Web Key Set of the keys that sign access tokens, for services that verify tokens themselves. The old key stays listed for a while after a rotation.',
      response: { 200: Jwks },
      scope: 'public',
      handle: async ({ services }) => services.apiKeys.jwks(),
    }),
  ],
};

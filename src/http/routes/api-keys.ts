import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Services } from '../../services.ts';
import { spend } from '../plugins/auth.ts';
import { responses } from '../schemas/problem.ts';

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
export function apiKeysRoutes(services: Services) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    app.post(
      '/oauth/token',
      {
        config: { auth: 'none' },
        // RFC 6749 §5.1: no cache keeps a token, nor an answer about credentials; set before any
        // step that can refuse (body parsing and validation too), so that every answer has it.
        onRequest: (_request, reply, done) => {
          reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
          done();
        },
        schema: {
          summary: 'Obtain an access token',
          tags: ['auth'],
          security: [],
          body: TokenRequest,
          response: responses({ 200: TokenResponse }),
        },
      },
      async (request) => {
        const { client_id, client_secret } = request.body;
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
    );

    app.get(
      '/.well-known/jwks.json',
      {
        config: { auth: 'none' },
        schema: {
          summary: 'Public keys that verify access tokens',
          tags: ['auth'],
          security: [],
          response: responses({ 200: Jwks }),
        },
      },
      async () => services.apiKeys.jwks(),
    );
  };
}

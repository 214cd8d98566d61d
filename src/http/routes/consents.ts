import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import * as consents from '../../consents/consents.ts';
import { ConsentRequest, Consents, ConsentsQuery } from '../../consents/schemas.ts';
import { ProfileParams, ProfileSectionParams } from '../../profiles/schemas.ts';
import { withTransaction } from '../../store/pool.ts';
import { NoContent, responses } from '../schemas/problem.ts';

/** Consents (SPEC §4.5) and opt-out-all (§4.4) on the routes of ENDPOINTS.md "Consents". */
export function consentsRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['consents'];
    const base = '/v2/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key';

    app.post(`${base}/sections/:section_discriminator/consents`, {
      schema: { summary: 'Create or change a consent', tags, params: ProfileSectionParams, body: ConsentRequest, response: responses({ 201: NoContent, 204: NoContent }) },
    }, async (request, reply) => {
      const scope = await scopeOf(request);
      const outcome = await withTransaction(services.pool, (tx) => consents.createConsent(tx, scope, request.params, request.body));
      return reply.code(outcome === 'created' ? 201 : 204).send();
    });

    app.get(`${base}/sections/:section_discriminator/consents`, {
      schema: { summary: 'Consents of a profile', tags, params: ProfileSectionParams, querystring: ConsentsQuery, response: responses({ 200: Consents }) },
    }, async (request) => {
      return consents.getConsents(services.pool, await scopeOf(request), request.params, request.query);
    });

    app.delete(`${base}/consents/opt-out-all`, {
      schema: { summary: 'Opt a profile out of everything', tags, params: ProfileParams, response: responses({ 204: NoContent }) },
    }, async (request, reply) => {
      const scope = await scopeOf(request);
      await withTransaction(services.pool, (tx) => consents.optOutAll(tx, scope, request.params));
      return reply.code(204).send();
    });
  };
}

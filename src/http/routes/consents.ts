import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import * as consentLists from '../../consents/consent-lists.ts';
import * as consents from '../../consents/consents.ts';
import {
  AddressConsentRequest,
  AddressListParams,
  AddressParams,
  ConsentList,
  ConsentListEvaluation,
  ConsentListParams,
  ConsentListTopic,
  ConsentRequest,
  Consents,
  ConsentsQuery,
  Subscription,
  SubscriptionRequest,
} from '../../consents/schemas.ts';
import { ProfileParams, ProfileSectionParams } from '../../profiles/schemas.ts';
import { withTransaction } from '../../store/pool.ts';
import { Items, SectionParams } from '../schemas/common.ts';
import { NoContent, responses } from '../schemas/problem.ts';

/**
 * Consents (SPEC §4.5) and opt-out-all (§4.4) on the routes of ENDPOINTS.md "Consents", and the
 * deprecated routes of "Legacy consent routes" that released integrations still call.
 */
export function consentsRoutes(services: Services, scopeOf: ScopeOf) {
  const { vendor } = services.config;
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['consents'];
    const base = '/v2/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key';

    app.post(
      `${base}/sections/:section_discriminator/consents`,
      {
        schema: {
          summary: 'Create or change a consent',
          tags,
          params: ProfileSectionParams,
          body: ConsentRequest,
          response: responses({ 201: NoContent, 204: NoContent }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        const outcome = await withTransaction(services.pool, (tx) =>
          consents.createConsent(tx, scope, request.params, request.body),
        );
        return reply.code(outcome === 'created' ? 201 : 204).send();
      },
    );

    app.get(
      `${base}/sections/:section_discriminator/consents`,
      {
        schema: {
          summary: 'Consents of a profile',
          tags,
          params: ProfileSectionParams,
          querystring: ConsentsQuery,
          response: responses({ 200: Consents }),
        },
      },
      async (request) => {
        return consents.getConsents(services.pool, await scopeOf(request), request.params, request.query);
      },
    );

    app.delete(
      `${base}/consents/opt-out-all`,
      {
        schema: {
          summary: 'Opt a profile out of everything',
          tags,
          params: ProfileParams,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        await withTransaction(services.pool, (tx) => consents.optOutAll(tx, scope, request.params));
        return reply.code(204).send();
      },
    );

    // ---- Legacy consent routes: deprecated, kept for released integrations ----
    const legacy = { tags, deprecated: true };
    const address = '/audience/channels/:channel_discriminator/addresses/:address/consents';

    app.get(
      '/audience/sections/:section_discriminator/consent-lists',
      {
        schema: {
          ...legacy,
          summary: 'Consent lists of a section (its topic folders)',
          params: SectionParams,
          response: responses({ 200: Items(ConsentList, "The section's consent lists") }),
        },
      },
      async (request) => {
        return {
          items: consentLists.listConsentLists(await scopeOf(request), vendor, request.params.section_discriminator),
        };
      },
    );

    app.get(
      '/audience/sections/:section_discriminator/consent-lists/:consent_list_discriminator/topics',
      {
        schema: {
          ...legacy,
          summary: 'Topics of a consent list',
          params: ConsentListParams,
          response: responses({ 200: Items(ConsentListTopic, "The topics in the list's folder") }),
        },
      },
      async (request) => {
        return { items: consentLists.listConsentListTopics(await scopeOf(request), vendor, request.params) };
      },
    );

    app.post(
      address,
      {
        schema: {
          ...legacy,
          summary: 'Create or change the consent of an address',
          params: AddressParams,
          body: AddressConsentRequest,
          response: responses({ 204: NoContent }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        await withTransaction(services.pool, (tx) =>
          consentLists.consentAtAddress(tx, scope, vendor, request.params, request.body),
        );
        return reply.code(204).send();
      },
    );

    app.get(
      `${address}/sections/:section_discriminator/consent-lists/:consent_list_discriminator/evaluations`,
      {
        schema: {
          ...legacy,
          summary: 'Topics of a consent list an address has opted in to',
          params: AddressListParams,
          response: responses({ 200: ConsentListEvaluation }),
        },
      },
      async (request) => {
        return consentLists.evaluateConsentList(services.pool, await scopeOf(request), vendor, request.params);
      },
    );

    app.post(
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/subscriptions',
      {
        schema: {
          ...legacy,
          summary: 'Opt a profile in to a topic',
          params: ProfileSectionParams,
          body: SubscriptionRequest,
          response: responses({ 201: Subscription }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        return reply
          .code(201)
          .send(
            await withTransaction(services.pool, (tx) =>
              consentLists.subscribe(tx, scope, vendor, request.params, request.body),
            ),
          );
      },
    );
  };
}

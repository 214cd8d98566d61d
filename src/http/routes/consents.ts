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
import { answer, operation, type OperationTable } from '../operation.ts';
import { Items, SectionParams } from '../schemas/common.ts';
import { NoContent } from '../schemas/problem.ts';

const base = '/v2/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key';
const address = '/audience/channels/:channel_discriminator/addresses/:address/consents';
const scope = 'account';
/** The legacy consent routes: deprecated, kept for released integrations. */
const deprecated = true;

/**
 * Consents (SPEC §4.5) and opt-out-all (§4.4) on the routes of ENDPOINTS.md "Consents", and the
 * deprecated routes of "Legacy consent routes" that released integrations still call.
 */
export const consentsRoutes: OperationTable = {
  tags: ['consents'],
  operations: [
    operation({
      method: 'POST',
      path: `${base}/sections/:section_discriminator/consents`,
      summary: 'Create or change a consent',
      params: ProfileSectionParams,
      body: ConsentRequest,
      response: { 201: NoContent, 204: NoContent },
      scope,
      transaction: true,
      handle: async ({ db, scope, params, body }) =>
        answer((await consents.createConsent(db, scope, params, body)) === 'created' ? 201 : 204),
    }),
    operation({
      method: 'GET',
      path: `${base}/sections/:section_discriminator/consents`,
      summary: 'Consents of a profile',
      params: ProfileSectionParams,
      query: ConsentsQuery,
      response: { 200: Consents },
      scope,
      handle: ({ db, scope, params, query }) => consents.getConsents(db, scope, params, query),
    }),
    operation({
      method: 'DELETE',
      path: `${base}/consents/opt-out-all`,
      summary: 'Opt a profile out of everything',
      params: ProfileParams,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, params }) => consents.optOutAll(db, scope, params),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/consent-lists',
      deprecated,
      summary: 'Consent lists of a section (its topic folders)',
      params: SectionParams,
      response: { 200: Items(ConsentList, "The section's consent lists") },
      scope,
      handle: async ({ scope, services, params }) => ({
        items: consentLists.listConsentLists(scope, services.config.vendor, params.section_discriminator),
      }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/consent-lists/:consent_list_discriminator/topics',
      deprecated,
      summary: 'Topics of a consent list',
      params: ConsentListParams,
      response: { 200: Items(ConsentListTopic, "The topics in the list's folder") },
      scope,
      handle: async ({ scope, services, params }) => ({
        items: consentLists.listConsentListTopics(scope, services.config.vendor, params),
      }),
    }),
    operation({
      method: 'POST',
      path: address,
      deprecated,
      summary: 'Create or change the consent of an address',
      params: AddressParams,
      body: AddressConsentRequest,
      response: { 204: NoContent },
      scope,
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        consentLists.consentAtAddress(db, scope, services.config.vendor, params, body),
    }),
    operation({
      method: 'GET',
      path: `${address}/sections/:section_discriminator/consent-lists/:consent_list_discriminator/evaluations`,
      deprecated,
      summary: 'Topics of a consent list an address has opted in to',
      params: AddressListParams,
      response: { 200: ConsentListEvaluation },
      scope,
      handle: ({ db, scope, services, params }) =>
        consentLists.evaluateConsentList(db, scope, services.config.vendor, params),
    }),
    operation({
      method: 'POST',
      path: '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/subscriptions',
      deprecated,
      summary: 'Opt a profile in to a topic',
      params: ProfileSectionParams,
      body: SubscriptionRequest,
      response: { 201: Subscription },
      scope,
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        consentLists.subscribe(db, scope, services.config.vendor, params, body),
    }),
  ],
};

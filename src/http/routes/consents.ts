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
import { ALL_SECTIONS_PROBLEMS, SECTION_PROBLEMS } from '../../definitions/definitions.ts';
import { KEY_PROBLEMS } from '../../profiles/keys.ts';
import { LOCATE_PROBLEMS, READ_ONLY_PROBLEMS } from '../../profiles/locate.ts';

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
      examples: {
        body: {
          topic_discriminator: 'com.vendor1.topics.user-created.weekly-newsletter',
          channel_discriminator: 'com.vendor1.channels.email',
          type: 'opt-in',
          reason: 'Ticked the newsletter box at checkout',
          source: 'Shop checkout',
        },
      },
      description:
        "Sets a profile's consent to a topic on a channel (opted in, opted out, pending …): 201 when the consent is new, 204 when it changed. A transition the topic does not allow answers 409.",
      errors: [
        ...SECTION_PROBLEMS,
        ...LOCATE_PROBLEMS,
        ...READ_ONLY_PROBLEMS,
        'AUD-1601',
        'AUD-1602',
        'AUD-1603',
        'AUD-1604',
        'AUD-1605',
        'AUD-1606',
        'AUD-1607',
        'AUD-1608',
        'AUD-1609',
        'AUD-1610',
      ],
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
      description:
        'The consents of a profile in a section, by topic and channel, optionally of some consent types (`consent_types`, comma-separated or repeated).',
      errors: [...SECTION_PROBLEMS, ...LOCATE_PROBLEMS, 'AUD-1602', 'AUD-1607', 'AUD-1611'],
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
      description: 'Opts every address of the profile out of every topic of every channel.',
      errors: [...LOCATE_PROBLEMS, ...ALL_SECTIONS_PROBLEMS, ...READ_ONLY_PROBLEMS, 'AUD-1609'],
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
      summary: 'Consent lists of a section',
      description:
        'The consent lists of a section: the older name of its topic folders, for clients written against it.',
      errors: ['AUD-1102', 'AUD-1107'],
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
      description: 'The topics of one consent list (topic folder) of a section.',
      errors: ['AUD-1102', 'AUD-1107', 'AUD-1612'],
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
      description:
        'Sets the consent of an address (not a profile) on a channel to the topics of a consent list: the older consent route, kept for its clients.',
      errors: [
        ...SECTION_PROBLEMS,
        ...KEY_PROBLEMS,
        'AUD-1202',
        'AUD-1601',
        'AUD-1602',
        'AUD-1603',
        'AUD-1606',
        'AUD-1607',
        'AUD-1608',
        'AUD-1609',
        'AUD-1610',
        'AUD-1612',
      ],
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
      summary: 'Topics an address has opted in to',
      description: 'The topics of a consent list the address has opted in to on the channel.',
      errors: [...SECTION_PROBLEMS, ...KEY_PROBLEMS, 'AUD-1202', 'AUD-1607', 'AUD-1612'],
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
      description:
        'Subscribes a profile to a topic: the older subscription route, the same as a consent change to opted in.',
      errors: [
        ...SECTION_PROBLEMS,
        ...LOCATE_PROBLEMS,
        ...READ_ONLY_PROBLEMS,
        'AUD-1601',
        'AUD-1609',
        'AUD-1610',
        'AUD-1611',
        'AUD-1612',
      ],
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

import { Type, type Static } from 'typebox';
import { DateTime, ListedString } from '../core/schemas.ts';

export const CONSENT_TYPES = ['opt-in', 'opt-out', 'pending-opt-in', 'confirmed-opt-in'] as const;
/** The consent types a request may set (the others are refused with AUD-1603). */
const REQUESTED_TYPES = ['opt-in', 'opt-out'];

export const ConsentRequest = Type.Object(
  {
    topic_discriminator: Type.String({ description: 'Topic of the consent' }),
    channel_discriminator: Type.String({ description: 'Channel of the consent' }),
    type: ListedString(REQUESTED_TYPES, {
      description: 'opt-in or opt-out (pending-opt-in and confirmed-opt-in are not supported by the API yet)',
    }),
    reason: Type.String({ minLength: 3, maxLength: 256, description: 'Why the consent changes, 3 to 256 characters' }),
    source: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 256,
        description: 'Where the consent comes from, 3 to 256 characters; "One API" when omitted',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Consent = Type.Object(
  {
    topic_discriminator: Type.String(),
    channel_discriminator: Type.String(),
    type: ListedString(CONSENT_TYPES, { description: 'opt-in, opt-out, pending-opt-in or confirmed-opt-in' }),
    reason: Type.String(),
    source: Type.String(),
    modified_at: DateTime,
  },
  { title: 'Consent' },
);

export const Suppression = Type.Object(
  {
    channel_discriminator: Type.String({ description: 'Channel of the suppressed address' }),
    address: Type.String({ description: 'The suppressed address' }),
    reason: Type.String({ description: 'Why it is suppressed' }),
  },
  { additionalProperties: false },
);

export const Consents = Type.Object({
  items: Type.Array(Consent, { description: "The profile's consents on the section's topics" }),
  suppression: Type.Array(Suppression, {
    description: 'Suppressions of the profile key address and of the address asked about',
  }),
});

export const ConsentsQuery = Type.Object({
  consent_types: Type.Optional(
    Type.Array(Type.String(), { description: 'Only consents of these types (comma-separated or repeated)' }),
  ),
  suppression_channel_discriminator: Type.Optional(
    Type.String({ description: 'With suppression_address: also check this address on this channel' }),
  ),
  suppression_address: Type.Optional(Type.String({ description: 'With suppression_channel_discriminator' })),
});

// ---- Legacy consent routes (deprecated; docs/consents.md "Legacy consent routes") ----

const SectionDiscriminator = Type.String({ description: 'Section discriminator' });
const ConsentListDiscriminator = Type.String({
  description:
    'Consent list discriminator: a topic folder of the section, or its root folder for topics without a folder',
});

export const ConsentList = Type.Object({
  discriminator: Type.String({ description: "Consent list discriminator: the topic folder's" }),
  name: Type.String({ description: "The topic folder's name; the section's name for the root folder" }),
});

export const ConsentListTopic = Type.Object({
  discriminator: Type.String({ description: 'Topic discriminator' }),
  name: Type.String({ description: 'Topic name' }),
});

export const ConsentListParams = Type.Object({
  section_discriminator: SectionDiscriminator,
  consent_list_discriminator: ConsentListDiscriminator,
});
export type ConsentListParams = Static<typeof ConsentListParams>;

export const AddressParams = Type.Object({
  channel_discriminator: Type.String({ description: 'Channel of the address' }),
  address: Type.String({ description: 'The address on that channel (email or mobile number), raw or percent-encoded' }),
});
export type AddressParams = Static<typeof AddressParams>;

export const AddressListParams = Type.Object({ ...AddressParams.properties, ...ConsentListParams.properties });
export type AddressListParams = Static<typeof AddressListParams>;

export const AddressConsentRequest = Type.Object(
  {
    section_discriminator: SectionDiscriminator,
    consent_list_discriminator: Type.Optional(ConsentListDiscriminator),
    topic_discriminator: Type.Optional(
      Type.String({
        description:
          'Topic of the consent; without it, every topic of the list (or of the section, without a list) for the channel',
      }),
    ),
    type: ListedString(REQUESTED_TYPES, {
      description: 'opt-in or opt-out (pending-opt-in and confirmed-opt-in are not supported by the API yet)',
    }),
  },
  { additionalProperties: false },
);
export type AddressConsentRequest = Static<typeof AddressConsentRequest>;

export const ConsentListEvaluation = Type.Object({
  items: Type.Array(
    Type.Object({
      topic_discriminator: Type.String({ description: 'A topic of the list' }),
    }),
    { description: 'The topics of the list the address has opted in to (opt-in or confirmed-opt-in) on the channel' },
  ),
});
export type ConsentListEvaluation = Static<typeof ConsentListEvaluation>;

export const SubscriptionRequest = Type.Object(
  {
    consent_list_discriminator: Type.Optional(ConsentListDiscriminator),
    topic_discriminator: Type.String({ description: 'Topic to opt in to' }),
  },
  { additionalProperties: false },
);
export type SubscriptionRequest = Static<typeof SubscriptionRequest>;

export const Subscription = Type.Object({
  id: Type.String({
    minLength: 1,
    description: 'Identifies the consent: the same profile, topic and channel always give the same id',
  }),
});
export type Subscription = Static<typeof Subscription>;

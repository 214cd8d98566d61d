import { Type } from 'typebox';
import { DateTime } from '../core/schemas.ts';

export const ConsentRequest = Type.Object({
  topic_discriminator: Type.String({ description: 'Topic of the consent' }),
  channel_discriminator: Type.String({ description: 'Channel of the consent' }),
  type: Type.String({ description: 'opt-in or opt-out (pending-opt-in and confirmed-opt-in are not supported by the API yet)' }),
  reason: Type.String({ minLength: 3, maxLength: 256, description: 'Why the consent changes, 3 to 256 characters' }),
  source: Type.Optional(Type.String({ minLength: 3, maxLength: 256, description: 'Where the consent comes from, 3 to 256 characters; "One API" when omitted' })),
}, { additionalProperties: false });

export const Consent = Type.Object({
  topic_discriminator: Type.String(),
  channel_discriminator: Type.String(),
  type: Type.String({ description: 'opt-in, opt-out, pending-opt-in or confirmed-opt-in' }),
  reason: Type.String(),
  source: Type.String(),
  modified_at: DateTime,
});

export const Suppression = Type.Object({
  channel_discriminator: Type.String({ description: 'Channel of the suppressed address' }),
  address: Type.String({ description: 'The suppressed address' }),
  reason: Type.String({ description: 'Why it is suppressed' }),
}, { additionalProperties: false });

export const Consents = Type.Object({
  items: Type.Array(Consent, { description: "The profile's consents on the section's topics" }),
  suppression: Type.Array(Suppression, { description: 'Suppressions of the profile key address and of the address asked about' }),
});

export const ConsentsQuery = Type.Object({
  consent_types: Type.Optional(Type.Array(Type.String(), { description: 'Only consents of these types (comma-separated or repeated)' })),
  suppression_channel_discriminator: Type.Optional(Type.String({ description: 'With suppression_address: also check this address on this channel' })),
  suppression_address: Type.Optional(Type.String({ description: 'With suppression_channel_discriminator' })),
});

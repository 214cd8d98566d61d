import { Type, type Static } from 'typebox';
import { DateTime } from '../core/schemas.ts';

export const UniqueIdentifier = Type.Object(
  {
    keyspace_discriminator: Type.String({ description: 'Keyspace of the key' }),
    profile_key: Type.String({ description: 'The profile key in that keyspace' }),
  },
  { additionalProperties: false, title: 'UniqueIdentifier' },
);
/** A profile as clients name it: a keyspace and a key in it (SPEC §2.2). */
export type UniqueIdentifier = Static<typeof UniqueIdentifier>;

export const ProfileParams = Type.Object({
  keyspace_discriminator: Type.String({ description: 'Keyspace discriminator' }),
  profile_key: Type.String({ description: 'Profile key, raw or percent-encoded' }),
});

export const ProfileSectionParams = Type.Object({
  keyspace_discriminator: Type.String({ description: 'Keyspace discriminator' }),
  profile_key: Type.String({ description: 'Profile key, raw or percent-encoded' }),
  section_discriminator: Type.String({ description: 'Section discriminator' }),
});
/** A profile and the section of its data that an operation reads or writes. */
export type IdentifierInSection = Static<typeof ProfileSectionParams>;

export const CreateProfileParams = Type.Object({
  keyspace_discriminator: Type.String({ description: 'Keyspace discriminator' }),
  section_discriminator: Type.String({ description: 'Section discriminator' }),
});

export const CreateProfile = Type.Object(
  {
    profile_key: Type.String({ description: 'The key of the new profile' }),
  },
  { additionalProperties: false },
);

export const Merge = Type.Object(
  {
    profiles: Type.Array(UniqueIdentifier, { description: 'Exactly two profiles' }),
  },
  { additionalProperties: false },
);

export const Switch = Type.Object(
  {
    from: UniqueIdentifier,
    to: UniqueIdentifier,
  },
  { additionalProperties: false },
);

/** A JSON merge patch: its keys are data (attribute or tag identifiers), so any key is allowed. */
export const MergePatch = Type.Record(Type.String(), Type.Unknown(), { description: 'JSON merge patch; null clears' });

export const AttributeValues = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Attribute version id → value',
});
export const TagValues = Type.Record(Type.String(), Type.Boolean(), { description: 'Tag discriminator → true' });

export const KeyUpdateQuery = Type.Object({
  profile_key_update_method: Type.Optional(
    Type.Union([Type.Literal('delete'), Type.Literal('merge')], {
      description: "How to change a profile key whose new value is another profile's key",
    }),
  ),
});

const NewEvent = Type.Object(
  {
    event_time: DateTime,
    version_id: Type.String({ description: 'Event version id' }),
    data: Type.Record(Type.String(), Type.Unknown(), { description: 'Event data, by field name' }),
  },
  { additionalProperties: false },
);
export type NewEvent = Static<typeof NewEvent>;

export const NewEvents = Type.Object(
  {
    items: Type.Optional(Type.Array(NewEvent, { maxItems: 100, description: 'At most 100 events' })),
  },
  { additionalProperties: false },
);

export const EventsQuery = Type.Object({
  event_version_ids: Type.Optional(
    Type.Array(Type.String(), { description: 'Only events of these versions (comma-separated or repeated)' }),
  ),
});

const StoredEvent = Type.Object({
  event_time: DateTime,
  version_id: Type.String(),
  data: Type.Unknown(),
  correlation_id: Type.String(),
  created_at: DateTime,
});
export type StoredEvent = Static<typeof StoredEvent>;

export const Events = Type.Object({
  items: Type.Array(StoredEvent, { description: 'Newest first by event_time' }),
  truncated: Type.Optional(
    Type.Boolean({ description: 'Present and true when older events were left out to stay under 300 KB' }),
  ),
});

export const VersionParams = Type.Object({
  keyspace_discriminator: Type.String(),
  profile_key: Type.String(),
  section_discriminator: Type.String(),
  version_id: Type.String({ description: 'Attribute version id' }),
});

export const AttributeParams = Type.Object({
  keyspace_discriminator: Type.String(),
  profile_key: Type.String(),
  section_discriminator: Type.String(),
  attribute_discriminator: Type.String({ description: 'Attribute discriminator' }),
});

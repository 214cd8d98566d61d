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

export const HistoryQuery = Type.Object({
  limit: Type.Integer({
    minimum: 1,
    maximum: 500,
    default: 50,
    description: 'At most this many past values per attribute, newest first',
  }),
});

const PastValue = Type.Object({
  value: Type.Unknown(),
  set_at: DateTime,
  replaced_at: DateTime,
});

export const AttributeHistory = Type.Object({
  items: Type.Array(
    Type.Object({
      version_id: Type.String({ description: 'Attribute version id' }),
      attribute_discriminator: Type.String(),
      current: Type.Union([Type.Object({ value: Type.Unknown(), set_at: DateTime }), Type.Null()], {
        description: 'The value the profile shows now and when it was set; null when it shows none',
      }),
      past: Type.Array(PastValue, { description: 'Values replaced (by another value or a clear), newest first' }),
      past_total: Type.Integer({ description: 'How many past values there are in all (`past` holds at most `limit`)' }),
    }),
    { description: 'Per attribute version with a value now or before, in version order' },
  ),
});
export type AttributeHistory = Static<typeof AttributeHistory>;

export const MergeCluster = Type.Object({
  items: Type.Array(
    Type.Object({
      canonical: Type.Boolean({
        description: 'Whether this is the canonical profile, whose keys answer for the cluster',
      }),
      merged_at: Type.Union([DateTime, Type.Null()], {
        description:
          'When the profile was merged into the cluster; null for the canonical profile (and for members merged before the service recorded it)',
      }),
      keys: Type.Array(UniqueIdentifier, { description: 'Its keys, in the keyspaces open to the API' }),
    }),
    { description: 'The canonical profile first, then the members in the order they were created' },
  ),
});
export type MergeCluster = Static<typeof MergeCluster>;

export const ProfileListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'At most this many profiles' }),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: "The previous page's `next_cursor`: the page after it",
      }),
    ),
    keyspace: Type.Optional(Type.String({ description: 'The keyspace `key_prefix` is searched in' })),
    key_prefix: Type.Optional(
      Type.String({ minLength: 1, maxLength: 1000, description: 'Profiles with a key in `keyspace` that starts so' }),
    ),
    attribute: Type.Optional(
      Type.String({ description: 'Profiles whose value of this attribute (its discriminator) is `value`' }),
    ),
    value: Type.Optional(
      Type.String({ maxLength: 10000, description: "The attribute's value, written as text: a number, true or false" }),
    ),
  },
  { additionalProperties: false },
);
export type ProfileListQuery = Static<typeof ProfileListQuery>;

export const ProfileList = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        keys: Type.Array(UniqueIdentifier, {
          description: "The keys of the profile's merge cluster, its export key last",
        }),
        attributes: Type.Record(Type.String(), Type.Unknown(), {
          description: 'The values it shows, by attribute discriminator (current versions, hidden attributes left out)',
        }),
        updated_at: DateTime,
      }),
    ),
    next_cursor: Type.Union([Type.String(), Type.Null()], {
      description: 'The `cursor` of the next page; null on the last one',
    }),
  },
  { title: 'ProfileList' },
);
export type ProfileList = Static<typeof ProfileList>;

export const GrowthQuery = Type.Object(
  {
    days: Type.Integer({
      minimum: 1,
      maximum: 366,
      default: 30,
      description: 'The last this many UTC days, today included',
    }),
  },
  { additionalProperties: false },
);

export const Growth = Type.Object(
  {
    items: Type.Array(
      Type.Object({
        day: Type.String({ format: 'date', description: 'A UTC day' }),
        new_profiles: Type.Integer({ description: "The section's profiles created that day" }),
        total_profiles: Type.Integer({ description: "The section's profiles at the end of that day" }),
      }),
      { description: 'One per day, oldest first' },
    ),
  },
  { title: 'ProfileGrowth' },
);
export type Growth = Static<typeof Growth>;

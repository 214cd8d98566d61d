import { Type, type Static } from 'typebox';
import { AccountName, DateTime, KeyspacePermissions } from '../core/schemas.ts';
import { ATTRIBUTE_TYPES, type AttributeType } from '../core/definitions.ts';

export const Keyspace = Type.Object({
  discriminator: Type.String({ description: 'Keyspace identifier' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'What the keys of this keyspace are' }),
  manage_subscriptions: Type.Boolean({ description: 'Whether consents can be managed through this keyspace' }),
});

export const Channel = Type.Object({
  discriminator: Type.String({ description: 'Channel identifier' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'Description' }),
});

export const Section = Type.Object({
  discriminator: Type.String({ description: 'Section identifier, com.<vendor>1.sections.user-created.<name>' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'Description' }),
  id: Type.String({ description: 'Numeric section id, as used in AQL section(<id>)' }),
});

const TypeVersion = <T extends Parameters<typeof Type.Array>[0]>(typeItem: T, typeDescription: string) =>
  Type.Object({
    id: Type.String({ description: 'Version id' }),
    type: Type.Array(typeItem, { description: typeDescription }),
    deprecated_at: Type.Union([DateTime, Type.Null()], {
      description: 'When the version was deprecated; null while it is current',
    }),
    valid_from: DateTime,
  });

export const AttributeDefinition = Type.Object({
  discriminator: Type.String({ description: 'Attribute identifier' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'Description' }),
  versions: Type.Array(
    TypeVersion(Type.String(), 'Type names: Text, True/False, Date, Timestamp, Number, Number with decimal, Struct'),
    {
      description: 'Versions of the attribute type',
    },
  ),
  keyspace_permissions: Type.Optional(KeyspacePermissions),
});

export const Tag = Type.Object(
  {
    discriminator: Type.String({ description: 'Tag identifier' }),
    name: Type.String({ description: 'Display name, 1 to 255 characters' }),
    id: Type.String({ description: 'Numeric tag id' }),
    keyspace_permissions: Type.Optional(KeyspacePermissions),
  },
  { title: 'Tag' },
);

export const EventField = Type.Object(
  {
    name: Type.String({ description: 'Field name in the event data' }),
    type: Type.String({ description: 'Field type name' }),
  },
  { additionalProperties: true },
);

export const EventDefinition = Type.Object({
  discriminator: Type.String({ description: 'Event identifier' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'Description' }),
  versions: Type.Array(TypeVersion(EventField, 'The fields of the event data'), {
    description: 'Versions of the event type',
  }),
  keyspace_permissions: Type.Optional(KeyspacePermissions),
});

export const Topic = Type.Object({
  discriminator: Type.String({ description: 'Topic identifier' }),
  id: Type.String({ description: 'Numeric topic id' }),
  name: Type.String({ description: 'Display name' }),
  description: Type.String({ description: 'Description' }),
  folder_discriminator: Type.String({ description: 'The folder holding the topic' }),
});

export interface FolderNode {
  discriminator: string;
  name: string;
  subfolders: FolderNode[];
}
const Subfolder = Type.Object({
  discriminator: Type.String({ description: 'Folder identifier' }),
  name: Type.String({ description: 'Display name' }),
  subfolders: Type.Array(Type.Unknown(), { description: 'Folders inside this one, of the same shape' }),
});

export const FolderTree = Type.Object({
  discriminator: Type.String({ description: 'The root folder of the section' }),
  subfolders: Type.Array(Subfolder, { description: 'Top-level folders' }),
});

export const SegmentVersion = Type.Object(
  {
    id: Type.String({ description: 'Version id' }),
    query: Type.String({ description: 'AQL query of this version' }),
  },
  { title: 'SegmentVersion' },
);

export const Segment = Type.Object(
  {
    discriminator: Type.String({ description: 'Segment identifier' }),
    name: Type.String({ description: 'Display name' }),
    description: Type.String({ description: 'Description' }),
    versions: Type.Array(SegmentVersion, { description: 'Versions, oldest first' }),
  },
  { title: 'Segment' },
);

export const TagName = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, description: 'Tag name, 1 to 255 characters' }),
  },
  { additionalProperties: false },
);

// ---- Integrations (docs/manifest.md "Integrations") ----

export const IntegrationSystem = Type.String({
  pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
  maxLength: 64,
  description: 'The connected system, a lower-case word such as magento: the last part of its keyspace discriminator',
});

export const Integration = Type.Object(
  {
    system: Type.String({ description: 'The connected system' }),
    discriminator: Type.String({ description: 'Its keyspace, com.<vendor>1.integrations.keyspaces.<8 hex>.<system>' }),
  },
  { title: 'Integration' },
);
export type Integration = Static<typeof Integration>;

// ---- The account manifest (docs/manifest.md) ----

const Permissions = Type.Optional(KeyspacePermissions);
const Text = (description: string) => Type.String({ minLength: 1, description });
const OptionalText = (description: string) => Type.Optional(Type.String({ description }));
const ManifestVersion = <T extends Parameters<typeof Type.Array>[0]>(typeItem: T) =>
  Type.Object(
    {
      type: Type.Array(typeItem, { minItems: 1 }),
      deprecated_at: Type.Optional(Type.Union([DateTime, Type.Null()])),
      valid_from: Type.Optional(DateTime),
    },
    { additionalProperties: false },
  );

export const Manifest = Type.Object(
  {
    account: Type.Optional(
      Type.Object(
        {
          name: Type.Optional(AccountName),
          limits: Type.Optional(
            Type.Record(Type.String(), Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]), {
              description: 'Overrides of the default limits; null lifts one',
            }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    keyspaces: Type.Optional(
      Type.Array(
        Type.Object(
          {
            discriminator: Text('Keyspace discriminator'),
            name: Type.Optional(Text('Display name')),
            description: OptionalText('Description'),
            manage_subscriptions: Type.Optional(Type.Boolean()),
            api_access: Type.Optional(
              Type.Boolean({ description: 'Whether profiles may be accessed through the API in this keyspace' }),
            ),
            mapped_attribute: Type.Optional(Type.Union([Type.String(), Type.Null()])),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    channels: Type.Optional(
      Type.Array(
        Type.Object(
          {
            discriminator: Text('Channel discriminator'),
            name: Text('Display name'),
            description: OptionalText('Description'),
            address_attribute: Type.Optional(Type.Union([Type.String(), Type.Null()])),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    sections: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Text('Section name'),
            discriminator: Type.Optional(Text('Section discriminator; derived from the name when omitted')),
            description: OptionalText('Description'),
            ecommerce_connected: Type.Optional(
              Type.Boolean({ description: 'Whether an e-commerce integration is connected' }),
            ),
            attributes: Type.Optional(
              Type.Array(
                Type.Object(
                  {
                    name: Text('Display name'),
                    discriminator: Type.Optional(Text('Attribute discriminator')),
                    description: OptionalText('Description'),
                    hidden: Type.Optional(Type.Boolean()),
                    ecommerce: Type.Optional(
                      Type.Boolean({ description: 'Listed only while an e-commerce integration is connected' }),
                    ),
                    keyspace_permissions: Permissions,
                    versions: Type.Array(
                      ManifestVersion(
                        Type.Unsafe<AttributeType>({
                          type: 'string',
                          enum: [...ATTRIBUTE_TYPES],
                          description:
                            'Type name: Text, True/False, Date, Timestamp, Number, Number with decimal or Struct',
                        }),
                      ),
                      { minItems: 1 },
                    ),
                  },
                  { additionalProperties: false },
                ),
              ),
            ),
            tags: Type.Optional(
              Type.Array(
                Type.Object(
                  {
                    name: Type.String({ minLength: 1, maxLength: 255 }),
                    discriminator: Type.Optional(Text('Tag discriminator')),
                    hidden: Type.Optional(Type.Boolean()),
                    keyspace_permissions: Permissions,
                  },
                  { additionalProperties: false },
                ),
              ),
            ),
            events: Type.Optional(
              Type.Array(
                Type.Object(
                  {
                    name: Text('Display name'),
                    discriminator: Type.Optional(Text('Event discriminator')),
                    description: OptionalText('Description'),
                    hidden: Type.Optional(Type.Boolean()),
                    keyspace_permissions: Permissions,
                    versions: Type.Array(ManifestVersion(EventField), { minItems: 1 }),
                  },
                  { additionalProperties: false },
                ),
              ),
            ),
            topic_folders: Type.Optional(
              Type.Array(
                Type.Object(
                  {
                    name: Text('Display name'),
                    discriminator: Type.Optional(Text('Folder discriminator')),
                    parent: Type.Optional(Text('Discriminator of the parent folder; the root when omitted')),
                  },
                  { additionalProperties: false },
                ),
              ),
            ),
            topics: Type.Optional(
              Type.Array(
                Type.Object(
                  {
                    name: Text('Display name'),
                    discriminator: Type.Optional(Text('Topic discriminator')),
                    description: OptionalText('Description'),
                    folder: Type.Optional(Text('Folder discriminator; the root when omitted')),
                    channel: Type.Optional(Text('Channel discriminator, for a channel-specific topic')),
                  },
                  { additionalProperties: false },
                ),
              ),
            ),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    integrations: Type.Optional(
      Type.Array(Type.Object({ system: IntegrationSystem }, { additionalProperties: false }), {
        description: 'Integrations to connect: each gets its keyspace once, applying again keeps it',
      }),
    ),
    segments: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Text('Display name'),
            discriminator: Type.Optional(Text('Segment discriminator')),
            description: OptionalText('Description'),
            section: Type.Optional(
              Text('Section whose ids {section}, {attribute:…} and {event:…} in the queries refer to'),
            ),
            versions: Type.Array(
              Type.Object(
                { query: Text('AQL query; may hold {section}, {attribute:DISCRIMINATOR@N}, {event:DISCRIMINATOR@N}') },
                { additionalProperties: false },
              ),
              { minItems: 1 },
            ),
            live: Type.Optional(
              Type.Union(
                [
                  Type.Object(
                    { time_zone: Text('IANA time zone the membership is evaluated in') },
                    { additionalProperties: false },
                  ),
                  Type.Null(),
                ],
                {
                  description:
                    'Kept live (docs/aql.md "Live segments"): members kept by the writes, entries and exits sent as webhook events; null: not live; absent: as it is',
                },
              ),
            ),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    suppressions: Type.Optional(
      Type.Array(
        Type.Object(
          {
            channel_discriminator: Text('Channel of the address'),
            address: Text('The address that receives no marketing on the channel'),
            reason: Text('Why'),
          },
          { additionalProperties: false },
        ),
      ),
    ),
  },
  { additionalProperties: false, description: 'A declarative description of an account (docs/manifest.md)' },
);

export type Manifest = Static<typeof Manifest>;

const Items = (description: string) => Type.Array(Type.String(), { description });
/** What applying a manifest did, each item named by its kind and discriminator ("section com.vendor1.sections.user-created.shop"). */
export const ManifestSummary = Type.Object({
  created: Items('Items the manifest created'),
  changed: Items('Items whose settings the manifest changed'),
  unchanged: Items('The account, its definitions and suppressions that stayed as they were'),
});
export type ManifestSummary = Static<typeof ManifestSummary>;
/** An attribute as a manifest declares it. */
export type ManifestAttribute = NonNullable<NonNullable<Manifest['sections']>[number]['attributes']>[number];

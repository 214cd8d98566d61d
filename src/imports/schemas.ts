import { Type, type Static, type TProperties, type TSchema } from 'typebox';
import { DateTime, ListedString } from '../core/schemas.ts';

const Column = (description: string) => Type.String({ minLength: 1, description });

/** A consent of a consent mapping; `address` holds version 1's address column, a parameter so each version's static type is exact. */
const Consent = <A extends TProperties>(address: A) =>
  Type.Object(
    {
      resubscribe_if_opted_out: Type.Optional(Type.Boolean({ description: 'Turn an opted-out consent back' })),
      field_selector: Column('Column whose cell says whether to set the consent (empty, 0, false, no: not)'),
      ...address,
      channel_discriminator: Type.Optional(
        Type.String({ description: 'Channel; inferred from a channel-specific topic' }),
      ),
      topic_discriminator: Type.String({ description: 'Topic of the consent' }),
      type: Type.String({ description: 'Consent type to set' }),
    },
    { additionalProperties: false },
  );

const common = <C extends TSchema>(consent: C) => ({
  options: Type.Optional(
    Type.Object(
      {
        update_existing_profiles: Type.Optional(
          Type.Boolean({ description: 'Update profiles that exist (default true)' }),
        ),
        clear_existing_attributes: Type.Optional(
          Type.Boolean({ description: 'Let an empty cell clear the attribute (default false)' }),
        ),
      },
      { additionalProperties: false },
    ),
  ),
  consent_mappings: Type.Optional(
    Type.Array(Type.Object({ consents: Type.Array(consent) }, { additionalProperties: false }), {
      maxItems: 5,
      description: 'At most 5',
    }),
  ),
  tag_mappings: Type.Optional(
    Type.Array(
      Type.Object(
        { tag_discriminator: Type.String({ description: 'Tag set on every imported profile' }) },
        { additionalProperties: false },
      ),
      { maxItems: 100, description: 'At most 100' },
    ),
  ),
  attribute_mappings: Type.Array(
    Type.Object(
      {
        field_selector: Column('Column of the file'),
        attribute_version_id: Type.String({ description: 'Attribute version the column is written to' }),
      },
      { additionalProperties: false },
    ),
    { minItems: 1, maxItems: 100, description: '1 to 100' },
  ),
});

export const ImportV1 = Type.Object(
  {
    keyspace_mappings: Type.Array(
      Type.Object(
        {
          keyspace_discriminator: Type.String(),
          field_selector: Column('Column holding the key'),
          merge_profiles: Type.Optional(
            Type.Boolean({ description: 'Merge profiles a row names in several keyspaces' }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 10, description: '1 to 10' },
    ),
    ...common(Consent({ address_field_selector: Type.Optional(Column('Column holding the address')) })),
  },
  { additionalProperties: false },
);

export const ImportV2 = Type.Object(
  {
    keyspace_mapping: Type.Object(
      {
        keyspace_discriminator: Type.String(),
        field_selector: Column('Column holding the key'),
      },
      { additionalProperties: false },
    ),
    ...common(Consent({})),
  },
  { additionalProperties: false },
);

export type ImportV1 = Static<typeof ImportV1>;
export type ImportV2 = Static<typeof ImportV2>;
/** An import request with the version whose schema its body was checked against: code narrows on `version`. */
export type ImportRequest = { version: 1; body: ImportV1 } | { version: 2; body: ImportV2 };

export const ImportCreated = Type.Object(
  {
    import_id: Type.String(),
    file_upload_url: Type.String({ description: 'Where to POST the multipart upload form' }),
    file_upload_body: Type.Record(Type.String(), Type.String(), {
      description: 'Form fields to send, in this order, before the file part',
    }),
    file_upload_url_expires_at: DateTime,
  },
  { title: 'ImportCreated' },
);

export const ImportParams = Type.Object({ section_discriminator: Type.String(), import_id: Type.String() });

export const ImportStatus = Type.Object(
  {
    import_id: Type.String(),
    result: Type.Object({
      status: ListedString(['waiting_for_file', 'queued', 'in_progress', 'completed', 'error'], {
        description: 'waiting_for_file, queued, in_progress, completed or error',
      }),
      profiles_found: Type.Integer({ description: 'Data rows read' }),
      profiles_processed: Type.Integer({ description: 'Rows applied' }),
      profiles_failed: Type.Integer({ description: 'Rows refused' }),
      message: Type.Optional(Type.String({ description: 'Why the import ended in error' })),
    }),
    report: Type.Object(
      {
        profiles_new: Type.Integer(),
        profiles_updated: Type.Integer(),
        profiles_not_changed: Type.Integer(),
        profiles_failed: Type.Integer(),
        failures: Type.Array(
          Type.Object({
            line: Type.Integer({ description: 'Line in the file (the header is line 1)' }),
            reason: Type.String(),
          }),
          { description: 'The first 1000 failed rows' },
        ),
      },
      { description: 'Statistics and error details: the first 1000 failed rows with their line and reason' },
    ),
  },
  { title: 'ImportStatus' },
);

export const ImportListQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 500, default: 50, description: 'At most this many, newest first' }) },
  { additionalProperties: false },
);

export const ImportList = Type.Object({
  items: Type.Array(
    Type.Object({
      import_id: Type.String(),
      ...ImportStatus.properties.result.properties,
      rows_total: Type.Union([Type.Integer(), Type.Null()], {
        description:
          'Data rows of the file (its lines after the header), counted when it was uploaded; null before. Progress is profiles_found of this',
      }),
      created_at: DateTime,
      finished_at: Type.Union([DateTime, Type.Null()], { description: 'When it completed or ended in error' }),
    }),
    { description: 'Imports of the section, newest first' },
  ),
});

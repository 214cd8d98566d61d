import { Type, type Static, type TSchema } from 'typebox';
import { DateTime, ListedString } from '../core/schemas.ts';
import { SegmentChoice } from '../segments/schemas.ts';

/** A column name of an export file. */
const FieldName = Type.String({ minLength: 1, description: 'Name of the column in the file' });

const Timezone = Type.String({ description: "IANA time zone of the segments' time windows" });
const Filter = Type.Optional(
  Type.String({
    description:
      'Which profiles: a logical expression over the names with ! (not), & (and), | (or) and parentheses; all names joined by | when omitted',
  }),
);

/** The segments of a request by consent: which profiles, and a column per name. */
export const SegmentsByName = Type.Object(
  {
    timezone: Timezone,
    segment_discriminators: Type.Record(Type.String(), Type.String(), {
      minProperties: 1,
      description:
        'Segment name → discriminator of a stored segment (its latest version); each name is a column of the file',
    }),
    filter: Filter,
  },
  { additionalProperties: false },
);

/** The segments of the duplicate export: stored segments or AQL queries, by name. */
export const SegmentsByNameOrQuery = Type.Object(
  {
    timezone: Timezone,
    segment_discriminators: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description:
          'Segment name → discriminator of a stored segment (its latest version); not with segment_definitions',
      }),
    ),
    segment_definitions: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: 'Segment name → AQL query; not with segment_discriminators',
      }),
    ),
    filter: Filter,
  },
  { additionalProperties: false },
);
export type SegmentsByNameOrQuery = Static<typeof SegmentsByNameOrQuery>;

const AttributeColumn = Type.Object(
  {
    field_name: FieldName,
    attribute_version_id: Type.String({ description: 'Attribute version of the section' }),
  },
  { additionalProperties: false },
);
export type AttributeColumn = Static<typeof AttributeColumn>;
const TagColumn = Type.Object(
  {
    field_name: FieldName,
    tag_discriminator: Type.String({ description: 'Tag of the section; its column holds 1 when set, else 0' }),
  },
  { additionalProperties: false },
);
export type TagColumn = Static<typeof TagColumn>;
/** SPEC §8: at most 75 attributes and 25 tags per profile export. */
const Attributes = Type.Optional(
  Type.Array(AttributeColumn, { maxItems: 75, description: 'At most 75 attribute columns' }),
);
const Tags = Type.Optional(Type.Array(TagColumn, { maxItems: 25, description: 'At most 25 tag columns' }));
const Limit = Type.Optional(Type.Integer({ minimum: 1, description: 'At most this many profiles, chosen at random' }));
const ConsentList = Type.Optional(
  Type.String({ description: 'Deprecated: accepted and not used; the topics say what is exported' }),
);

/** The fields shared by the consent export and its count (SPEC §4.7). */
const byConsent = {
  section_discriminator: Type.String({ description: 'Section of the topics and of the exported values' }),
  consent_list_discriminator: ConsentList,
  topic_discriminators: Type.Array(Type.String(), {
    minItems: 1,
    maxItems: 100,
    description: '1 to 100 topics of the section',
  }),
  channel_discriminator: Type.Optional(
    Type.String({ description: 'The email or SMS channel; not together with channels' }),
  ),
  channels: Type.Optional(
    Type.Array(
      Type.Object(
        {
          field_name: FieldName,
          channel_discriminator: Type.String({ description: 'The email or SMS channel' }),
        },
        { additionalProperties: false },
      ),
      {
        minItems: 1,
        maxItems: 2,
        description:
          '1 to 2 channels, each a column holding the address of profiles consented on it; not together with channel_discriminator',
      },
    ),
  ),
  segments: Type.Optional(SegmentsByName),
  duplicate_address_filter: Type.Optional(
    Type.Union([Type.Literal('oldest'), Type.Literal('latest'), Type.Literal('keep')], {
      description:
        'Among profiles sharing an address: keep the least recently updated (oldest), the most recently updated (latest), or all (keep, the default)',
    }),
  ),
};

export const ConsentExportBody = Type.Object(
  {
    ...byConsent,
    attributes: Attributes,
    tags: Tags,
    limit: Limit,
    exclude_unsubscribed_profiles: Type.Optional(
      Type.Boolean({
        description:
          'Leave out profiles that may not be contacted on any of the topics through any of the channels, and add the column subscribed',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ConsentExportBody = Static<typeof ConsentExportBody>;

export const ConsentCountBody = Type.Object(byConsent, { additionalProperties: false });
export type ConsentCountBody = Static<typeof ConsentCountBody>;

export const DuplicateExportBody = Type.Object(
  {
    section_discriminator: Type.String({
      description: 'Section of the attribute, the topics and every value exported',
    }),
    consent_list_discriminator: ConsentList,
    topic_discriminators: Type.Optional(
      Type.Array(Type.String(), {
        minItems: 1,
        maxItems: 100,
        description: 'With channel_discriminator: 1 to 100 topics of the section',
      }),
    ),
    channel_discriminator: Type.Optional(
      Type.String({
        description:
          'The email or SMS channel: a column with the address of profiles that may be contacted on it for one of the topics',
      }),
    ),
    segments: Type.Optional(SegmentsByNameOrQuery),
    find_duplicates_by_attribute_version_id: Type.String({
      description: 'The attribute version whose value profiles share',
    }),
    attributes: Attributes,
    tags: Tags,
    limit: Limit,
  },
  { additionalProperties: false },
);
export type DuplicateExportBody = Static<typeof DuplicateExportBody>;

export const SegmentExportBody = Type.Object(
  {
    section_discriminator: Type.String({ description: 'Section of every value exported' }),
    segment: SegmentChoice,
    known_profiles: Type.Optional(
      Type.Union([Type.Boolean(), Type.Null()], {
        description: 'true: known profiles only; false: unknown only; null: all',
      }),
    ),
    attributes: Attributes,
    tags: Tags,
    limit: Limit,
  },
  { additionalProperties: false },
);
export type SegmentExportBody = Static<typeof SegmentExportBody>;

/** The profile in segment event export (SPEC §2.16, §4.7): values and events of profiles across sections. */
/** Which profiles an event export holds: those of a stored segment. */
const SegmentFilter = {
  timezone: Timezone,
  discriminator: Type.String({ description: 'A stored segment' }),
  version_id: Type.Optional(Type.String({ description: 'A version of the segment; its latest when omitted' })),
};

export const EventExportBody = Type.Object(
  {
    segment_filter: Type.Optional(
      Type.Object(SegmentFilter, {
        additionalProperties: false,
        description:
          'Only the profiles that match this segment when the file is written; every profile of the account when omitted',
      }),
    ),
    attributes: Type.Optional(
      Type.Array(
        Type.Object(
          {
            section_discriminator: Type.String({ description: 'Section of the attribute' }),
            attribute_version_id: Type.String({
              description: 'A version of a visible attribute of the section: the key of its value in the file',
            }),
          },
          { additionalProperties: false },
        ),
        {
          maxItems: 75,
          description: 'At most 75 attributes; a request with no attribute and no tag exports no profile',
        },
      ),
    ),
    tags: Type.Optional(
      Type.Array(
        Type.Object(
          {
            section_discriminator: Type.String({ description: 'Section of the tag' }),
            tag_discriminator: Type.String({
              description: 'A visible tag of the section: the key of the tag in the file, present when it is set',
            }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 25, description: 'At most 25 tags' },
      ),
    ),
    events: Type.Optional(
      Type.Object(
        {
          start_at: DateTime,
          end_at: Type.Optional(DateTime),
          types: Type.Optional(
            Type.Array(
              Type.Object(
                {
                  section_discriminator: Type.String({ description: 'Section of the event' }),
                  event_version_id: Type.String({ description: 'A version of a visible event of the section' }),
                },
                { additionalProperties: false },
              ),
              {
                minItems: 1,
                description:
                  'Only events of these versions; every visible event of the sections of the attributes and tags when omitted',
              },
            ),
          ),
        },
        {
          additionalProperties: false,
          description:
            'The events of each profile with an event time from start_at (inclusive) to end_at (exclusive; one week after start_at when omitted); no events without it',
        },
      ),
    ),
  },
  { additionalProperties: false },
);
export type EventExportBody = Static<typeof EventExportBody>;

/** The email event export (SPEC §2.16, §4.8; docs/activities.md "The email event export file"). */
export const EmailEventExportBody = Type.Object(
  {
    start_at: DateTime,
    end_at: Type.Optional(DateTime),
    segment_filter: Type.Optional(
      Type.Object(SegmentFilter, {
        additionalProperties: false,
        description:
          'Only the events of profiles that match this segment when the file is written; of every profile when omitted',
      }),
    ),
    additional_attribute_mappings: Type.Optional(
      Type.Array(
        Type.Object(
          {
            field_name: FieldName,
            section_discriminator: Type.String({ description: 'Section of the attribute' }),
            attribute_version_id: Type.String({ description: 'A version of a visible attribute of the section' }),
          },
          { additionalProperties: false },
        ),
        {
          maxItems: 75,
          description:
            'At most 75 columns of attribute values, each headed "<field_name> (version_id: <attribute_version_id>)"',
        },
      ),
    ),
    additional_tag_mappings: Type.Optional(
      Type.Array(
        Type.Object(
          {
            field_name: FieldName,
            section_discriminator: Type.String({ description: 'Section of the tag' }),
            tag_discriminator: Type.String({ description: 'A visible tag of the section' }),
          },
          { additionalProperties: false },
        ),
        {
          maxItems: 25,
          description:
            'At most 25 columns of tags, each headed "<field_name> (version_id: <tag_discriminator>)", holding TAG where the tag is set',
        },
      ),
    ),
  },
  { additionalProperties: false },
);
export type EmailEventExportBody = Static<typeof EmailEventExportBody>;

export const EmailReportQuery = Type.Object({
  header_auth: Type.Optional(
    Type.Boolean({
      description:
        'true: the download URL carries no credential; the token it needs is in the response header x-<vendor>-auth, to be sent in the same request header',
    }),
  ),
});

const OrNull = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
export const EmailReportStatus = Type.Object({
  report_id: Type.String(),
  result: Type.Object({
    status: Type.Union([Type.Literal('requested'), Type.Literal('completed'), Type.Literal('error')], {
      description: 'requested while queued or being written, then completed or error',
    }),
    message: OrNull(Type.String({ description: 'Why the export failed; null otherwise' })),
    file_download_url: OrNull(
      Type.String({
        description:
          'When completed: a URL of the file (gzip-compressed CSV), new on every status call, valid until file_download_url_expires_at',
      }),
    ),
    file_download_url_expires_at: OrNull(DateTime),
    file_expires_at: OrNull(DateTime),
  }),
});
export type EmailReportStatus = Static<typeof EmailReportStatus>;

export const EmailReportFileParams = Type.Object({
  account_id: Type.String({ description: 'The account of the export' }),
  report_id: Type.String({ description: 'The id of the email event export' }),
});
export const EmailReportFileQuery = Type.Object({
  token: Type.Optional(Type.String({ description: 'The credential of a URL issued without header_auth' })),
});

export const FileDownloadUrl = Type.Object({
  file_download_url: Type.String({
    description:
      'The poll URL of the file (JSON): 404 while in progress, 200 when ready, 410 when gone, 503 when the export failed',
  }),
});

export const DownloadUrls = Type.Object({
  file_download_url: Type.String({
    description: 'The poll URL of the file: 404 while in progress, 200 when ready, 410 when gone',
  }),
  file_download_url_v2: Type.String({
    description: 'Its v2 form: 202 while in progress, 200 when ready, 404 for an unknown id, 410 when gone',
  }),
});

export const PollUrl = Type.Object({
  poll_url: Type.String({
    description: 'Where to GET the file or result: 404 while in progress, 200 when ready, 410 when gone',
  }),
});

export const ReportId = Type.Object({
  report_id: Type.String({ description: 'Its status is at GET /emails/reports/{report_id}' }),
});

export const ReportParams = Type.Object({ report_id: Type.String({ description: 'The id at the end of a poll URL' }) });

/** The single profile export (SPEC §4.7, beta; docs/exports.md). */
export const SingleExportParams = Type.Object({
  export_key: Type.String({
    description: 'The export key of the profile (the key of the export keyspace): letters, digits and hyphens',
  }),
});

export const SingleExportBody = Type.Object(
  {
    callback_url: Type.String({
      format: 'uri',
      description:
        'An http or https URL that accepts POST: it receives {"code": 100, "message": "Callback verified"}, then {"code": 200, "message": <the URL of the file>}',
    }),
    include_merged_profiles: Type.Optional(
      Type.Boolean({
        description: 'Add the other profiles of the merge cluster, each under its export key with what it holds itself',
      }),
    ),
    include_attribute_history: Type.Optional(
      Type.Boolean({ description: "Add each attribute's changes as history, oldest first" }),
    ),
    include_type_definitions: Type.Optional(
      Type.Boolean({
        description: 'Add metadata: the definitions of the attributes, tags and events of the sections in the file',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SingleExportBody = Static<typeof SingleExportBody>;

/** A single profile export as stored: the body, and the export key of its path. */
export type SingleExportRequest = SingleExportBody & { export_key: string };

export const SingleExportFileParams = Type.Object({
  account_id: Type.String({ description: 'The account of the export: that of the bearer token' }),
  export_id: Type.String({ description: 'The id of the export' }),
});

export const ExportListQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 500, default: 50, description: 'At most this many, newest first' }) },
  { additionalProperties: false },
);

export const ExportList = Type.Object({
  items: Type.Array(
    Type.Object({
      export_id: Type.String(),
      kind: ListedString(['consents', 'consents-count', 'duplicates', 'segments', 'events', 'email-events', 'single'], {
        description: 'consents, consents-count, duplicates, segments, events, email-events or single',
      }),
      status: Type.Union(
        ['queued', 'in_progress', 'ready', 'failed', 'expired'].map((s) => Type.Literal(s)),
        { description: 'A ready export expires a day after it was ready' },
      ),
      message: Type.Optional(Type.String({ description: 'Why a failed export failed' })),
      result: Type.Optional(Type.Record(Type.String(), Type.Number(), { description: "A ready count's result" })),
      request: Type.Record(Type.String(), Type.Unknown(), {
        description: 'The request as it was made: its section, segments, topics and columns',
      }),
      created_at: DateTime,
      ready_at: Type.Union([DateTime, Type.Null()]),
      expires_at: Type.Union([DateTime, Type.Null()]),
      rows: Type.Union([Type.Integer(), Type.Null()], {
        description:
          'The data rows of a ready CSV or Excel file (its lines after the header); null for a count, a JSON document, or before it is ready',
      }),
      requested_by: Type.Union(
        [
          Type.Object({
            client_id: Type.String({ description: "The API key's client id" }),
            name: Type.String({ description: "The API key's name (empty when it has none, or it was deleted)" }),
          }),
          Type.Null(),
        ],
        { description: 'The API key that requested it; null for an export made before this was kept' },
      ),
      poll_path: Type.String({
        description:
          'Where it is read (relative to the service): the v2 poll of a file or count, the status of an email event export, the file of a single profile export',
      }),
    }),
    { description: 'Exports of the account, newest first' },
  ),
});

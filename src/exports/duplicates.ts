import { SqlValues } from '../aql/compile-sql.ts';
import type { ChannelRow } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { copyCsvRows } from '../store/copy.ts';
import { CSV_TYPE, XLSX_TYPE } from './formats.ts';
import type { ExportKind, Statement } from './kind.ts';
import {
  addressChannel,
  addressChannels,
  EXPORT_KEY_COLUMN,
  type NamedSegments,
  planAttributes,
  planSegments,
  planTags,
  planTopics,
  profileSelection,
  requireAttributeVersion,
  requireDistinct,
} from './plans.ts';
import * as q from './queries.ts';
import { DuplicateExportBody } from './schemas.ts';

/**
 * The duplicate profile in segment by consent export (SPEC §4.7; docs/exports.md): the profiles
 * that share a value of an attribute with another profile.
 */

/** The column of the value the duplicates share, right after the export key. */
const DUPLICATE_VALUE_COLUMN = 'duplicateValue';

export interface DuplicateExportPlan extends NamedSegments {
  sectionId: string;
  duplicateVersionId: string;
  topicIds: string[];
  /** The channels whose address columns the file has: the request's, or with topics alone every channel with addresses; none without either. */
  channels: { channel: ChannelRow; addressVersionId: string; column: string }[];
  attributes: { column: string; versionId: string }[];
  tags: { column: string; tagId: string }[];
  limit: number | null;
}

/**
 * Checks a duplicate export request against the definitions. Topics and a channel are each
 * optional: a channel gives its address column, holding the address of profiles that may be
 * contacted on it for one of the topics, or without topics for any topic of the section; topics
 * without a channel give that column for every channel with addresses in the section (their
 * consents on any channel count).
 */
function planDuplicateExport(scope: AccountScope, body: DuplicateExportBody): DuplicateExportPlan {
  const section = sectionOf(scope, body.section_discriminator);
  requireAttributeVersion(
    section,
    body.find_duplicates_by_attribute_version_id,
    'find_duplicates_by_attribute_version_id',
  );
  const topicIds =
    body.topic_discriminators === undefined
      ? section.topics.map((t) => t.topic_id)
      : planTopics(section, body.topic_discriminators);
  const found =
    body.channel_discriminator !== undefined
      ? [addressChannel(scope, section, body.channel_discriminator, 'channel_discriminator')]
      : body.topic_discriminators !== undefined
        ? addressChannels(scope, section)
        : [];
  const channels = found.map((c) => ({
    channel: c.channel,
    addressVersionId: c.addressVersionId,
    column: c.attributeName,
  }));
  const named = planSegments(scope, body.segments);
  const attributes = planAttributes(section, body.attributes);
  const tags = planTags(section, body.tags);
  requireDistinct([
    [EXPORT_KEY_COLUMN, 'the export key'],
    [DUPLICATE_VALUE_COLUMN, 'the shared value'],
    ...attributes.map((a, i): [string, string] => [a.column, `attributes[${i}].field_name`]),
    ...tags.map((t, i): [string, string] => [t.column, `tags[${i}].field_name`]),
    ...named.segments.map((s): [string, string] => [s.name, `the segment "${s.name}"`]),
    ...channels.map((c): [string, string] => [
      c.column,
      body.channel_discriminator === undefined ? `the channel "${c.channel.discriminator}"` : 'channel_discriminator',
    ]),
  ]);
  return {
    sectionId: section.id,
    duplicateVersionId: body.find_duplicates_by_attribute_version_id,
    topicIds,
    channels,
    ...named,
    attributes,
    tags,
    limit: body.limit ?? null,
  };
}

/** The statement of a duplicate export's rows. */
function duplicateExportStatement(scope: AccountScope, plan: DuplicateExportPlan): Statement {
  const values = new SqlValues();
  const text = q.duplicateExportStatement(values, {
    ...profileSelection(scope, values, plan, plan),
    duplicateVersionId: plan.duplicateVersionId,
  });
  return { text, values: values.values };
}

/** The duplicate export: a CSV file of the profiles sharing a value, next to each other. */
export const duplicateExport: ExportKind<DuplicateExportBody, DuplicateExportPlan> = {
  body: DuplicateExportBody,
  readAt: 'reports',
  file: { extension: 'csv', types: [CSV_TYPE, XLSX_TYPE] },
  plan: planDuplicateExport,
  statement: duplicateExportStatement,
  async produce(pool, scope, plan) {
    return {
      file: {
        columns: [
          EXPORT_KEY_COLUMN,
          DUPLICATE_VALUE_COLUMN,
          ...plan.attributes.map((a) => a.column),
          ...plan.tags.map((t) => t.column),
          ...plan.segments.map((s) => s.name),
          ...plan.channels.map((c) => c.column),
        ],
        rows: copyCsvRows(pool, duplicateExportStatement(scope, plan)),
      },
    };
  },
};

import type pg from 'pg';
import { SqlValues } from '../aql/compile-sql.ts';
import { attributeOfVersion, type ChannelRow, type SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import {
  addressChannel,
  EXPORT_KEY_COLUMN,
  type ExportFile,
  type NamedSegments,
  planAttributes,
  planSegments,
  planTags,
  planTopics,
  profileSelection,
  requireDistinct,
} from './plans.ts';
import * as q from './queries.ts';
import type { DuplicateExportBody } from './schemas.ts';

/**
 * The duplicate profile in segment by consent export (SPEC §4.7; docs/exports.md): the profiles
 * that share a value of an attribute with another profile.
 */

/** The column of the value the duplicates share, right after the export key. */
const DUPLICATE_VALUE_COLUMN = 'duplicateValue';

export interface DuplicateExportPlan extends NamedSegments {
  section: SectionDefs;
  duplicateVersionId: string;
  topicIds: string[];
  /** The channel whose address column the file has, with `topic_discriminators`; none without. */
  channels: { channel: ChannelRow; addressVersionId: string; column: string }[];
  attributes: { column: string; versionId: string }[];
  tags: { column: string; tagId: string }[];
  limit: number | null;
}

/** Checks a duplicate export request against the definitions. */
export function planDuplicateExport(scope: AccountScope, body: DuplicateExportBody): DuplicateExportPlan {
  const section = sectionOf(scope, body.section_discriminator);
  const field = 'find_duplicates_by_attribute_version_id';
  const attribute = attributeOfVersion(section, body.find_duplicates_by_attribute_version_id)?.attribute;
  if (!attribute)
    throw new Problem(
      'AUD-1206',
      `${field}: attribute version "${body.find_duplicates_by_attribute_version_id}" is not defined in section "${section.discriminator}"`,
    );
  if (attribute.hidden) throw new Problem('AUD-1211', `${field}: the attribute "${attribute.discriminator}" is hidden`);
  // The topics decide who may be contacted on the channel: one without the other says nothing.
  if ((body.channel_discriminator === undefined) !== (body.topic_discriminators === undefined)) {
    throw new Problem(
      'AUD-1909',
      body.channel_discriminator === undefined
        ? 'topic_discriminators: the topics say who may be contacted on a channel; give channel_discriminator too'
        : 'channel_discriminator: who may be contacted on the channel depends on topics; give topic_discriminators too',
    );
  }
  const topicIds = planTopics(section, body.topic_discriminators ?? []);
  const found =
    body.channel_discriminator === undefined
      ? undefined
      : addressChannel(scope, section, body.channel_discriminator, 'channel_discriminator');
  const channels = found
    ? [{ channel: found.channel, addressVersionId: found.addressVersionId, column: found.attributeName }]
    : [];
  const named = planSegments(scope, body.segments);
  const attributes = planAttributes(section, body.attributes);
  const tags = planTags(section, body.tags);
  requireDistinct([
    [EXPORT_KEY_COLUMN, 'the export key'],
    [DUPLICATE_VALUE_COLUMN, 'the shared value'],
    ...attributes.map((a, i): [string, string] => [a.column, `attributes[${i}].field_name`]),
    ...tags.map((t, i): [string, string] => [t.column, `tags[${i}].field_name`]),
    ...named.segments.map((s): [string, string] => [s.name, `the segment "${s.name}"`]),
    ...channels.map((c): [string, string] => [c.column, 'channel_discriminator']),
  ]);
  return {
    section,
    duplicateVersionId: body.find_duplicates_by_attribute_version_id,
    topicIds,
    channels,
    ...named,
    attributes,
    tags,
    limit: body.limit ?? null,
  };
}

/** The file of a duplicate export: its header and its rows, streamed from the database. */
export function duplicateExportFile(pool: pg.Pool, scope: AccountScope, plan: DuplicateExportPlan): ExportFile {
  const values = new SqlValues();
  const selection = { ...profileSelection(scope, values, plan, plan), duplicateVersionId: plan.duplicateVersionId };
  return {
    columns: [
      EXPORT_KEY_COLUMN,
      DUPLICATE_VALUE_COLUMN,
      ...plan.attributes.map((a) => a.column),
      ...plan.tags.map((t) => t.column),
      ...plan.segments.map((s) => s.name),
      ...plan.channels.map((c) => c.column),
    ],
    rows: q.duplicateExportCsv(pool, values, selection),
  };
}

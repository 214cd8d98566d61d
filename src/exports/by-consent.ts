import { SqlValues } from '../aql/compile-sql.ts';
import type { ChannelRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { copyCsvRows } from '../store/copy.ts';
import { CSV_TYPE, XLSX_TYPE } from './formats.ts';
import type { ExportKind, Statement } from './kind.ts';
import {
  addressChannel,
  EXPORT_KEY_COLUMN,
  type NamedSegments,
  planAttributes,
  planSegments,
  planTags,
  planTopics,
  profileSelection,
  requireDistinct,
} from './plans.ts';
import * as q from './queries.ts';
import { ConsentCountBody, ConsentExportBody } from './schemas.ts';

/**
 * The profile in segment by consent export and its count (SPEC §2.16, §4.7; docs/exports.md):
 * requests checked against the definitions, and the statement that selects their profiles.
 */

/** A request by consent resolved against the definitions: what the count needs. */
export interface ByConsentPlan extends NamedSegments {
  sectionId: string;
  topicIds: string[];
  /** Each channel, the column of its addresses, and whether the request named that column (`channels`) or not (`channel_discriminator`). */
  channels: { channel: ChannelRow; column: string; addressVersionId: string; named: boolean }[];
  duplicates: 'oldest' | 'latest' | 'keep';
}

/** The export's own columns and options on top of the count's. */
export interface ConsentExportPlan extends ByConsentPlan {
  attributes: { column: string; versionId: string }[];
  tags: { column: string; tagId: string }[];
  limit: number | null;
  excludeUnsubscribed: boolean;
}

const SUBSCRIBED_COLUMN = 'subscribed';

/** Checks a request by consent (the fields the export and the count share) against the definitions. */
function planByConsent(scope: AccountScope, section: SectionDefs, body: ConsentCountBody): ByConsentPlan {
  const topicIds = planTopics(section, body.topic_discriminators);
  if ((body.channel_discriminator === undefined) === (body.channels === undefined)) {
    throw new Problem(
      'AUD-1907',
      `Give either channel_discriminator or channels, ${body.channels === undefined ? 'one of them is required' : 'not both'}`,
    );
  }
  // One channel gives a column headed by the name of its address attribute (Email, Mobile); `channels` name theirs.
  const channels = (
    body.channels ?? [{ channel_discriminator: body.channel_discriminator!, field_name: undefined }]
  ).map((c, i) => {
    const found = addressChannel(
      scope,
      section,
      c.channel_discriminator,
      body.channels ? `channels[${i}].channel_discriminator` : 'channel_discriminator',
    );
    return {
      channel: found.channel,
      addressVersionId: found.addressVersionId,
      column: c.field_name ?? found.attributeName,
      named: c.field_name !== undefined,
    };
  });
  return {
    sectionId: section.id,
    topicIds,
    channels,
    ...planSegments(scope, body.segments),
    duplicates: body.duplicate_address_filter ?? 'keep',
  };
}

/** Checks a consent export request: the shared fields, its attribute and tag columns, and that every column has its own name. */
function planConsentExport(scope: AccountScope, body: ConsentExportBody): ConsentExportPlan {
  const section = sectionOf(scope, body.section_discriminator);
  const plan = planByConsent(scope, section, body);
  const attributes = planAttributes(section, body.attributes);
  const tags = planTags(section, body.tags);
  const excludeUnsubscribed = body.exclude_unsubscribed_profiles ?? false;
  requireDistinct([
    [EXPORT_KEY_COLUMN, 'the export key'],
    ...attributes.map((a, i): [string, string] => [a.column, `attributes[${i}].field_name`]),
    ...tags.map((t, i): [string, string] => [t.column, `tags[${i}].field_name`]),
    ...plan.segments.map((s): [string, string] => [s.name, `segments.segment_discriminators.${s.name}`]),
    ...plan.channels.map((c, i): [string, string] => [
      c.column,
      c.named ? `channels[${i}].field_name` : 'channel_discriminator',
    ]),
    ...(excludeUnsubscribed ? [[SUBSCRIBED_COLUMN, 'exclude_unsubscribed_profiles'] as [string, string]] : []),
  ]);
  return { ...plan, attributes, tags, limit: body.limit ?? null, excludeUnsubscribed };
}

/** Checks a count request: the shared fields, and result names of its own for its channels. */
function planConsentCount(scope: AccountScope, body: ConsentCountBody): ByConsentPlan {
  const plan = planByConsent(scope, sectionOf(scope, body.section_discriminator), body);
  requireDistinct([
    ['profile_count', 'the deprecated count'],
    ['total_profile_count', 'the total count'],
    ...plan.channels.filter((c) => c.named).map((c, i): [string, string] => [c.column, `channels[${i}].field_name`]),
  ]);
  return plan;
}

/** The statement's selection of a plan, its SQL bound in `values`. */
function selectionOf(
  scope: AccountScope,
  plan: ByConsentPlan,
  values: SqlValues,
  fileOptions?: ConsentExportPlan,
): q.ConsentSelection {
  return {
    ...profileSelection(scope, values, plan, {
      attributes: fileOptions?.attributes ?? [],
      tags: fileOptions?.tags ?? [],
      limit: fileOptions?.limit ?? null,
    }),
    duplicates: plan.duplicates,
    excludeUnsubscribed: fileOptions?.excludeUnsubscribed ?? false,
  };
}

/** The statement of a consent export's rows. */
function consentExportStatement(scope: AccountScope, plan: ConsentExportPlan): Statement {
  const values = new SqlValues();
  const text = q.consentExportStatement(values, selectionOf(scope, plan, values, plan));
  return { text, values: values.values };
}

/** The profile in segment by consent export: a CSV file of its profiles, their values and addresses. */
export const consentExport: ExportKind<ConsentExportBody, ConsentExportPlan> = {
  body: ConsentExportBody,
  readAt: 'reports',
  file: { extension: 'csv', types: [CSV_TYPE, XLSX_TYPE] },
  plan: planConsentExport,
  statement: consentExportStatement,
  async produce(pool, scope, plan) {
    return {
      file: {
        columns: [
          EXPORT_KEY_COLUMN,
          ...plan.attributes.map((a) => a.column),
          ...plan.tags.map((t) => t.column),
          ...plan.segments.map((s) => s.name),
          ...plan.channels.map((c) => c.column),
          ...(plan.excludeUnsubscribed ? [SUBSCRIBED_COLUMN] : []),
        ],
        rows: copyCsvRows(pool, consentExportStatement(scope, plan)),
      },
    };
  },
};

/** The statement of a count by consent. */
function consentCountStatement(scope: AccountScope, plan: ByConsentPlan): Statement {
  const values = new SqlValues();
  const text = q.consentCountStatement(values, selectionOf(scope, plan, values));
  return { text, values: values.values };
}

/**
 * The count by consent (ENDPOINTS.md "Facts"): the profiles the export of the same request would
 * hold (total_profile_count, and the deprecated profile_count with the same value), and per
 * `channels[].field_name` those of them it would give an address on that channel.
 */
export const consentCount: ExportKind<ConsentCountBody, ByConsentPlan> = {
  body: ConsentCountBody,
  readAt: 'reports',
  file: null,
  plan: planConsentCount,
  statement: consentCountStatement,
  async produce(pool, scope, plan) {
    const counts = await q.countConsentExport(pool, consentCountStatement(scope, plan), plan.channels.length);
    const perChannel = plan.channels.flatMap((c, i) => (c.named ? [[c.column, counts.channels[i]] as const] : []));
    return {
      result: { profile_count: counts.total, total_profile_count: counts.total, ...Object.fromEntries(perChannel) },
    };
  },
};

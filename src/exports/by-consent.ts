import type pg from 'pg';
import { SqlValues } from '../aql/compile-sql.ts';
import type { ChannelRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
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
import type { ConsentCountBody, ConsentExportBody } from './schemas.ts';

/**
 * The profile in segment by consent export and its count (SPEC §2.16, §4.7; docs/exports.md):
 * requests checked against the definitions, and the statement that selects their profiles.
 */

/** A request by consent resolved against the definitions: what the count needs. */
export interface ByConsentPlan extends NamedSegments {
  section: SectionDefs;
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
export function planByConsent(scope: AccountScope, body: ConsentCountBody): ByConsentPlan {
  const section = sectionOf(scope, body.section_discriminator);
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
    section,
    topicIds,
    channels,
    ...planSegments(scope, body.segments),
    duplicates: body.duplicate_address_filter ?? 'keep',
  };
}

/** Checks a consent export request: the shared fields, its attribute and tag columns, and that every column has its own name. */
export function planConsentExport(scope: AccountScope, body: ConsentExportBody): ConsentExportPlan {
  const plan = planByConsent(scope, body);
  const { section } = plan;
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
export function planConsentCount(scope: AccountScope, body: ConsentCountBody): ByConsentPlan {
  const plan = planByConsent(scope, body);
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

/** The file of a consent export: its header and its rows, streamed from the database. */
export function consentExportFile(pool: pg.Pool, scope: AccountScope, plan: ConsentExportPlan): ExportFile {
  const values = new SqlValues();
  const selection = selectionOf(scope, plan, values, plan);
  return {
    columns: [
      EXPORT_KEY_COLUMN,
      ...plan.attributes.map((a) => a.column),
      ...plan.tags.map((t) => t.column),
      ...plan.segments.map((s) => s.name),
      ...plan.channels.map((c) => c.column),
      ...(plan.excludeUnsubscribed ? [SUBSCRIBED_COLUMN] : []),
    ],
    rows: q.consentExportCsv(pool, values, selection),
  };
}

/**
 * The result of a count by consent (ENDPOINTS.md "Facts"): the profiles the export of the same
 * request would hold (total_profile_count, and the deprecated profile_count with the same value),
 * and per `channels[].field_name` those of them it would give an address on that channel.
 */
export async function consentCountResult(
  db: Queryable,
  scope: AccountScope,
  plan: ByConsentPlan,
): Promise<Record<string, number>> {
  const values = new SqlValues();
  const counts = await q.countConsentExport(db, values, selectionOf(scope, plan, values));
  const perChannel = plan.channels.flatMap((c, i) => (c.named ? [[c.column, counts.channels[i]] as const] : []));
  return { profile_count: counts.total, total_profile_count: counts.total, ...Object.fromEntries(perChannel) };
}

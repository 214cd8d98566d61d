import type { Expression } from '../aql/ast.ts';
import { compilePredicate, type SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone, TIME_ZONE_PROBLEMS } from '../aql/time.ts';
import { addressVersionId, maySendSql } from '../consents/consents.ts';
import {
  attributeOfVersion,
  ATTRIBUTE_READ_PROBLEMS,
  requireAttribute,
  type ChannelRow,
  type SectionDefs,
  type TagRow,
} from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { AQL_PROBLEMS } from '../aql/errors.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { compileQuery, segmentExpression } from '../segments/segments.ts';
import type { AttributeColumn, SegmentsByNameOrQuery, TagColumn } from './schemas.ts';
import { SECTION_ROW, type ProfileSelection } from './queries.ts';
import { filterSql, parseFilter, type Filter } from './segment-filter.ts';

/**
 * What planSegments can answer: a query refused (where the request takes queries as text), a time
 * zone, a stored segment not found, the filter refused, neither or both forms, no segment named,
 * an empty name. Stored segments are named without a version, so never AUD-1713.
 */
export const NAMED_SEGMENTS_PROBLEMS: readonly ProblemCode[] = [
  ...AQL_PROBLEMS,
  ...TIME_ZONE_PROBLEMS,
  'AUD-1711',
  'AUD-1906',
  'AUD-1923',
  'AUD-1924',
  'AUD-1925',
];

/**
 * NAMED_SEGMENTS_PROBLEMS of a kind whose request names stored segments only (SegmentsByName),
 * never a query as text: not AQL's codes, since a stored query was parsed and checked when it was
 * stored (TREND_PROBLEMS); nor AUD-1923 and AUD-1924, since that schema asks for
 * segment_discriminators with a name at least and takes no segment_definitions.
 */
export const STORED_SEGMENTS_PROBLEMS: readonly ProblemCode[] = NAMED_SEGMENTS_PROBLEMS.filter(
  (code) => !AQL_PROBLEMS.includes(code) && code !== 'AUD-1923' && code !== 'AUD-1924',
);

/** What the checks of a file's attribute and tag columns and their names can answer (planAttributes, planTags, requireDistinct). */
export const COLUMN_PROBLEMS: readonly ProblemCode[] = [...ATTRIBUTE_READ_PROBLEMS, 'AUD-1218', 'AUD-1908'];

/** What the checks of a request's topics and address channels can answer (planTopics, addressChannel). */
export const CONSENT_PLAN_PROBLEMS: readonly ProblemCode[] = ['AUD-1607', 'AUD-1608', 'AUD-1610'];

/** What several exports check the same way: their attribute and tag columns, their segments by name, the names of their columns. */

export const EXPORT_KEY_COLUMN = 'exportKey';

/** sectionOf, its problem naming the field of the request. */
export function sectionAt(scope: AccountScope, discriminator: string, field: string): SectionDefs {
  try {
    return sectionOf(scope, discriminator);
  } catch (err) {
    if (err instanceof Problem) throw err.within(`${field}: `);
    throw err;
  }
}

/** Checks that a version is one of a visible attribute of the section (any of its versions); 400 naming `field` otherwise. */
export function requireAttributeVersion(section: SectionDefs, versionId: string, field: string): void {
  const found = attributeOfVersion(section, versionId);
  requireAttribute(section, versionId, found && { attribute: found.attribute }, { field });
}

/** A visible tag of the section; 400 naming `field` otherwise. */
export function visibleTag(section: SectionDefs, discriminator: string, field: string): TagRow {
  const tag = section.tags.find((x) => x.discriminator === discriminator);
  if (!tag || tag.hidden)
    throw new Problem(
      'AUD-1218',
      `${field}: tag "${discriminator}" is not defined in section "${section.discriminator}"`,
    );
  return tag;
}

/** Attribute columns: any version of a visible attribute of the section (400 naming `attributes[i]` otherwise). */
export function planAttributes(
  section: SectionDefs,
  attributes: AttributeColumn[] = [],
): { column: string; versionId: string }[] {
  return attributes.map((a, i) => {
    requireAttributeVersion(section, a.attribute_version_id, `attributes[${i}].attribute_version_id`);
    return { column: a.field_name, versionId: a.attribute_version_id };
  });
}

/** Tag columns: visible tags of the section (400 naming `tags[i]` otherwise). */
export function planTags(section: SectionDefs, tags: TagColumn[] = []): { column: string; tagId: string }[] {
  return tags.map((t, i) => ({
    column: t.field_name,
    tagId: visibleTag(section, t.tag_discriminator, `tags[${i}].tag_discriminator`).tag_id,
  }));
}

/** Topics of the section, as ids (400 naming `topic_discriminators[i]` otherwise). */
export function planTopics(section: SectionDefs, discriminators: string[]): string[] {
  return discriminators.map((discriminator, i) => {
    const topic = section.topics.find((t) => t.discriminator === discriminator);
    if (!topic)
      throw new Problem(
        'AUD-1610',
        `topic_discriminators[${i}]: topic "${discriminator}" not found in section "${section.discriminator}"`,
      );
    return topic.topic_id;
  });
}

/** A channel that holds addresses in a section: the version of its address attribute, and that attribute's name (its column's). */
export interface AddressChannel {
  channel: ChannelRow;
  addressVersionId: string;
  attributeName: string;
}

/** The channel's addresses in the section; undefined for a channel without any there (web). */
function addressesOn(section: SectionDefs, channel: ChannelRow): AddressChannel | undefined {
  const versionId = addressVersionId(section, channel);
  const attribute = section.attributes.find((a) => a.discriminator === channel.address_attribute);
  return versionId === undefined || !attribute
    ? undefined
    : { channel, addressVersionId: versionId, attributeName: attribute.name };
}

/** A channel of the request that holds addresses in the section; 400 naming `field` otherwise. */
export function addressChannel(
  scope: AccountScope,
  section: SectionDefs,
  discriminator: string,
  field: string,
): AddressChannel {
  const channel = scope.defs.channels.find((c) => c.discriminator === discriminator);
  if (!channel) throw new Problem('AUD-1607', `${field}: channel ID "${discriminator}" not found`);
  const found = addressesOn(section, channel);
  if (!found)
    throw new Problem(
      'AUD-1608',
      `${field}: the channel "${discriminator}" holds no addresses in section "${section.discriminator}": use the email or SMS channel`,
    );
  return found;
}

/** Every channel of the account that holds addresses in the section (email, SMS), in the account's order. */
export function addressChannels(scope: AccountScope, section: SectionDefs): AddressChannel[] {
  return scope.defs.channels.flatMap((c) => addressesOn(section, c) ?? []);
}

/**
 * The header of a file of profiles: the export key, `leading`, the attribute and tag columns, a
 * column per segment and per channel (when the plan has them), then `trailing`.
 */
export function profileColumns(
  plan: {
    attributes: { column: string }[];
    tags: { column: string }[];
    segments?: { name: string }[];
    channels?: { column: string }[];
  },
  extra: { leading?: string[]; trailing?: string[] } = {},
): string[] {
  return [
    EXPORT_KEY_COLUMN,
    ...(extra.leading ?? []),
    ...plan.attributes.map((a) => a.column),
    ...plan.tags.map((t) => t.column),
    ...(plan.segments ?? []).map((s) => s.name),
    ...(plan.channels ?? []).map((c) => c.column),
    ...(extra.trailing ?? []),
  ];
}

/** Refuses (400) a column name given twice; `columns` are [name, the field that gives it] in the file's order. */
export function requireDistinct(columns: [string, string][]): void {
  const seen = new Map<string, string>();
  for (const [name, field] of columns) {
    const before = seen.get(name);
    if (before !== undefined)
      throw new Problem(
        'AUD-1908',
        `${field}: the column "${name}" is already the column of ${before}; each column needs its own name`,
      );
    seen.set(name, field);
  }
}

/** Segments by name, checked: each name's query, the time zone of their windows, and which profiles (null: every one). */
export interface NamedSegments {
  segments: { name: string; expression: Expression }[];
  timeZone: string;
  filter: Filter | null;
}

/**
 * The `segments` of a request (SPEC §4.7): names of stored segments (`segment_discriminators`) or,
 * where the request takes them, of AQL queries (`segment_definitions`), one of the two; without a
 * `filter`, the profiles of any of them; without `segments`, every profile.
 */
export function planSegments(scope: AccountScope, segments: SegmentsByNameOrQuery | undefined): NamedSegments {
  if (!segments) return { segments: [], timeZone: 'UTC', filter: null };
  const { segment_discriminators: stored, segment_definitions: defined } = segments;
  if ((stored === undefined) === (defined === undefined)) {
    throw new Problem('AUD-1923', 'segments: give either segment_discriminators or segment_definitions');
  }
  const named = Object.entries(stored ?? defined!);
  if (named.length === 0)
    throw new Problem(
      'AUD-1924',
      `segments.${stored ? 'segment_discriminators' : 'segment_definitions'}: name at least one segment`,
    );
  const list = named.map(([name, text]) => {
    if (name === '') throw new Problem('AUD-1925', 'segments: a segment name (a column of the file) must not be empty');
    if (stored)
      return {
        name,
        expression: segmentExpression(scope.defs, { discriminator: text }, `segments.segment_discriminators.${name}`),
      };
    try {
      return { name, expression: compileQuery(scope.defs, text) };
    } catch (err) {
      // AQL's problems say where in the query; this says which query.
      if (err instanceof Problem) throw err.within(`segments.segment_definitions.${name}: `);
      throw err;
    }
  });
  const timeZone = checkTimeZone(segments.timezone, 'segments.timezone');
  const names = list.map((s) => s.name);
  const filter =
    segments.filter === undefined
      ? { kind: 'or' as const, terms: names.map((name) => ({ kind: 'name' as const, name })) }
      : parseFilter(segments.filter, new Set(names), 'segments.filter');
  return { segments: list, timeZone, filter };
}

/** A section of a plan by its id (a plan holds ids: it is stored as JSON with its job). */
function sectionById(scope: AccountScope, sectionId: string): SectionDefs {
  const section = scope.defs.sections.find((s) => s.id === sectionId);
  if (!section) throw new Problem('AUD-1102', `The section ${sectionId} of the export no longer exists`);
  return section;
}

/**
 * What a statement selects for a plan, its SQL bound in `values`: the section, the segments
 * compiled to SQL and evaluated at `scope.now` in the plan's time zone, the filter over them, and
 * per channel its addresses and maySend on the plan's topics.
 */
export function profileSelection(
  scope: AccountScope,
  values: SqlValues,
  plan: NamedSegments & {
    sectionId: string;
    topicIds: string[];
    channels: { channel: ChannelRow; addressVersionId: string }[];
  },
  file: { attributes: { versionId: string }[]; tags: { tagId: string }[]; limit: number | null },
): ProfileSelection {
  const account = values.add(scope.accountId, 'bigint');
  const now = scope.now.getTime();
  // Each segment is a column of every row: judged profile by profile, its terms on the export's
  // section on the row the statement joins.
  const joinedSection = { sectionId: plan.sectionId, row: SECTION_ROW };
  const segments = plan.segments.map((s) =>
    compilePredicate(s.expression, { account, now, timeZone: plan.timeZone, perProfile: true, joinedSection }, values),
  );
  const index = new Map(plan.segments.map((s, i) => [s.name, i]));
  const { filter, topicIds } = plan;
  const section = plan.channels.length > 0 ? sectionById(scope, plan.sectionId) : undefined;
  return {
    account,
    sectionId: plan.sectionId,
    segments,
    filter: filter ? (column) => filterSql(filter, (name) => column(index.get(name)!)) : null,
    channels: plan.channels.map((c) => ({
      addressVersionId: c.addressVersionId,
      ...maySendSql(scope, values, { account, section: section!, topicIds, channel: c.channel }),
    })),
    attributes: file.attributes.map((a) => a.versionId),
    tags: file.tags.map((t) => t.tagId),
    limit: file.limit,
  };
}

import type { Expression } from '../aql/ast.ts';
import { compilePredicate, SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone, TIME_ZONE_PROBLEMS } from '../aql/time.ts';
import { ATTRIBUTE_READ_PROBLEMS, type SectionDefs } from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import { SECTION_PROBLEMS } from '../definitions/definitions.ts';
import type { AccountScope } from '../core/scope.ts';
import { clusterEventsSql } from '../profiles/events.ts';
import { segmentExpression } from '../segments/segments.ts';
import { JSON_TYPE } from './formats.ts';
import type { ExportKind, Statement } from './kind.ts';
import { requireAttributeVersion, sectionAt, visibleTag } from './plans.ts';
import * as q from './queries.ts';
import { EventExportBody } from './schemas.ts';

/**
 * The profile in segment event export (SPEC §2.16, §4.7; docs/exports.md): the values of some
 * attributes and tags and the events in a time window of every profile, or of those of a segment,
 * as one JSON document keyed by export key, streamed from the database.
 */

/** SPEC §4.7: without end_at, the window is one week long. */
const DEFAULT_WINDOW_MS = 7 * 24 * 60 * 60 * 1000;
/** SPEC §6.4: a source time before 2020 (or none) is exported as 0. */
export const FIRST_SOURCE_TIME = Date.UTC(2020, 0, 1);
/** The document is handed on in pieces of about this many characters, not one per profile or event. */
const PIECE = 64 * 1024;

export interface EventExportPlan {
  segment: { expression: Expression; timeZone: string } | null;
  /** Every section the request names, by id. */
  sectionIds: string[];
  attributes: { sectionId: string; versionId: string }[];
  tags: { sectionId: string; tagId: string; discriminator: string }[];
  /** The event versions and the window [from, to) (RFC 3339); null when the request has no `events`. */
  events: { versionIds: string[]; from: string; to: string } | null;
}

/**
 * What planEventExport can answer: a stored segment or its version not found (its query was checked
 * when stored), a time zone, a section, attribute, tag or event type refused, a window that ends
 * before it starts.
 */
export const EVENT_EXPORT_PROBLEMS: readonly ProblemCode[] = [
  ...SECTION_PROBLEMS,
  ...TIME_ZONE_PROBLEMS,
  ...ATTRIBUTE_READ_PROBLEMS,
  'AUD-1218',
  'AUD-1220',
  'AUD-1711',
  'AUD-1713',
  'AUD-1910',
];

/** Checks an event export request against the definitions (400 naming the field). */
function planEventExport(scope: AccountScope, body: EventExportBody): EventExportPlan {
  const filter = body.segment_filter;
  const segment = filter
    ? {
        expression: segmentExpression(scope.defs, filter, 'segment_filter'),
        timeZone: checkTimeZone(filter.timezone, 'segment_filter.timezone'),
      }
    : null;
  const sections = new Map<string, SectionDefs>();
  const named = (discriminator: string, field: string) => {
    const section = sectionAt(scope, discriminator, field);
    sections.set(section.id, section);
    return section;
  };
  const attributes = (body.attributes ?? []).map((a, i) => {
    const section = named(a.section_discriminator, `attributes[${i}].section_discriminator`);
    requireAttributeVersion(section, a.attribute_version_id, `attributes[${i}].attribute_version_id`);
    return { sectionId: section.id, versionId: a.attribute_version_id };
  });
  const tags = (body.tags ?? []).map((t, i) => {
    const section = named(t.section_discriminator, `tags[${i}].section_discriminator`);
    const tag = visibleTag(section, t.tag_discriminator, `tags[${i}].tag_discriminator`);
    return { sectionId: section.id, tagId: tag.tag_id, discriminator: tag.discriminator };
  });
  let events: EventExportPlan['events'] = null;
  if (body.events) {
    const from = Date.parse(body.events.start_at);
    const to = body.events.end_at === undefined ? from + DEFAULT_WINDOW_MS : Date.parse(body.events.end_at);
    if (to <= from)
      throw new Problem(
        'AUD-1910',
        `events.end_at (${body.events.end_at}) must be after events.start_at (${body.events.start_at})`,
      );
    // Without types, every visible event of the sections the attributes and tags name: only what the request names is exported.
    const versionIds = body.events.types
      ? body.events.types.map((t, i) => {
          const section = named(t.section_discriminator, `events.types[${i}].section_discriminator`);
          const event = section.events.find((e) => !e.hidden && e.versions.some((v) => v.id === t.event_version_id));
          if (!event)
            throw new Problem(
              'AUD-1220',
              `events.types[${i}].event_version_id: "${t.event_version_id}" is not a version of a visible event of section "${section.discriminator}"`,
            );
          return t.event_version_id;
        })
      : [...sections.values()].flatMap((s) =>
          s.events.filter((e) => !e.hidden).flatMap((e) => e.versions.map((v) => v.id)),
        );
    events = { versionIds, from: new Date(from).toISOString(), to: new Date(to).toISOString() };
  }
  return { segment, sectionIds: [...sections.keys()], attributes, tags, events };
}

/** The statement of an event export's rows (streamed through a cursor). */
function eventExportStatement(scope: AccountScope, plan: EventExportPlan): Statement {
  const values = new SqlValues();
  const account = values.add(scope.accountId, 'bigint');
  const { segment, events } = plan;
  const text = q.eventExportStatement(values, {
    account,
    // Judged profile by profile: under "or" the set form would be run again for every profile.
    segment: segment
      ? compilePredicate(
          segment.expression,
          { account, now: scope.now.getTime(), timeZone: segment.timeZone, perProfile: true },
          values,
        )
      : null,
    sectionIds: plan.sectionIds,
    keys: [
      ...plan.attributes.map((a) => ({ sectionId: a.sectionId, key: a.versionId, stored: a.versionId, tag: false })),
      ...plan.tags.map((t) => ({ sectionId: t.sectionId, key: t.discriminator, stored: t.tagId, tag: true })),
    ],
    events: events
      ? (profile) =>
          clusterEventsSql(values, {
            account,
            profile,
            versionIds: events.versionIds,
            from: new Date(events.from),
            to: new Date(events.to),
          })
      : null,
  });
  return { text, values: values.values };
}

/**
 * The profile in segment event export. Its file is a JSON document (SPEC §2.16, EXP-29, EXP-30)
 *
 *     {"<export key>": {"sections": {"<section id>": {"attributes": {…}, "events": […]}}}, …}
 *
 * with, per profile, every section the request names; `attributes` holds the requested attributes
 * the profile has a value of (`{"value": …}`, keyed by attribute version id) and the requested
 * tags it has set (`{"value": null}`, keyed by tag discriminator, as in profile tag maps: tag ids
 * and attribute version ids are numbered apart and would collide); `events`, only when the request
 * has `events`, its events in the window, oldest first. Streamed from the database a row at a
 * time: the document is never whole in memory. A request with no attribute and no tag holds no
 * profile (SPEC §4.7).
 */
export const eventExport: ExportKind<EventExportBody, EventExportPlan> = {
  body: EventExportBody,
  readAt: 'reports',
  file: { extension: 'json', types: [JSON_TYPE] },
  plan: planEventExport,
  statement: eventExportStatement,
  async produce(pool, scope, plan) {
    if (plan.attributes.length === 0 && plan.tags.length === 0) return { document: ['{}'] };
    const rows = q.eventExportRows(pool, eventExportStatement(scope, plan));
    return { document: jsonDocument(rows, plan.events !== null) };
  },
};

/**
 * Writes the rows of eventExportRows (ordered by profile, then section, the section's row of
 * values before its events) as the document's text.
 */
async function* jsonDocument(rows: AsyncIterable<q.EventExportRow>, withEvents: boolean): AsyncGenerator<string> {
  let text = '{';
  let profile: string | undefined;
  let section: string | undefined;
  let firstEvent = true;
  const closeSection = withEvents ? ']}' : '}';
  for await (const row of rows) {
    if (row.exportKey !== profile) {
      if (profile !== undefined) text += `${closeSection}}},`;
      text += `${JSON.stringify(row.exportKey)}:{"sections":{`;
      profile = row.exportKey;
      section = undefined;
    }
    if (row.kind === 'values') {
      if (section !== undefined) text += `${closeSection},`;
      text += `${JSON.stringify(row.sectionId)}:{"attributes":${JSON.stringify(row.attributes)}${withEvents ? ',"events":[' : ''}`;
      section = row.sectionId;
      firstEvent = true;
    } else {
      const time = row.eventTime.getTime();
      text +=
        (firstEvent ? '' : ',') +
        JSON.stringify({
          correlationId: row.correlationId,
          sourceEventTime: time < FIRST_SOURCE_TIME ? 0 : time,
          typeId: row.versionId,
          createdAt: row.createdAt.getTime(),
          data: row.data,
        });
      firstEvent = false;
    }
    if (text.length >= PIECE) {
      yield text;
      text = '';
    }
  }
  if (profile !== undefined) text += `${closeSection}}}`;
  yield `${text}}`;
}

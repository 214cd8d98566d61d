import type pg from 'pg';
import { termsOf, type Expression } from '../aql/ast.ts';
import { AQL_PROBLEMS, aqlError } from '../aql/errors.ts';
import { check } from '../aql/check.ts';
import { compileMasks, compilePredicate, requiredSections, SqlValues } from '../aql/compile-sql.ts';
import { evaluate } from '../aql/evaluate.ts';
import { parse } from '../aql/parser.ts';
import { checkTimeZone, TIME_ZONE_PROBLEMS } from '../aql/time.ts';
import { knownKeyspaceIds, sectionOf } from '../definitions/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import { locateWithFacts } from '../profiles/locate.ts';
import type { UniqueIdentifier } from '../profiles/schemas.ts';
import type { Queryable } from '../store/pool.ts';
import { projectedCount, projectedTrend } from './projection.ts';
import * as q from './queries.ts';
import type { Definitions } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';

/**
 * What a trend's stored segment can answer (trendPlan): a time zone refused, a segment not found,
 * a section the key may not read. Not AQL's codes: a stored query was parsed and checked when it
 * was stored, it cannot change, and the definitions it names are never removed.
 */
export const TREND_PROBLEMS: readonly ProblemCode[] = [...TIME_ZONE_PROBLEMS, 'AUD-1104', 'AUD-1107', 'AUD-1711'];

/**
 * What a request's `segment` can answer, by reference or as a query (chosenQuery, requireReadable,
 * with its time zone): a query refused, a stored segment not found, neither or both given, a
 * section the key may not read. It names a stored segment without a version: never AUD-1713.
 */
export const SEGMENT_PROBLEMS: readonly ProblemCode[] = [
  ...AQL_PROBLEMS,
  ...TIME_ZONE_PROBLEMS,
  'AUD-1107',
  'AUD-1711',
  'AUD-1714',
];

/** Parses and checks an AQL query against the account's definitions (docs/aql.md). */
export function compileQuery(defs: Definitions, text: string): Expression {
  const expression = parse(text);
  check(expression, defs, text);
  return expression;
}

/** Stored segment queries, parsed and checked, per definitions snapshot (immutable; replaced when definitions change). */
const storedExpressions = new WeakMap<Definitions, Map<string, Expression>>();

/** compileQuery of a stored segment's query, once per definitions snapshot: evaluations ask for many segments per request. */
export function storedExpression(defs: Definitions, text: string): Expression {
  let cache = storedExpressions.get(defs);
  if (!cache) {
    cache = new Map();
    storedExpressions.set(defs, cache);
  }
  let expression = cache.get(text);
  if (!expression) {
    expression = compileQuery(defs, text);
    cache.set(text, expression);
  }
  return expression;
}

export interface SegmentRef {
  discriminator: string;
  version_id?: string;
}

/**
 * Refuses (403) a query that reads a section the caller's API key is not granted: its count or
 * evaluation would answer from data the key may not read (SPEC §5.7; docs/security.md).
 */
function requireReadable(
  scope: AccountScope,
  query: { expression: Expression; text: string },
  field: string,
): Expression {
  const granted = scope.caller?.sectionIds;
  const denied = granted ? termsOf(query.expression).find((t) => !granted.includes(t.sectionId)) : undefined;
  if (denied)
    throw aqlError(
      'AUD-1107',
      query.text,
      denied.sectionAt,
      `${field} reads the section ${denied.sectionId}, which the API key is not granted`,
    );
  return query.expression;
}

/** A stored segment query's expression, refused (403) when it reads a section the caller's key is not granted. */
export function readableExpression(scope: AccountScope, text: string, field: string): Expression {
  return requireReadable(scope, { expression: storedExpression(scope.defs, text), text }, field);
}

/**
 * The membership a count or a trend can read instead of evaluating: the segment is live in that
 * time zone and its membership is of its latest version. Undefined otherwise (evaluate).
 */
export async function readableMembership(
  db: Queryable,
  scope: AccountScope,
  discriminator: string,
  timeZone: string,
): Promise<{ segmentId: string; refreshedAt: Date; evaluatedAt: Date; liveSince: Date } | undefined> {
  const segment = scope.defs.segments.find((s) => s.discriminator === discriminator);
  if (!segment || segment.live_time_zone !== timeZone) return undefined;
  const state = await q.findLiveSegment(db, scope.accountId, segment.id);
  if (!state || state.version_id !== segment.versions.at(-1)?.id || state.time_zone !== timeZone) return undefined;
  if (state.refreshed_at === null || state.evaluated_at === null) return undefined;
  return {
    segmentId: segment.id,
    refreshedAt: state.refreshed_at,
    evaluatedAt: state.evaluated_at,
    liveSince: state.live_since,
  };
}

/** The query of a segment at a version, or its latest; 400 for an unknown segment or another segment's version. */
function segmentQuery(defs: Definitions, ref: SegmentRef, field: string): string {
  const segment = defs.segments.find((s) => s.discriminator === ref.discriminator);
  if (!segment) throw new Problem('AUD-1711', `${field}: segment "${ref.discriminator}" not found`);
  if (ref.version_id === undefined) {
    const latest = segment.versions.at(-1);
    if (!latest) throw new Problem('AUD-1711', `${field}: segment "${ref.discriminator}" has no version`);
    return latest.query;
  }
  const version = segment.versions.find((v) => v.id === ref.version_id);
  if (!version)
    throw new Problem(
      'AUD-1713',
      `${field}: version ID "${ref.version_id}" does not belong to segment "${ref.discriminator}"`,
    );
  return version.query;
}

/**
 * The checked query of a stored segment at a version, or its latest, for statements over many
 * profiles (exports); 400 naming `field` when there is no such segment or version.
 */
export function segmentExpression(defs: Definitions, ref: SegmentRef, field: string): Expression {
  return storedExpression(defs, segmentQuery(defs, ref, field));
}

/**
 * Whether a profile is known (`wanted` true) or unknown (false), as SQL over the canonical profile
 * whose id is the SQL `profile`, for statements over many profiles (exports); `account` is the
 * placeholder of the account id.
 */
export function knownProfileSql(
  scope: Pick<AccountScope, 'defs'>,
  values: SqlValues,
  target: { account: string; profile: string; wanted: boolean },
): string {
  return `${target.wanted ? '' : 'not '}${q.knownPredicate(values, { account: target.account, profile: target.profile, keyspaceIds: knownKeyspaceIds(scope.defs) })}`;
}

/**
 * What evaluateProfile can answer besides locating the profile: a time zone refused, a segment or
 * version not found, a section the key may not read. Not AQL's codes: it takes stored segments only
 * (TREND_PROBLEMS says why their queries cannot be refused).
 */
export const EVALUATION_PROBLEMS: readonly ProblemCode[] = [...TIME_ZONE_PROBLEMS, 'AUD-1107', 'AUD-1711', 'AUD-1713'];

/**
 * Evaluates a profile against segments (SPEC §4.3) with the in-memory evaluator: the answer maps
 * each discriminator (or `discriminator|version_id`) to whether the profile matches now.
 */
export async function evaluateProfile(
  db: Queryable,
  scope: AccountScope,
  id: UniqueIdentifier,
  body: { segments: SegmentRef[]; time_zone: string },
): Promise<{ matches: { segments: Record<string, boolean> } }> {
  const timeZone = checkTimeZone(body.time_zone, 'time_zone');
  const queries = body.segments.map((ref, i) => {
    const text = segmentQuery(scope.defs, ref, `segments[${i}]`);
    return {
      key: ref.version_id === undefined ? ref.discriminator : `${ref.discriminator}|${ref.version_id}`,
      expression: requireReadable(scope, { expression: storedExpression(scope.defs, text), text }, `segments[${i}]`),
    };
  });
  const versions = new Set(
    queries
      .flatMap((x) => termsOf(x.expression))
      .filter((t) => t.kind === 'event')
      .map((t) => t.versionId),
  );
  const { facts } = await locateWithFacts(db, scope, id, [...versions]);
  const now = scope.now.getTime();
  return {
    matches: {
      segments: Object.fromEntries(queries.map((x) => [x.key, evaluate(x.expression, facts, now, timeZone)])),
    },
  };
}

export interface SegmentChoice {
  timezone: string;
  segment_discriminator?: string;
  segment_definition?: string;
}

/** The query of a request's `segment`: a stored segment by discriminator, or an inline definition (validated here); 400 for neither or both. */
export function chosenQuery(defs: Definitions, segment: SegmentChoice): { expression: Expression; text: string } {
  if ((segment.segment_discriminator === undefined) === (segment.segment_definition === undefined)) {
    throw new Problem('AUD-1714', 'segment: give either segment_discriminator or segment_definition');
  }
  if (segment.segment_definition !== undefined)
    return { expression: compileQuery(defs, segment.segment_definition), text: segment.segment_definition };
  const text = segmentQuery(defs, { discriminator: segment.segment_discriminator! }, 'segment.segment_discriminator');
  return { expression: storedExpression(defs, text), text };
}

/** Profile in segment count (POST /audience/profiles/reports/segments/count): profiles matching now, all, known or unknown. */
export async function countSegment(
  pool: pg.Pool,
  scope: AccountScope,
  body: CountRequest,
): Promise<{ profile_count: number; live?: LiveAnswer }> {
  const { predicate, known, expression } = countPlan(scope, body);
  const discriminator = body.segment.segment_discriminator;
  const membership =
    discriminator === undefined
      ? undefined
      : await readableMembership(pool, scope, discriminator, body.segment.timezone);
  if (membership)
    return {
      profile_count: await q.countMembers(pool, scope.accountId, membership.segmentId, known),
      live: liveAnswer(membership),
    };
  const projected = known ? undefined : await projectedCount(pool, scope, expression, body.segment.timezone);
  return { profile_count: projected ?? (await q.countProfilesMatching(pool, predicate, known)) };
}

/** What a count or trend read from a live segment's membership says of it (docs/aql.md "Live segments"). */
export interface LiveAnswer {
  refreshed_at: string;
  evaluated_at: string;
}

function liveAnswer(membership: { refreshedAt: Date; evaluatedAt: Date }): LiveAnswer {
  return { refreshed_at: membership.refreshedAt.toISOString(), evaluated_at: membership.evaluatedAt.toISOString() };
}

/** The body of a count (countSegment). */
export interface CountRequest {
  section_discriminator: string;
  segment: SegmentChoice;
  known_profiles?: boolean | null;
}

/** What countSegment asks of the database (q.countStatement shows its statement): 400 for a request the definitions refuse. */
export function countPlan(
  scope: AccountScope,
  body: CountRequest,
): {
  predicate: q.CountPredicate;
  known: { keyspaceIds: string[]; wanted: boolean } | null;
  expression: Expression;
} {
  sectionOf(scope, body.section_discriminator);
  const timeZone = checkTimeZone(body.segment.timezone, 'segment.timezone');
  const expression = requireReadable(scope, chosenQuery(scope.defs, body.segment), 'segment');
  const values = new SqlValues();
  const account = values.add(scope.accountId, 'bigint');
  const now = scope.now.getTime();
  const text = compilePredicate(expression, { account, now, timeZone }, values);
  // Without clusters, a query that needs a section row counts that section's rows (docs/benchmarks.md "Segments").
  const [section] = requiredSections(expression);
  const simple =
    section === undefined
      ? { text: compilePredicate(expression, { account, now, timeZone, clusters: false }, values) }
      : {
          section: values.add(section, 'bigint'),
          text: compilePredicate(expression, { account, now, timeZone, clusters: false, sectionRow: section }, values),
        };
  const known =
    body.known_profiles === undefined || body.known_profiles === null
      ? null
      : { keyspaceIds: knownKeyspaceIds(scope.defs), wanted: body.known_profiles };
  return { predicate: { account, text, simple, values: values.values }, known, expression };
}

/**
 * Count matching profiles over time (POST /audience/sections/{s}/segments/{seg}/trend): for each
 * sampling point, the known and unknown profiles that matched the segment's latest version then.
 */
export async function segmentTrend(
  pool: pg.Pool,
  scope: AccountScope,
  sectionDiscriminator: string,
  segmentDiscriminator: string,
  body: { sampling_points: string[]; timezone: string },
): Promise<{ matching_profile_count: Record<string, { known: number; unknown: number }>; live?: LiveAnswer }> {
  const { compiled, keyspaceIds, order, expression, points } = trendPlan(
    scope,
    sectionDiscriminator,
    segmentDiscriminator,
    body,
  );
  // A live segment's trend from its recorded entries and exits, for points since it went live.
  const membership = await readableMembership(pool, scope, segmentDiscriminator, body.timezone);
  const result: Record<string, { known: number; unknown: number }> = {};
  if (membership && points[0] >= membership.liveSince.getTime()) {
    const dates = points.map((t) => new Date(t));
    const counts = await q.countMembersByPoint(pool, scope.accountId, membership.segmentId, dates, keyspaceIds);
    order.forEach((i, j) => (result[body.sampling_points[i]] = counts[j]));
    return { matching_profile_count: result, live: liveAnswer(membership) };
  }
  const projected = await projectedTrend(pool, scope, expression, points, body.timezone);
  if (projected) {
    order.forEach((i, j) => (result[body.sampling_points[i]] = projected[j]));
    return { matching_profile_count: result };
  }
  const counts = await q.countMasksByPoint(pool, compiled, keyspaceIds);
  order.forEach((i, j) => {
    const found = counts.find((c) => c.i === j + 1);
    result[body.sampling_points[i]] = { known: found?.known ?? 0, unknown: found?.unknown ?? 0 };
  });
  return { matching_profile_count: result };
}

/**
 * What segmentTrend asks of the database (q.trendStatement shows its statement), and `order`:
 * `order[j]` is the request's index of the j-th point in ascending order, `points[j]` (ms); the
 * segment's `expression`, for the projection (projectedTrend).
 */
export function trendPlan(
  scope: AccountScope,
  sectionDiscriminator: string,
  segmentDiscriminator: string,
  body: { sampling_points: string[]; timezone: string },
): { compiled: q.CompiledTrend; keyspaceIds: string[]; order: number[]; expression: Expression; points: number[] } {
  sectionOf(scope, sectionDiscriminator);
  const timeZone = checkTimeZone(body.timezone, 'timezone');
  const segment = scope.defs.segments.find((s) => s.discriminator === segmentDiscriminator);
  if (!segment) throw new Problem('AUD-1104', `Segment "${segmentDiscriminator}" does not exist`);
  const text = segmentQuery(scope.defs, { discriminator: segmentDiscriminator }, 'segment');
  const expression = requireReadable(scope, { expression: storedExpression(scope.defs, text), text }, 'segment');
  // The points in ascending order, as compileMasks wants them; `order[j]` is the request's index of the j-th.
  const requested = body.sampling_points.map((p) => Date.parse(p));
  const order = requested.map((_, i) => i).sort((a, b) => requested[a] - requested[b]);
  const points = order.map((i) => requested[i]);
  const values = new SqlValues();
  const accountParam = values.add(scope.accountId, 'bigint');
  const pointsParam = values.add(
    points.map((t) => new Date(t)),
    'timestamptz[]',
  );
  const general = compileMasks(expression, { accountParam, points, pointsParam, timeZone }, values);
  const simple = compileMasks(expression, { accountParam, points, pointsParam, timeZone, clusters: false }, values);
  return {
    compiled: { general, simple, values: values.values, accountParam, pointsParam },
    keyspaceIds: knownKeyspaceIds(scope.defs),
    order,
    expression,
    points,
  };
}

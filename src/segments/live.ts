import type pg from 'pg';
import { termsOf, type AttributeTerm, type EventTerm, type Expression } from '../aql/ast.ts';
import { compilePredicate, SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone } from '../aql/time.ts';
import type { SegmentDef } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import {
  accountsWithLiveSegments,
  LIVE_SEGMENTS_JOB,
  onDefinitionsChanged,
  refreshLiveSegments,
  requireAllSections,
  setSegmentLive,
} from '../definitions/definitions.ts';
import type { Job } from '../jobs/queue.ts';
import { enqueueUnlessWaiting } from '../jobs/queue.ts';
import { CHANGED, pruneProjectionMarks, takeProfileChanges } from '../profiles/profiles.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { recordWebhookEvents } from '../webhooks/events.ts';
import { ACCOUNTS_KEPT, onReadFailed, projectable, projectionState, readAhead } from './projection.ts';
import * as q from './queries.ts';
import { readableExpression, storedExpression } from './segments.ts';

/**
 * Live segments (docs/aql.md "Live segments"): a stored segment whose members are kept in a table,
 * brought up to date by the live segments job from the profiles each write marks
 * (profilesChanged), and by time: a segment with a moving window (`inLast`) is evaluated whole
 * every SWEEP_MS. Each entry and exit is recorded with its time, and sent as a `segment.entered`
 * or `segment.exited` webhook event.
 */

/** How often a live segment with a moving window is evaluated whole, so that members leave (and enter) as time passes. */
export const SWEEP_MS = 60_000;
/**
 * How long the count projections' marks are kept at least (src/segments/projection.ts): a
 * projection counted less often than this reads its columns whole again.
 */
export const PRUNE_AFTER_MS = 10 * 60_000;
/** The marked profiles one run of the job takes; more run it again. */
const CHANGES_PER_RUN = 5_000;

/** A live segment as the API answers it. */
export interface LiveSegmentView {
  segment_discriminator: string;
  live: boolean;
  time_zone: string | null;
  version_id: string | null;
  size: number | null;
  live_since: string | null;
  refreshed_at: string | null;
  evaluated_at: string | null;
  /** Whether this process counts the account's stored segments from its projection (projectionState). */
  projection: 'ready' | 'reading' | 'none';
}

function segmentOf(scope: AccountScope, discriminator: string): SegmentDef {
  const segment = scope.defs.segments.find((s) => s.discriminator === discriminator);
  if (!segment) throw new Problem('AUD-1104', `Segment "${discriminator}" does not exist`);
  return segment;
}

/** The expression of a segment's latest version, refused (403) when it reads a section the caller may not. */
function latestExpression(scope: AccountScope, segment: SegmentDef): Expression {
  const latest = segment.versions.at(-1);
  if (!latest) throw new Problem('AUD-1711', `segment: segment "${segment.discriminator}" has no version`);
  return readableExpression(scope, latest.query, 'segment');
}

/**
 * Makes a segment live in a time zone (or changes its time zone): the job then computes its
 * membership whole. Only a key of every section may: its entries and exits go to webhooks.
 */
export async function makeLive(
  tx: Queryable,
  pool: pg.Pool,
  scope: AccountScope,
  feed: ChangeFeed,
  discriminator: string,
  body: { time_zone: string },
): Promise<LiveSegmentView> {
  requireAllSections(scope, 'a live segment');
  const segment = segmentOf(scope, discriminator);
  latestExpression(scope, segment);
  const timeZone = checkTimeZone(body.time_zone, 'time_zone');
  await setSegmentLive(tx, scope, feed, discriminator, timeZone);
  return view(tx, pool, scope, { ...segment, live_time_zone: timeZone });
}

/** Makes a segment not live: its membership and recorded changes are forgotten by the job. */
export async function stopLive(
  tx: Queryable,
  scope: AccountScope,
  feed: ChangeFeed,
  discriminator: string,
): Promise<void> {
  requireAllSections(scope, 'a live segment');
  segmentOf(scope, discriminator);
  await setSegmentLive(tx, scope, feed, discriminator, null);
}

/** A segment's live state: whether it is live, its size and when it was brought up to date. */
export async function liveSegment(
  db: Queryable,
  pool: pg.Pool,
  scope: AccountScope,
  discriminator: string,
): Promise<LiveSegmentView> {
  const segment = segmentOf(scope, discriminator);
  latestExpression(scope, segment);
  return view(db, pool, scope, segment);
}

async function view(db: Queryable, pool: pg.Pool, scope: AccountScope, segment: SegmentDef): Promise<LiveSegmentView> {
  const live = segment.live_time_zone !== null;
  const state = live ? await q.findLiveSegment(db, scope.accountId, segment.id) : undefined;
  // A state of another version or time zone is being computed again: its members are not this one's.
  const current =
    state &&
    state.version_id === segment.versions.at(-1)?.id &&
    state.time_zone === segment.live_time_zone &&
    state.evaluated_at !== null
      ? state
      : undefined;
  return {
    segment_discriminator: segment.discriminator,
    live,
    time_zone: segment.live_time_zone,
    version_id: current?.version_id ?? null,
    size: current ? Number(current.size) : null,
    live_since: state?.live_since.toISOString() ?? null,
    refreshed_at: current?.refreshed_at?.toISOString() ?? null,
    evaluated_at: current?.evaluated_at?.toISOString() ?? null,
    projection: projectionState(pool, scope, projectableTerms(scope)),
  };
}

/** The terms of the account's stored segments (their latest versions) whose counts the projection answers. */
function projectableTerms(scope: AccountScope): (AttributeTerm | EventTerm)[] {
  const terms: (AttributeTerm | EventTerm)[] = [];
  for (const segment of scope.defs.segments) {
    const latest = segment.versions.at(-1);
    if (!latest) continue;
    let expression: Expression;
    try {
      expression = storedExpression(scope.defs, latest.query);
    } catch {
      continue; // a query that no longer compiles: its counts are refused, not projected
    }
    if (projectable(expression)) terms.push(...termsOf(expression));
  }
  return terms;
}

/**
 * Reads this process's count projections ahead (docs/aql.md "Counts from a projection"), so that
 * the counts of stored segments are projected from the first one instead of SQL's until a count
 * has started the read: at the start, of the accounts with a live segment (the newest
 * ACCOUNTS_KEPT), and again whenever an account's definitions change (a segment made live, a
 * segment or an attribute changed). One account at a time, each read a batch of rows at a time
 * on one connection; `projection` of a live segment's state says when it is done. Logs every
 * read whole of the pool's projections that fails, also those that counts and trends start.
 * Returns what stops it (after the read under way).
 */
export function readProjectionsAhead(deps: {
  pool: pg.Pool;
  feed: ChangeFeed;
  /** The scope of an account; undefined for one that no longer exists. */
  scopeOf: (accountId: string) => Promise<AccountScope | undefined>;
  log: (msg: string, err: unknown) => void;
}): () => Promise<void> {
  const pending = new Set<string>();
  let running: Promise<void> | undefined;
  let stopped = false;
  const each = async (accountId: string) => {
    if (accountId === '*') {
      for (const id of await accountsWithLiveSegments(deps.pool, ACCOUNTS_KEPT)) pending.add(id);
      return;
    }
    const scope = await deps.scopeOf(accountId);
    if (scope) await readAhead(deps.pool, scope, projectableTerms(scope));
  };
  const drain = async () => {
    // A Set visits what is added while it is visited, and an account added again after its visit.
    for (const accountId of pending) {
      pending.delete(accountId);
      if (stopped) return;
      await each(accountId).catch((err: unknown) => {
        if (!stopped) deps.log('reading a count projection ahead failed', err);
      });
    }
  };
  const start = (accountId: string) => {
    if (stopped) return;
    pending.add(accountId);
    running ??= drain().finally(() => {
      running = undefined;
      if (pending.size > 0) start(pending.values().next().value!);
    });
  };
  onDefinitionsChanged(deps.feed, start);
  // Reads whole started by counts and trends too, which no caller waits for.
  const unheard = onReadFailed(deps.pool, (err) => deps.log('reading a count projection failed', err));
  start('*');
  return async () => {
    stopped = true;
    unheard();
    pending.clear();
    await running;
  };
}

/** Whether an expression's meaning moves with time: an event term with an `inLast` window. */
function movesWithTime(expression: Expression): boolean {
  return termsOf(expression).some((t) => t.kind === 'event' && t.window?.kind === 'inLast');
}

/**
 * What writes can change whether a profile matches an expression, as CHANGED's bits: section data
 * for its attribute terms, events for its event terms (the value of `&&` and `||` changes only
 * with a term's).
 */
function changedBy(expression: Expression): number {
  return termsOf(expression).reduce((bits, t) => bits | (t.kind === 'attribute' ? CHANGED.data : CHANGED.events), 0);
}

/**
 * The live segments job of an account, in one transaction that holds the account's live segments
 * locked: forgets segments no longer live; computes whole a segment made live, or of a new version
 * or time zone (no webhook events for a first computation: it is the membership's start); takes
 * the marked profiles and evaluates each live segment over those whose writes can change it
 * (changedBy; their clusters' canonical profiles now), recording and sending each entry and exit,
 * and records for all that they are brought up to date; with `sweep`, evaluates whole each
 * segment with a moving window, and schedules the next sweep; prunes the count projections'
 * marks (pruneProjectionMarks), and schedules a sweep while marks are left.
 */
export async function runLiveSegments(
  deps: { pool: pg.Pool; scopeOf: (accountId: string) => Promise<AccountScope> },
  job: Job<typeof LIVE_SEGMENTS_JOB>,
): Promise<void> {
  const scope = await deps.scopeOf(job.accountId);
  const { accountId } = scope;
  await withTransaction(deps.pool, async (tx) => {
    const states = await q.lockLiveSegments(tx, accountId);
    const live = scope.defs.segments.filter((s) => s.live_time_zone !== null && s.versions.length > 0);
    const gone = states.filter((st) => !live.some((s) => s.id === st.segment_id)).map((st) => st.segment_id);
    if (gone.length > 0) await q.deleteLiveSegments(tx, accountId, gone);
    const changes = await takeProfileChanges(tx, scope, CHANGES_PER_RUN);
    /** The marked profiles whose writes changed any of `kinds`, and their clusters' canonical profiles now. */
    const candidatesOf = (kinds: number) => [
      ...new Set(
        changes
          .filter((c) => (c.kinds & kinds) !== 0)
          .flatMap((c) => (c.canonical_id === null ? [c.profile_id] : [c.profile_id, c.canonical_id])),
      ),
    ];
    const refreshed: string[] = [];
    const evaluatedWhole: string[] = [];
    const targets: Target[] = [];
    let moving = false;
    for (const segment of live) {
      const version = segment.versions.at(-1)!;
      const timeZone = segment.live_time_zone!;
      const expression = storedExpression(scope.defs, version.query);
      moving ||= movesWithTime(expression);
      const state = states.find((st) => st.segment_id === segment.id);
      const fresh = !state || state.version_id !== version.id || state.time_zone !== timeZone;
      if (fresh)
        await q.upsertLiveSegment(tx, accountId, {
          segmentId: segment.id,
          versionId: version.id,
          timeZone,
          now: scope.now,
        });
      const whole = fresh || state.evaluated_at === null || (!!job.payload.sweep && movesWithTime(expression));
      const candidates = whole ? null : candidatesOf(changedBy(expression));
      if (whole) evaluatedWhole.push(segment.id);
      // Writes that cannot change the segment leave it up to date with them.
      if (whole || changes.length > 0) refreshed.push(segment.id);
      if (candidates?.length === 0) continue;
      targets.push({
        segment,
        expression,
        candidates,
        // A first computation is the membership's start, not entries; a new version's changes are.
        report: !(state === undefined || state.evaluated_at === null),
      });
    }
    await bringUpToDate(tx, scope, targets);
    if (refreshed.length > 0)
      await q.markLiveSegmentsRefreshed(tx, accountId, {
        segmentIds: refreshed,
        whole: evaluatedWhole,
        now: scope.now,
      });
    if (changes.length === CHANGES_PER_RUN) await refreshLiveSegments(tx, accountId);
    // The projections' marks are pruned here too, and swept again while any are left.
    const marks = await pruneProjectionMarks(tx, scope, PRUNE_AFTER_MS);
    if (moving || marks.left)
      await enqueueUnlessWaiting(
        tx,
        accountId,
        LIVE_SEGMENTS_JOB,
        { sweep: true },
        new Date(scope.now.getTime() + SWEEP_MS),
      );
  });
}

/** A live segment to bring up to date: over its candidates (null: all profiles), reporting its changes or not. */
interface Target {
  segment: SegmentDef;
  expression: Expression;
  candidates: string[] | null;
  report: boolean;
}

/** Applies the segments' evaluations now to their members, in one statement, recording and sending the changes. */
async function bringUpToDate(tx: Queryable, scope: AccountScope, targets: Target[]): Promise<void> {
  if (targets.length === 0) return;
  const values = new SqlValues();
  const account = values.add(scope.accountId, 'bigint');
  const changes = await q.applyMemberships(
    tx,
    { account, values, now: scope.now },
    targets.map((t) => ({
      segmentId: t.segment.id,
      text: compilePredicate(
        t.expression,
        { account, now: scope.now.getTime(), timeZone: t.segment.live_time_zone! },
        values,
      ),
      candidates: t.candidates,
      report: t.report,
    })),
  );
  const discriminators = new Map(targets.map((t) => [t.segment.id, t.segment.discriminator]));
  const at = scope.now.toISOString();
  for (const [type, entered] of [
    ['segment.entered', true],
    ['segment.exited', false],
  ] as const) {
    const these = changes.filter((c) => c.entered === entered);
    // Without changes, not even the subscription is read.
    if (these.length > 0)
      await recordWebhookEvents(tx, scope.accountId, type, () =>
        these.map((c) => ({
          orderingKey: c.profile_id,
          data: {
            segment_discriminator: discriminators.get(c.segment_id)!,
            profile: { export_key: c.export_key },
            at,
          },
        })),
      );
  }
}

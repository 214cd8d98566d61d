import type pg from 'pg';
import { termsOf, type AttributeTerm, type EventTerm, type Expression } from '../aql/ast.ts';
import { timestamp } from '../aql/compile-sql.ts';
import { windowBounds } from '../aql/time.ts';
import type { Definitions } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';
import { hasLiveSegments } from '../definitions/definitions.ts';
import { cursorBatches } from '../store/cursor.ts';
import { hasCitus } from '../store/distribute.ts';
import { withTransaction } from '../store/pool.ts';
import * as q from '../profiles/projection-facts.ts';

/**
 * Counts from a projection (docs/aql.md "Counts from a projection"). A count of a query whose
 * terms are all number comparisons of attributes and event terms without data conditions is
 * answered from columns kept in this process: per canonical profile of the account, the number
 * value of each attribute version a count asked for, and the first and last time of each event
 * version (over its cluster). A count then tests a million values in a few milliseconds instead of
 * reading a million section rows and the events of a window.
 *
 * The state is PostgreSQL's: the columns are read from the section rows and the event sums, in a
 * repeatable read transaction whose snapshot they then stand for, and brought up to date before
 * every count, in the count's own transaction, with the profiles that the writes the columns'
 * snapshot did not see have marked (projection_marks, written with profile_changes by every write
 * that marks its profiles for the live segments). The count is thus exact as of its own snapshot,
 * in any process. Writes are marked only in accounts with a live segment (the attribute writes of
 * the others take a path without marks), so only their counts are projected; after any change of
 * the definitions the columns are read again whole, since writes may have gone unmarked meanwhile.
 *
 * What the columns cannot answer exactly is answered by SQL: an event window that lies strictly
 * between a cluster's first and last event (a future event, say) is looked up in the events for
 * those profiles; a number with more than 15 significant digits, or a term of another form (text
 * and boolean conditions, event data, struct paths), or a known/unknown split, makes the whole
 * count SQL's (the caller's). On Citus the projection is off: its snapshots are the workers'.
 */

/** At most this many accounts' columns are kept per database, the least recently counted dropped. */
export const ACCOUNTS_KEPT = 8;
/** Rows read at a time when columns are read whole: memory holds a batch of rows, never all of them. */
const BATCH = 20_000;
/** More profiles than this in undecided event windows: the count is SQL's. */
const MAX_UNDECIDED = 20_000;
/** Doubles hold every integer up to this exactly: times (µs) beyond it are looked up. */
const EXACT_MICROS = 2 ** 53;

interface NumberColumn {
  kind: 'number';
  sectionId: string;
  versionId: string;
  /** Per slot: the value, NaN for none (or not a number). */
  values: Float64Array;
  /** Slots whose value a double does not hold exactly enough (more than 15 significant digits). */
  inexact: Set<number>;
}

interface EventColumn {
  kind: 'event';
  sectionId: string;
  versionId: string;
  /** Per slot: the first and last event time of the cluster in µs since 1970, NaN for none. */
  first: Float64Array;
  last: Float64Array;
  /** Slots with a time beyond what a double holds to the microsecond. */
  inexact: Set<number>;
}

type Column = NumberColumn | EventColumn;

/** One account's columns, as of `snapshot`. */
class AccountProjection {
  readonly defs: Definitions;
  snapshot = '';
  /** Profile id → slot; a slot is a canonical profile while `alive`. */
  readonly slotOf = new Map<number, number>();
  alive = new Uint8Array(1024);
  size = 0;
  readonly columns = new Map<string, Column>();
  /** The term each column was made for, by key: what a new read whole reads again. */
  readonly terms = new Map<string, AttributeTerm | EventTerm>();

  constructor(defs: Definitions) {
    this.defs = defs;
  }

  /** The slot of a canonical profile, made for it when it has none. */
  slot(profileId: string): number {
    const id = Number(profileId);
    if (!Number.isSafeInteger(id)) throw new Error(`profile id ${profileId} beyond the projection's ids`);
    let slot = this.slotOf.get(id);
    if (slot === undefined) {
      slot = this.size++;
      if (slot >= this.alive.length) this.grow(this.alive.length * 2);
      this.slotOf.set(id, slot);
      for (const c of this.columns.values()) clear(c, slot);
    }
    this.alive[slot] = 1;
    return slot;
  }

  private grow(capacity: number): void {
    const more = (a: Float64Array) => {
      const b = new Float64Array(capacity).fill(NaN);
      b.set(a);
      return b;
    };
    const alive = new Uint8Array(capacity);
    alive.set(this.alive);
    this.alive = alive;
    for (const c of this.columns.values()) {
      if (c.kind === 'number') c.values = more(c.values);
      else {
        c.first = more(c.first);
        c.last = more(c.last);
      }
    }
  }

  newColumn(key: string, term: AttributeTerm | EventTerm): Column {
    const empty = () => new Float64Array(this.alive.length).fill(NaN);
    const column: Column =
      term.kind === 'attribute'
        ? { kind: 'number', sectionId: term.sectionId, versionId: term.versionId, values: empty(), inexact: new Set() }
        : {
            kind: 'event',
            sectionId: term.sectionId,
            versionId: term.versionId,
            first: empty(),
            last: empty(),
            inexact: new Set(),
          };
    this.columns.set(key, column);
    this.terms.set(key, term);
    return column;
  }
}

function clear(c: Column, slot: number): void {
  c.inexact.delete(slot);
  if (c.kind === 'number') c.values[slot] = NaN;
  else c.first[slot] = c.last[slot] = NaN;
}

const keyOf = (t: AttributeTerm | EventTerm) => `${t.kind}:${t.sectionId}:${t.versionId}`;

/** The significant digits of a decimal number's text (as PostgreSQL's numeric or JavaScript's String write it). */
function significantDigits(text: string): number {
  const mantissa = text.replace(/^[-+]/, '').split(/[eE]/)[0].replace('.', '');
  return mantissa.replace(/^0+/, '').replace(/0+$/, '').length;
}

/**
 * A number as a double that orders exactly as the decimal does against any other of at most 15
 * significant digits (DBL_DIG: such decimals map to distinct doubles, in order, within the normal
 * range); undefined when it may not.
 */
function exactDouble(text: string): number | undefined {
  const x = Number(text);
  if (!Number.isFinite(x) || (x !== 0 && Math.abs(x) < 1e-300) || significantDigits(text) > 15) return undefined;
  return x;
}

/** Whether the projection answers a term: a number comparison of an attribute, an event term without data conditions. */
function covered(t: AttributeTerm | EventTerm): boolean {
  if (t.kind === 'event') return t.conditions.length === 0;
  const c = t.condition;
  return c.path.length === 0 && typeof c.value === 'number' && exactDouble(String(c.value)) !== undefined;
}

/** Whether the projection can answer counts of `expression`: every term is one it holds. */
export function projectable(expression: Expression): boolean {
  return termsOf(expression).every(covered);
}

/** Reads a column's values: of the canonical profiles `ids`, or of all, whole, through a cursor a batch at a time. */
async function fill(
  db: pg.PoolClient,
  accountId: string,
  p: AccountProjection,
  c: Column,
  ids: string[] | null,
): Promise<void> {
  const statement =
    c.kind === 'number' ? q.numberValuesStatement(accountId, c, ids) : q.eventSpansStatement(accountId, c, ids);
  const batches: AsyncIterable<unknown[][]> | unknown[][][] = ids
    ? [await q.arrayRows(db, statement)]
    : cursorBatches(db, statement, BATCH);
  for await (const rows of batches)
    for (const row of rows as string[][]) {
      const slot = p.slotOf.get(Number(row[0]));
      if (slot === undefined || !p.alive[slot]) continue;
      if (c.kind === 'number') {
        const x = exactDouble(row[1]);
        if (x === undefined) c.inexact.add(slot);
        else c.values[slot] = x;
        continue;
      }
      c.first[slot] = Number(row[1]);
      c.last[slot] = Number(row[2]);
      if (Math.abs(c.first[slot]) >= EXACT_MICROS || Math.abs(c.last[slot]) >= EXACT_MICROS) c.inexact.add(slot);
    }
}

/** Reads the account's canonical profiles and the columns the terms need, whole, as of the transaction's snapshot. */
async function readWhole(db: pg.PoolClient, scope: AccountScope, terms: (AttributeTerm | EventTerm)[]) {
  const p = new AccountProjection(scope.defs);
  p.snapshot = (await q.snapshotAndMarks(db, scope.accountId, null)).snapshot;
  for await (const rows of cursorBatches(db, q.canonicalProfilesStatement(scope.accountId, null), BATCH))
    for (const row of rows) p.slot(row[0] as string);
  for (const t of terms)
    if (!p.columns.has(keyOf(t))) await fill(db, scope.accountId, p, p.newColumn(keyOf(t), t), null);
  return p;
}

/**
 * Brings columns up to date with the writes their snapshot did not see: each marked profile loses
 * its slot, and the canonical profiles of the marked ones that still exist are read again, in
 * every column. False when marks the snapshot did not see may have been pruned since (the
 * columns are then read whole).
 */
async function refresh(db: pg.PoolClient, scope: AccountScope, p: AccountProjection): Promise<boolean> {
  const { snapshot, marked, pruned } = await q.snapshotAndMarks(db, scope.accountId, p.snapshot);
  if (pruned) return false;
  if (marked.length > 0) {
    for (const id of marked) {
      const slot = p.slotOf.get(Number(id));
      if (slot === undefined) continue;
      p.alive[slot] = 0;
      for (const c of p.columns.values()) clear(c, slot);
    }
    const found = await q.canonicalOf(db, scope.accountId, marked);
    const canonical = await q.canonicalProfiles(db, scope.accountId, [...new Set(found.map((f) => f.canonical))]);
    for (const id of canonical) {
      const slot = p.slot(id);
      for (const c of p.columns.values()) clear(c, slot);
    }
    for (const c of p.columns.values()) await fill(db, scope.accountId, p, c, canonical);
  }
  p.snapshot = snapshot;
  return true;
}

/** Per slot, whether a term holds (1) or not (0); undefined when the projection cannot tell (the count is SQL's). */
async function termMatches(
  db: pg.PoolClient,
  scope: AccountScope,
  p: AccountProjection,
  t: AttributeTerm | EventTerm,
  timeZone: string,
): Promise<Uint8Array | undefined> {
  const n = p.size;
  const out = new Uint8Array(n);
  const column = p.columns.get(keyOf(t))!;
  if (column.kind === 'number') {
    if (t.kind !== 'attribute' || column.inexact.size > 0) return undefined;
    const v = column.values;
    const c = t.condition.value as number;
    // NaN (no number) meets no comparison; neq says so itself.
    switch (t.condition.comparator) {
      case 'eq':
        for (let i = 0; i < n; i++) out[i] = v[i] === c ? 1 : 0;
        break;
      case 'neq':
        for (let i = 0; i < n; i++) out[i] = v[i] === v[i] && v[i] !== c ? 1 : 0;
        break;
      case 'lt':
        for (let i = 0; i < n; i++) out[i] = v[i] < c ? 1 : 0;
        break;
      case 'lte':
        for (let i = 0; i < n; i++) out[i] = v[i] <= c ? 1 : 0;
        break;
      case 'gt':
        for (let i = 0; i < n; i++) out[i] = v[i] > c ? 1 : 0;
        break;
      case 'gte':
        for (let i = 0; i < n; i++) out[i] = v[i] >= c ? 1 : 0;
        break;
    }
    return out;
  }
  if (t.kind !== 'event') return undefined;
  const { first, last } = column;
  if (!t.window) {
    for (let i = 0; i < n; i++) out[i] = first[i] === first[i] ? 1 : 0;
    return out;
  }
  const bounds = windowBounds(t.window, scope.now.getTime(), timeZone);
  const s = bounds.start * 1000;
  const e = bounds.end * 1000;
  // The cluster's events lie in [first, last], at both ends: a window holding either end holds an
  // event, one outside [first, last] none; one strictly inside it is looked up.
  const undecided: number[] = [];
  for (let i = 0; i < n; i++) {
    const f = first[i];
    const l = last[i];
    if (!(f === f) || l < s || f > e) continue;
    if ((l >= s && l <= e) || (f >= s && f <= e)) out[i] = 1;
    else undecided.push(i);
  }
  for (const i of column.inexact) if (!undecided.includes(i)) undecided.push(i);
  if (undecided.length > MAX_UNDECIDED) return undefined;
  if (undecided.length > 0) {
    const idOf = new Map<number, number>();
    for (const [id, slot] of p.slotOf) if (p.alive[slot]) idOf.set(slot, id);
    const ids = undecided.filter((i) => idOf.has(i)).map((i) => String(idOf.get(i)));
    for (const i of undecided) out[i] = 0;
    const found = await q.withEventBetween(
      db,
      scope.accountId,
      { ...t, start: timestamp(bounds.start), end: timestamp(bounds.end) },
      ids,
    );
    for (const id of found) out[p.slotOf.get(Number(id))!] = 1;
  }
  return out;
}

/** Per slot, whether the expression holds; undefined when a term cannot tell. */
async function matches(
  db: pg.PoolClient,
  scope: AccountScope,
  p: AccountProjection,
  e: Expression,
  timeZone: string,
): Promise<Uint8Array | undefined> {
  if (e.kind === 'attribute' || e.kind === 'event') return termMatches(db, scope, p, e, timeZone);
  let acc: Uint8Array | undefined;
  for (const t of e.terms) {
    const m = await matches(db, scope, p, t, timeZone);
    if (!m) return undefined;
    if (!acc) acc = m;
    else if (e.kind === 'and') for (let i = 0; i < acc.length; i++) acc[i] &= m[i];
    else for (let i = 0; i < acc.length; i++) acc[i] |= m[i];
  }
  return acc;
}

/** The accounts' projections of a database (its pool), the reads whole under way, and the tail of each account's queue of counts. */
const projections = new WeakMap<pg.Pool, Map<string, AccountProjection>>();
const builds = new WeakMap<pg.Pool, Map<string, Promise<void>>>();
const queues = new WeakMap<pg.Pool, Map<string, Promise<unknown>>>();
const citus = new WeakMap<pg.Pool, Promise<boolean>>();

/** What countNow answers when the account's columns must first be read whole. */
const UNBUILT = Symbol('unbuilt');

/**
 * The count of the canonical profiles for which `expression` holds now, from the projection;
 * undefined when the projection does not answer it (the caller counts with SQL): an account
 * without marked writes, a term it cannot express, a value it cannot hold exactly, Citus, or
 * columns not read yet. Those are then read whole in the background (at 1,000,000 profiles, tens
 * of seconds on a loaded machine), and counts are SQL's until they are ready; with `wait`, the
 * count waits for them instead. A process that serves the API reads the columns of stored segments
 * ahead (readProjectionsAhead, src/segments/live.ts), so that their counts need not start it.
 */
export async function projectedCount(
  pool: pg.Pool,
  scope: AccountScope,
  expression: Expression,
  timeZone: string,
  options: { wait?: boolean } = {},
): Promise<number | undefined> {
  const terms = termsOf(expression);
  if (!hasLiveSegments(scope.defs) || !terms.every(covered) || (await onCitus(pool))) return undefined;
  for (;;) {
    const answer = await queued(pool, scope.accountId, () => countNow(pool, scope, expression, terms, timeZone));
    if (answer !== UNBUILT) return answer;
    const built = buildInBackground(pool, scope, terms);
    if (!options.wait) return undefined;
    await built;
  }
}

/** Whether the pool's database is a Citus cluster (asked once per pool): the projection is then off. */
function onCitus(pool: pg.Pool): Promise<boolean> {
  let answer = citus.get(pool);
  if (!answer) citus.set(pool, (answer = hasCitus(pool)));
  return answer;
}

/** Whether this process keeps the account's columns of `terms` as of the scope's definitions. */
function holds(pool: pg.Pool, scope: AccountScope, terms: (AttributeTerm | EventTerm)[]): boolean {
  const p = projections.get(pool)?.get(scope.accountId);
  return !!p && p.defs === scope.defs && terms.every((t) => p.columns.has(keyOf(t)));
}

/**
 * Reads the account's columns of `terms` (terms the projection answers) whole, unless this process
 * keeps them as of the scope's definitions, and waits for the read: so that the counts that need
 * them are projected from the first one. A read under way is waited for first, and one read at
 * most is started: a scope whose definitions have changed since is not read again and again
 * against the counts' newer one. Nothing without a live segment, or on Citus.
 */
export async function readAhead(pool: pg.Pool, scope: AccountScope, terms: (AttributeTerm | EventTerm)[]) {
  if (!hasLiveSegments(scope.defs) || terms.length === 0 || (await onCitus(pool))) return;
  await builds
    .get(pool)
    ?.get(scope.accountId)
    ?.catch(() => {});
  if (!holds(pool, scope, terms)) await buildInBackground(pool, scope, terms);
}

/**
 * What this process's projection of the account holds for `terms`: `ready` (their columns are kept
 * as of the scope's definitions: counts that need only them are projected), `reading` (a read
 * whole of the account's columns is under way) or `none`.
 */
export function projectionState(
  pool: pg.Pool,
  scope: AccountScope,
  terms: (AttributeTerm | EventTerm)[],
): 'ready' | 'reading' | 'none' {
  if (hasLiveSegments(scope.defs) && terms.length > 0 && holds(pool, scope, terms)) return 'ready';
  return builds.get(pool)?.has(scope.accountId) ? 'reading' : 'none';
}

/** Runs `run` after the account's counts before it in this process: they share its columns. */
async function queued<T>(pool: pg.Pool, accountId: string, run: () => Promise<T>): Promise<T> {
  let queue = queues.get(pool);
  if (!queue) queues.set(pool, (queue = new Map()));
  const previous = queue.get(accountId) ?? Promise.resolve();
  const next = previous.then(run, run);
  queue.set(accountId, next);
  try {
    return await next;
  } finally {
    if (queue.get(accountId) === next) queue.delete(accountId);
  }
}

/**
 * Reads the account's columns whole (those the terms need, and those its projection had), in a
 * repeatable read transaction of its own, unless such a read is under way; the projection then
 * kept is brought up to date by the next count. A failed read is forgotten (the next count tries
 * again) and answers its error to a caller that waits for it.
 */
function buildInBackground(pool: pg.Pool, scope: AccountScope, terms: (AttributeTerm | EventTerm)[]): Promise<void> {
  let running = builds.get(pool);
  if (!running) builds.set(pool, (running = new Map()));
  const under = running.get(scope.accountId);
  if (under) return under;
  const kept = projections.get(pool)?.get(scope.accountId);
  const wanted = [...terms, ...(kept && kept.defs === scope.defs ? kept.terms.values() : [])];
  const build = inTransaction(pool, (client) => readWhole(client, scope, wanted)).then((p) => {
    let all = projections.get(pool);
    if (!all) projections.set(pool, (all = new Map()));
    all.delete(scope.accountId);
    all.set(scope.accountId, p);
    for (const account of all.keys()) if (all.size > ACCOUNTS_KEPT) all.delete(account);
  });
  const settled = build.finally(() => running.delete(scope.accountId));
  settled.catch(() => {});
  running.set(scope.accountId, settled);
  return settled;
}

/** Runs `work` in a read-only repeatable read transaction of a connection of its own. */
function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(pool, work, 'begin isolation level repeatable read read only');
}

async function countNow(
  pool: pg.Pool,
  scope: AccountScope,
  expression: Expression,
  terms: (AttributeTerm | EventTerm)[],
  timeZone: string,
): Promise<number | typeof UNBUILT | undefined> {
  const kept = projections.get(pool);
  const p = kept?.get(scope.accountId);
  if (!kept || !p || p.defs !== scope.defs || !terms.every((t) => p.columns.has(keyOf(t)))) return UNBUILT;
  kept.delete(scope.accountId);
  const m = await inTransaction(pool, async (client) =>
    (await refresh(client, scope, p)) ? ((await matches(client, scope, p, expression, timeZone)) ?? null) : UNBUILT,
  );
  if (m === UNBUILT) return UNBUILT;
  kept.set(scope.accountId, p);
  if (!m) return undefined;
  let count = 0;
  for (let i = 0; i < m.length; i++) count += m[i] & p.alive[i];
  return count;
}

import type pg from 'pg';
import { termsOf, type AttributeTerm, type Comparator, type EventTerm, type Expression } from '../aql/ast.ts';
import { timestamp, trendWindows } from '../aql/compile-sql.ts';
import { windowBounds } from '../aql/time.ts';
import type { Definitions } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';
import { hasLiveSegments, knownKeyspaceIds } from '../definitions/definitions.ts';
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
 *
 * Trends of the same queries are answered from columns of their own, read by the first trend that
 * needs them and kept up to date in the same way: per slot, the canonical profile's creation time
 * and whether it is known, each attribute version's values over the cluster as spans of time (the
 * replaced values of attribute_history and the current ones from their set times), and each event
 * version's times over the cluster, sorted. A trend then tests, per point and slot, each term at
 * that point, as compileMasks does in SQL. A value or time a double does not hold exactly makes the
 * whole trend SQL's.
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

/**
 * Records of a few doubles per slot, in compressed rows: a trend's spans of attribute values
 * [from, until, value] (µs since 1970, until Infinity for a current value) or event times [µs],
 * sorted. The rows read whole are `data`, slot i's from start[i] to end[i] (in records); a slot made
 * or re-read since is `moved`, its records in `own` (none when absent).
 */
interface ListColumn {
  kind: 'spans' | 'times';
  sectionId: string;
  versionId: string;
  /** Doubles per record: 3 for spans, 1 for times. */
  width: number;
  start: Int32Array;
  end: Int32Array;
  data: Float64Array;
  moved: Uint8Array;
  own: Map<number, Float64Array>;
  /** Slots with a value or a time a double does not hold exactly. */
  inexact: Set<number>;
}

/** What a trend needs of every slot: when its canonical profile was created, and whether it is known. */
interface ProfileColumn {
  kind: 'profiles';
  /** Per slot: the creation time in µs since 1970, NaN for none. */
  created: Float64Array;
  /** Per slot: 1 when a member of the cluster has an identifier in a keyspace that makes a profile known. */
  known: Uint8Array;
  /** Slots whose creation time a double does not hold to the microsecond. */
  inexact: Set<number>;
}

type Column = NumberColumn | EventColumn | ListColumn | ProfileColumn;

/** A column a count or a trend needs: its kind, and the attribute or event version (none for `profiles`). */
interface Need {
  kind: Column['kind'];
  sectionId: string;
  versionId: string;
}

/** The columns a count of the terms reads. */
const countNeeds = (terms: (AttributeTerm | EventTerm)[]): Need[] =>
  terms.map((t): Need => ({
    kind: t.kind === 'attribute' ? 'number' : 'event',
    sectionId: t.sectionId,
    versionId: t.versionId,
  }));

/** The columns a trend of the terms reads. */
const trendNeeds = (terms: (AttributeTerm | EventTerm)[]): Need[] => [
  { kind: 'profiles', sectionId: '', versionId: '' },
  ...terms.map((t): Need => ({
    kind: t.kind === 'attribute' ? 'spans' : 'times',
    sectionId: t.sectionId,
    versionId: t.versionId,
  })),
];

const keyOf = (n: Need) => `${n.kind}:${n.sectionId}:${n.versionId}`;

const EMPTY = new Float64Array(0);

/** One account's columns, as of `snapshot`. */
class AccountProjection {
  readonly defs: Definitions;
  snapshot = '';
  /** Profile id → slot; a slot is a canonical profile while `alive`. */
  readonly slotOf = new Map<number, number>();
  alive = new Uint8Array(1024);
  size = 0;
  readonly columns = new Map<string, Column>();
  /** What each column was made for, by key: what a new read whole reads again. */
  readonly needs = new Map<string, Need>();

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
    const wider = <T extends Uint8Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(capacity);
      b.set(a);
      return b;
    };
    const bytes = (n: number) => new Uint8Array(n);
    const ints = (n: number) => new Int32Array(n);
    this.alive = wider(this.alive, bytes);
    for (const c of this.columns.values()) {
      if (c.kind === 'number') c.values = more(c.values);
      else if (c.kind === 'event') {
        c.first = more(c.first);
        c.last = more(c.last);
      } else if (c.kind === 'profiles') {
        c.created = more(c.created);
        c.known = wider(c.known, bytes);
      } else {
        c.start = wider(c.start, ints);
        c.end = wider(c.end, ints);
        c.moved = wider(c.moved, bytes);
      }
    }
  }

  newColumn(need: Need): Column {
    const n = this.alive.length;
    const empty = () => new Float64Array(n).fill(NaN);
    const { sectionId, versionId } = need;
    let column: Column;
    switch (need.kind) {
      case 'number':
        column = { kind: 'number', sectionId, versionId, values: empty(), inexact: new Set() };
        break;
      case 'event':
        column = { kind: 'event', sectionId, versionId, first: empty(), last: empty(), inexact: new Set() };
        break;
      case 'profiles':
        column = { kind: 'profiles', created: empty(), known: new Uint8Array(n), inexact: new Set() };
        break;
      case 'spans':
      case 'times':
        column = {
          kind: need.kind,
          sectionId,
          versionId,
          width: need.kind === 'spans' ? 3 : 1,
          start: new Int32Array(n),
          end: new Int32Array(n),
          data: EMPTY,
          moved: new Uint8Array(n),
          own: new Map(),
          inexact: new Set(),
        };
        break;
    }
    this.columns.set(keyOf(need), column);
    this.needs.set(keyOf(need), need);
    return column;
  }
}

function clear(c: Column, slot: number): void {
  c.inexact.delete(slot);
  switch (c.kind) {
    case 'number':
      c.values[slot] = NaN;
      return;
    case 'event':
      c.first[slot] = c.last[slot] = NaN;
      return;
    case 'profiles':
      c.created[slot] = NaN;
      c.known[slot] = 0;
      return;
    default:
      c.moved[slot] = 1;
      c.own.delete(slot);
  }
}

/** The records of a slot in a list column: `data` from `from` to `to` (doubles, not records). */
function recordsOf(c: ListColumn, slot: number): { data: Float64Array; from: number; to: number } {
  if (c.moved[slot]) {
    const own = c.own.get(slot) ?? EMPTY;
    return { data: own, from: 0, to: own.length };
  }
  return { data: c.data, from: c.start[slot] * c.width, to: c.end[slot] * c.width };
}

/**
 * Makes the records of the slots re-read since the last read whole (`own`) part of `data` again, so
 * that the map of them stays small (every slot of a busy account is marked in time).
 */
function compact(c: ListColumn, size: number): void {
  let total = 0;
  for (let i = 0; i < size; i++) {
    const r = recordsOf(c, i);
    total += r.to - r.from;
  }
  const data = new Float64Array(total);
  let at = 0;
  for (let i = 0; i < size; i++) {
    const r = recordsOf(c, i);
    data.set(r.data.subarray(r.from, r.to), at);
    c.start[i] = at / c.width;
    at += r.to - r.from;
    c.end[i] = at / c.width;
    c.moved[i] = 0;
  }
  c.data = data;
  c.own.clear();
}

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

/** Whether the projection can answer counts and trends of `expression`: every term is one it holds. */
export function projectable(expression: Expression): boolean {
  return termsOf(expression).every(covered);
}

/** The rows of a statement: of some profiles in one query, or of all through a cursor, a batch at a time. */
async function* rowsOf(
  db: pg.PoolClient,
  statement: { text: string; values: unknown[] },
  ids: string[] | null,
): AsyncIterable<string[][]> {
  if (ids) yield await q.arrayRows(db, statement);
  else for await (const rows of cursorBatches(db, statement, BATCH)) yield rows as string[][];
}

/** A time in µs as a double; undefined when a double does not hold it to the microsecond. */
function exactMicros(text: string): number | undefined {
  const x = Number(text);
  return Math.abs(x) < EXACT_MICROS ? x : undefined;
}

/** Reads a column's values: of the canonical profiles `ids`, or of all, whole, through a cursor a batch at a time. */
async function fill(
  db: pg.PoolClient,
  accountId: string,
  p: AccountProjection,
  c: Column,
  ids: string[] | null,
): Promise<void> {
  if (c.kind === 'spans' || c.kind === 'times') return fillList(db, accountId, p, c, ids);
  if (c.kind === 'profiles') {
    for await (const rows of rowsOf(db, q.createdStatement(accountId, ids), ids))
      for (const row of rows) {
        const slot = p.slotOf.get(Number(row[0]));
        if (slot === undefined || !p.alive[slot]) continue;
        const created = exactMicros(row[1]);
        if (created === undefined) c.inexact.add(slot);
        else c.created[slot] = created;
      }
    for await (const rows of rowsOf(db, q.knownStatement(accountId, knownKeyspaceIds(p.defs), ids), ids))
      for (const row of rows) {
        const slot = p.slotOf.get(Number(row[0]));
        if (slot !== undefined && p.alive[slot]) c.known[slot] = 1;
      }
    return;
  }
  const statement =
    c.kind === 'number' ? q.numberValuesStatement(accountId, c, ids) : q.eventSpansStatement(accountId, c, ids);
  for await (const rows of rowsOf(db, statement, ids))
    for (const row of rows) {
      const slot = p.slotOf.get(Number(row[0]));
      if (slot === undefined || !p.alive[slot]) continue;
      if (c.kind === 'number') {
        const x = exactDouble(row[1]);
        if (x === undefined) c.inexact.add(slot);
        else c.values[slot] = x;
        continue;
      }
      if (c.kind !== 'event') continue;
      c.first[slot] = Number(row[1]);
      c.last[slot] = Number(row[2]);
      if (Math.abs(c.first[slot]) >= EXACT_MICROS || Math.abs(c.last[slot]) >= EXACT_MICROS) c.inexact.add(slot);
    }
}

/**
 * Reads a list column's records: of the canonical profiles `ids` into `own` (their slots are
 * `moved`), or of all into `data`, the records of a slot together (a counting sort by slot of the
 * rows, which come in no order), times sorted within each slot.
 */
async function fillList(
  db: pg.PoolClient,
  accountId: string,
  p: AccountProjection,
  c: ListColumn,
  ids: string[] | null,
): Promise<void> {
  const w = c.width;
  const statement =
    c.kind === 'spans' ? q.valueSpansStatement(accountId, c, ids) : q.eventTimesStatement(accountId, c, ids);
  let slots = new Int32Array(1024);
  let records = new Float64Array(1024 * w);
  let n = 0;
  const record = new Float64Array(w);
  for await (const rows of rowsOf(db, statement, ids))
    for (const row of rows) {
      const slot = p.slotOf.get(Number(row[0]));
      if (slot === undefined || !p.alive[slot]) continue;
      const from = exactMicros(row[1]);
      if (c.kind === 'times') record[0] = from ?? NaN;
      else {
        const until = row[2] === null ? Infinity : exactMicros(row[2]);
        const value = exactDouble(row[3]);
        if (until === undefined || value === undefined) {
          c.inexact.add(slot);
          continue;
        }
        record[0] = from ?? NaN;
        record[1] = until;
        record[2] = value;
      }
      if (from === undefined) {
        c.inexact.add(slot);
        continue;
      }
      if (n === slots.length) {
        const more = new Int32Array(n * 2);
        more.set(slots);
        slots = more;
        const wider = new Float64Array(n * 2 * w);
        wider.set(records);
        records = wider;
      }
      slots[n] = slot;
      records.set(record, n * w);
      n++;
    }
  const sortTimes = (a: Float64Array) => (c.kind === 'times' && a.length > 1 ? a.sort() : a);
  if (ids) {
    const bySlot = new Map<number, number[]>();
    for (let k = 0; k < n; k++) {
      let list = bySlot.get(slots[k]);
      if (!list) bySlot.set(slots[k], (list = []));
      for (let j = 0; j < w; j++) list.push(records[k * w + j]);
    }
    for (const [slot, list] of bySlot) c.own.set(slot, sortTimes(Float64Array.from(list)));
    return;
  }
  const counts = new Int32Array(p.size + 1);
  for (let k = 0; k < n; k++) counts[slots[k] + 1]++;
  for (let i = 0; i < p.size; i++) counts[i + 1] += counts[i];
  c.start.set(counts.subarray(0, p.size));
  c.end.set(counts.subarray(0, p.size));
  const data = new Float64Array(n * w);
  for (let k = 0; k < n; k++) {
    const at = c.end[slots[k]]++ * w;
    for (let j = 0; j < w; j++) data[at + j] = records[k * w + j];
    if (k % STEP === STEP - 1) await requestsServed();
  }
  c.data = data;
  c.moved.fill(0);
  c.own.clear();
  if (c.kind === 'times')
    for (let i = 0; i < p.size; i++) {
      if (c.end[i] - c.start[i] > 1) data.subarray(c.start[i], c.end[i]).sort();
      if (i % STEP === STEP - 1) await requestsServed();
    }
}

/**
 * Records placed, slots sorted or slots of a trend gone through between two turns of the event loop:
 * at 10,000,000 profiles the placement of a trend's 20 million event times in one go held the
 * process's requests for over 10 s.
 */
const STEP = 1 << 20;
/** Lets the process answer the requests that came in meanwhile (the read whole runs beside them). */
const requestsServed = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Reads the account's canonical profiles and the columns of `needs`, whole, as of the transaction's snapshot. */
async function readWhole(db: pg.PoolClient, scope: AccountScope, needs: Need[]) {
  const p = new AccountProjection(scope.defs);
  // Every row is read: plans for the last row, not for the first tenth (a cursor's default, which
  // probes the profiles by index for each row of a trend's spans and times instead of hashing them).
  await db.query('set local cursor_tuple_fraction = 1');
  p.snapshot = (await q.snapshotAndMarks(db, scope.accountId, null)).snapshot;
  for await (const rows of cursorBatches(db, q.canonicalProfilesStatement(scope.accountId, null), BATCH))
    for (const row of rows) p.slot(row[0] as string);
  for (const need of needs)
    if (!p.columns.has(keyOf(need))) await fill(db, scope.accountId, p, p.newColumn(need), null);
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
    for (const c of p.columns.values())
      if ((c.kind === 'spans' || c.kind === 'times') && c.own.size > Math.max(4096, p.size >> 3)) compact(c, p.size);
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
  const column = p.columns.get(keyOf(countNeeds([t])[0]))!;
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
  if (t.kind !== 'event' || column.kind !== 'event') return undefined;
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
/** Who hears of a read whole that failed, per pool (onReadFailed). */
const readFailures = new WeakMap<pg.Pool, Set<(err: unknown) => void>>();

/**
 * Hears each read whole of the pool's projections that fails: most run in the background, where no
 * caller waits for them (readProjectionsAhead logs them). Returns what stops hearing.
 */
export function onReadFailed(pool: pg.Pool, heard: (err: unknown) => void): () => void {
  let listeners = readFailures.get(pool);
  if (!listeners) readFailures.set(pool, (listeners = new Set()));
  listeners.add(heard);
  return () => listeners.delete(heard);
}

/** What answerNow answers when the account's columns must first be read whole. */
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
  return projected(pool, scope, countNeeds(terms), options, async (client, p) => {
    const m = await matches(client, scope, p, expression, timeZone);
    if (!m) return undefined;
    let count = 0;
    for (let i = 0; i < m.length; i++) count += m[i] & p.alive[i];
    return count;
  });
}

/**
 * A trend from the projection (docs/aql.md "Over time (trend)"): for each sampling point of
 * `points` (ms since 1970, ascending), the known and unknown canonical profiles created by then
 * for which `expression` held then, the same numbers as the SQL trend (compileMasks,
 * countMasksByPoint); undefined when the projection does not answer it, as projectedCount: then
 * the caller asks SQL, and the trend's columns are read whole in the background (or waited for,
 * with `wait`). Its columns are read by the first trend that needs them, not ahead.
 */
export async function projectedTrend(
  pool: pg.Pool,
  scope: AccountScope,
  expression: Expression,
  points: number[],
  timeZone: string,
  options: { wait?: boolean } = {},
): Promise<{ known: number; unknown: number }[] | undefined> {
  const terms = termsOf(expression);
  if (!hasLiveSegments(scope.defs) || !terms.every(covered) || (await onCitus(pool))) return undefined;
  return projected(pool, scope, trendNeeds(terms), options, (_, p) => trendCounts(p, expression, points, timeZone));
}

/**
 * Answers from the account's columns of `needs`, brought up to date in a repeatable read
 * transaction that `answer` runs in too; undefined when `answer` cannot tell or the columns are
 * not read yet (they are then read whole in the background, and waited for with `wait`).
 */
async function projected<T>(
  pool: pg.Pool,
  scope: AccountScope,
  needs: Need[],
  options: { wait?: boolean },
  answer: (client: pg.PoolClient, p: AccountProjection) => Promise<T | undefined>,
): Promise<T | undefined> {
  for (;;) {
    const result = await queued(pool, scope.accountId, () => answerNow(pool, scope, needs, answer));
    if (result !== UNBUILT) return result;
    const built = buildInBackground(pool, scope, needs);
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

/** Whether this process keeps the account's columns of `needs` as of the scope's definitions. */
function holds(pool: pg.Pool, scope: AccountScope, needs: Need[]): boolean {
  const p = projections.get(pool)?.get(scope.accountId);
  return !!p && p.defs === scope.defs && needs.every((n) => p.columns.has(keyOf(n)));
}

/**
 * Reads the account's columns of `terms` (terms the projection answers) whole, unless this process
 * keeps them as of the scope's definitions, and waits for the read: so that the counts that need
 * them are projected from the first one. A read under way is waited for first, and one read at
 * most is started: a scope whose definitions have changed since is not read again and again
 * against the counts' newer one. Nothing without a live segment, or on Citus. A failed read is
 * not thrown: onReadFailed's listeners hear it.
 */
export async function readAhead(pool: pg.Pool, scope: AccountScope, terms: (AttributeTerm | EventTerm)[]) {
  if (!hasLiveSegments(scope.defs) || terms.length === 0 || (await onCitus(pool))) return;
  await builds
    .get(pool)
    ?.get(scope.accountId)
    ?.catch(() => {});
  const needs = countNeeds(terms);
  // Its failure is heard by onReadFailed's listeners.
  if (!holds(pool, scope, needs)) await buildInBackground(pool, scope, needs).catch(() => {});
}

/**
 * What this process's projection of the account holds for the counts of `terms`: `reading` (a read
 * whole of the account's columns is under way, such as one a trend started: what is kept already
 * answers meanwhile), else `ready` (their columns are kept as of the scope's definitions: counts
 * that need only them are projected) or `none`.
 */
export function projectionState(
  pool: pg.Pool,
  scope: AccountScope,
  terms: (AttributeTerm | EventTerm)[],
): 'ready' | 'reading' | 'none' {
  if (builds.get(pool)?.has(scope.accountId)) return 'reading';
  return hasLiveSegments(scope.defs) && terms.length > 0 && holds(pool, scope, countNeeds(terms)) ? 'ready' : 'none';
}

/** Runs `run` after the account's counts and trends before it in this process: they share its columns. */
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
 * Reads the account's columns whole (those of `needs`, and those its projection had), in a
 * repeatable read transaction of its own, unless such a read is under way; the projection then
 * kept is brought up to date by the next count. A failed read is forgotten (the next count tries
 * again) and answers its error to a caller that waits for it.
 */
function buildInBackground(pool: pg.Pool, scope: AccountScope, needs: Need[]): Promise<void> {
  let running = builds.get(pool);
  if (!running) builds.set(pool, (running = new Map()));
  const under = running.get(scope.accountId);
  if (under) return under;
  const kept = projections.get(pool)?.get(scope.accountId);
  const wanted = [...needs, ...(kept && kept.defs === scope.defs ? kept.needs.values() : [])];
  const build = inTransaction(pool, (client) => readWhole(client, scope, wanted)).then((p) => {
    let all = projections.get(pool);
    if (!all) projections.set(pool, (all = new Map()));
    all.delete(scope.accountId);
    all.set(scope.accountId, p);
    for (const account of all.keys()) if (all.size > ACCOUNTS_KEPT) all.delete(account);
  });
  const settled = build.finally(() => running.delete(scope.accountId));
  settled.catch((err: unknown) => {
    for (const heard of readFailures.get(pool) ?? []) heard(err);
  });
  running.set(scope.accountId, settled);
  return settled;
}

/** Runs `work` in a read-only repeatable read transaction of a connection of its own. */
function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(pool, work, 'begin isolation level repeatable read read only');
}

/** Brings the account's columns of `needs` up to date and answers from them (projected), or UNBUILT. */
async function answerNow<T>(
  pool: pg.Pool,
  scope: AccountScope,
  needs: Need[],
  answer: (client: pg.PoolClient, p: AccountProjection) => Promise<T | undefined>,
): Promise<T | undefined | typeof UNBUILT> {
  const kept = projections.get(pool);
  const p = kept?.get(scope.accountId);
  if (!kept || !p || p.defs !== scope.defs || !needs.every((n) => p.columns.has(keyOf(n)))) return UNBUILT;
  kept.delete(scope.accountId);
  const result = await inTransaction(pool, async (client) =>
    (await refresh(client, scope, p)) ? ((await answer(client, p)) ?? null) : UNBUILT,
  );
  if (result === UNBUILT) return UNBUILT;
  kept.set(scope.accountId, p);
  return result ?? undefined;
}

// ---- Trends ----

/** The comparisons of numbers (no NaN among the values a span holds). */
const COMPARE: Record<Comparator, (v: number, c: number) => boolean> = {
  eq: (v, c) => v === c,
  neq: (v, c) => v !== c,
  lt: (v, c) => v < c,
  lte: (v, c) => v <= c,
  gt: (v, c) => v > c,
  gte: (v, c) => v >= c,
};

/** Points a mask of 32 bits holds: a trend of more is counted in parts. */
const PART = 32;
/** UP_TO[k]: the bits 0 … k - 1. */
const UP_TO = Array.from({ length: PART + 1 }, (_, k) => (k === PART ? 0xffffffff : 2 ** k - 1) | 0);
/** The bits lo … hi - 1 (none when hi <= lo). */
const bitsBetween = (lo: number, hi: number) => (hi > lo ? UP_TO[hi] & ~UP_TO[lo] : 0);

/** How many of the ascending `xs` are less than `x`. */
function below(xs: Float64Array, x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The trend's counts (projectedTrend) from the columns; undefined when a column holds a value or a
 * time a double does not hold exactly. Points are taken 32 at a time, a bit each in a mask per slot.
 */
async function trendCounts(
  p: AccountProjection,
  expression: Expression,
  points: number[],
  timeZone: string,
): Promise<{ known: number; unknown: number }[] | undefined> {
  const needs = trendNeeds(termsOf(expression));
  if (needs.some((n) => p.columns.get(keyOf(n))!.inexact.size > 0)) return undefined;
  const profiles = p.columns.get(keyOf(needs[0])) as ProfileColumn;
  const known = new Float64Array(points.length);
  const unknown = new Float64Array(points.length);
  // An event term's windows at every point, in µs: those of compileMasks.
  const windows = new Map<EventTerm, { start: number; end: number }[]>();
  for (const t of termsOf(expression))
    if (t.kind === 'event')
      windows.set(
        t,
        trendWindows(t, points, timeZone).map((w) => ({ start: w.start * 1000, end: w.end * 1000 })),
      );
  for (let base = 0; base < points.length; base += PART) {
    const part = Float64Array.from(points.slice(base, base + PART), (t) => t * 1000);
    const masks = await trendMasks(p, expression, part, base, windows);
    const all = UP_TO[part.length];
    for (let i = 0; i < p.size; i++) {
      if (i % STEP === STEP - 1) await requestsServed();
      if (!p.alive[i] || !masks[i]) continue;
      const created = profiles.created[i];
      if (!(created === created)) continue;
      // The points from the creation on (t >= created).
      let m = masks[i] & all & ~UP_TO[below(part, created)];
      const into = profiles.known[i] ? known : unknown;
      while (m !== 0) {
        into[base + 31 - Math.clz32(m & -m)]++;
        m &= m - 1;
      }
    }
  }
  return points.map((_, j) => ({ known: known[j], unknown: unknown[j] }));
}

/**
 * Per slot, the points of `part` (µs, ascending, at most 32; the trend's points from `base` on) at
 * which the expression holds, as bits: && and || as & and | of its terms' masks.
 */
async function trendMasks(
  p: AccountProjection,
  e: Expression,
  part: Float64Array,
  base: number,
  windows: Map<EventTerm, { start: number; end: number }[]>,
): Promise<Int32Array> {
  if (e.kind === 'and' || e.kind === 'or') {
    let acc: Int32Array | undefined;
    for (const t of e.terms) {
      const m = await trendMasks(p, t, part, base, windows);
      if (!acc) acc = m;
      else if (e.kind === 'and') for (let i = 0; i < acc.length; i++) acc[i] &= m[i];
      else for (let i = 0; i < acc.length; i++) acc[i] |= m[i];
    }
    return acc!;
  }
  const n = p.size;
  const out = new Int32Array(n);
  if (e.kind === 'attribute') {
    // A value held over [from, until) covers the points t with from <= t < until.
    const c = p.columns.get(keyOf(trendNeeds([e])[1])) as ListColumn;
    const test = COMPARE[e.condition.comparator];
    const k = e.condition.value as number;
    for (let i = 0; i < n; i++) {
      if (i % STEP === STEP - 1) await requestsServed();
      if (!p.alive[i]) continue;
      const { data, from, to } = recordsOf(c, i);
      let m = 0;
      for (let j = from; j < to; j += 3)
        if (test(data[j + 2], k)) m |= bitsBetween(below(part, data[j]), below(part, data[j + 1]));
      out[i] = m;
    }
    return out;
  }
  // An event at te lies in the window [start, end] of a point when start <= te <= end: the first
  // time at or after the start, if any, must be at or before the end.
  const t = e as EventTerm;
  const c = p.columns.get(keyOf(trendNeeds([t])[1])) as ListColumn;
  const ws = windows.get(t)!.slice(base, base + part.length);
  for (let i = 0; i < n; i++) {
    if (i % STEP === STEP - 1) await requestsServed();
    if (!p.alive[i]) continue;
    const { data, from, to } = recordsOf(c, i);
    if (from === to) continue;
    let m = 0;
    for (let k = 0; k < ws.length; k++) {
      let lo = from;
      let hi = to;
      const start = ws[k].start;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (data[mid] < start) lo = mid + 1;
        else hi = mid;
      }
      if (lo < to && data[lo] <= ws[k].end) m |= 1 << k;
    }
    out[i] = m;
  }
  return out;
}

import type { Condition, Expression } from './ast.ts';
import { windowBounds } from './time.ts';

/** Collects the bound values of a statement: the compiler never pastes a value into SQL text. */
export class SqlValues {
  readonly values: unknown[] = [];
  /** A placeholder for `value`, with a cast. */
  add(value: unknown, cast: string): string {
    this.values.push(value);
    return `$${this.values.length}::${cast}`;
  }
}

/** The first instant PostgreSQL's timestamptz holds (4714-11-24 BC) and the last of a four-digit year, in ms since 1970. */
const FIRST_INSTANT = -210_866_803_200_000;
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An instant (ms since 1970, maybe ±Infinity) as timestamptz input. PostgreSQL reads neither ISO
 * years before 1 AD ("-000712-…") nor six-digit ones ("+010000-…"), nor instants before its first
 * one: years before 1 AD are written with "BC", instants before its range as -infinity and after
 * the year 9999 as infinity, where no event lies (event times are RFC 3339 date-times).
 */
export function timestamp(ms: number): string {
  if (ms < FIRST_INSTANT) return '-infinity';
  if (ms > LAST_INSTANT) return 'infinity';
  const iso = new Date(ms).toISOString();
  if (!iso.startsWith('-') && !iso.startsWith('0000')) return iso;
  // The astronomical year y ≤ 0 is the year 1 − y BC.
  const [, year, rest] = /^([+-]?\d+)(-.*)$/.exec(iso)!;
  return `${String(1 - Number(year)).padStart(4, '0')}${rest.replace('T', ' ').replace('Z', '+00')} BC`;
}

/**
 * The SQL of a condition on the jsonb value `x`, agreeing with `holds` of the evaluator. Each step
 * of a data path selects a field of an object (`->` with a text key, null on anything else), never
 * an element of an array, as `#>` would for a step such as "0".
 */
function condition(x: string, c: Condition, values: SqlValues): string {
  const target = c.path.reduce((t, key) => `(${t} -> ${values.add(key, 'text')})`, x);
  const op = { eq: '=', neq: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=' }[c.comparator];
  switch (typeof c.value) {
    case 'string':
      return `(case when jsonb_typeof(${target}) = 'string' then (${target} #>> '{}') end) collate "C" ${op} ${values.add(c.value, 'text')}`;
    case 'number':
      return `(case when jsonb_typeof(${target}) = 'number' then (${target} #>> '{}')::numeric end) ${op} ${values.add(c.value, 'numeric')}`;
    default:
      return `(case when jsonb_typeof(${target}) = 'boolean' then (${target} #>> '{}')::boolean end) ${op} ${values.add(c.value, 'boolean')}`;
  }
}

/**
 * Compiles a checked query into a predicate over the canonical profile `p` (a row of `profiles`)
 * as it is now: attribute values of its section rows, events of every member of its cluster.
 */
export function compilePredicate(expression: Expression, options: { now: number; timeZone: string }, values: SqlValues): string {
  switch (expression.kind) {
    case 'and':
    case 'or':
      return `(${expression.terms.map((t) => compilePredicate(t, options, values)).join(expression.kind === 'and' ? ' and ' : ' or ')})`;
    case 'attribute':
      return `exists (select 1 from profile_sections ps where ps.account_id = p.account_id and ps.profile_id = p.profile_id
        and ps.section_id = ${values.add(expression.sectionId, 'bigint')}
        and ${condition(`(coalesce(ps.cluster_attributes, ps.attributes) -> ${values.add(expression.versionId, 'text')})`, expression.condition, values)})`;
    case 'event': {
      const where = [
        'e.account_id = p.account_id',
        `e.section_id = ${values.add(expression.sectionId, 'bigint')}`,
        `e.version_id = ${values.add(expression.versionId, 'bigint')}`,
      ];
      if (expression.window) {
        const { start, end } = windowBounds(expression.window, options.now, options.timeZone);
        where.push(`e.event_time >= ${values.add(timestamp(start), 'timestamptz')}`, `e.event_time <= ${values.add(timestamp(end), 'timestamptz')}`);
      }
      for (const c of expression.conditions) where.push(condition('e.data', c, values));
      return `p.profile_id in (select coalesce(m.canonical_id, m.profile_id) from profile_events e
        join profiles m on m.account_id = e.account_id and m.profile_id = e.profile_id where ${where.join(' and ')})`;
    }
  }
}

/**
 * Compiles a checked query into a set of (profile_id, i) pairs: the canonical profiles that
 * matched it at sampling point i, judged by the attribute history and the events up to that
 * point, with time windows counted back from it. `points` holds `pts(i, t)` rows in the statement
 * that uses the result.
 */
export function compilePairs(expression: Expression, options: { accountParam: string; points: number[]; timeZone: string }, values: SqlValues): string {
  switch (expression.kind) {
    case 'and':
    case 'or':
      return expression.terms.map((t) => `(${compilePairs(t, options, values)})`).join(expression.kind === 'and' ? ' intersect ' : ' union ');
    case 'attribute':
      return `select x.canonical_id as profile_id, pts.i from (
          select coalesce(m.canonical_id, m.profile_id) as canonical_id, h.value, h.changed_at,
            lead(h.changed_at) over (partition by h.profile_id order by h.changed_at) as until
          from attribute_history h join profiles m on m.account_id = h.account_id and m.profile_id = h.profile_id
          where h.account_id = ${options.accountParam} and h.section_id = ${values.add(expression.sectionId, 'bigint')}
            and h.version_id = ${values.add(expression.versionId, 'bigint')}
        ) x join pts on x.changed_at <= pts.t and (x.until is null or x.until > pts.t)
        where ${condition('x.value', expression.condition, values)}`;
    case 'event': {
      const windows = options.points.map((t) => {
        if (!expression.window) return { start: '-infinity', end: new Date(t).toISOString() };
        const bounds = windowBounds(expression.window, t, options.timeZone);
        return { start: timestamp(bounds.start), end: timestamp(Math.min(bounds.end, t)) };
      });
      const where = [
        `e.account_id = ${options.accountParam}`,
        `e.section_id = ${values.add(expression.sectionId, 'bigint')}`,
        `e.version_id = ${values.add(expression.versionId, 'bigint')}`,
        ...expression.conditions.map((c) => condition('e.data', c, values)),
      ];
      return `select distinct coalesce(m.canonical_id, m.profile_id) as profile_id, w.i from profile_events e
        join profiles m on m.account_id = e.account_id and m.profile_id = e.profile_id
        join unnest(${values.add(windows.map((w) => w.start), 'timestamptz[]')}, ${values.add(windows.map((w) => w.end), 'timestamptz[]')}) with ordinality as w(start_at, end_at, i)
          on e.event_time >= w.start_at and e.event_time <= w.end_at
        where ${where.join(' and ')}`;
    }
  }
}

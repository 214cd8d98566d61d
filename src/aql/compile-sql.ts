import type { AttributeTerm, Condition, EventTerm, Expression } from './ast.ts';
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

/** jsonpath's comparison operators. */
const JSONPATH_OPERATORS = { eq: '==', neq: '!=', lt: '<', lte: '<=', gt: '>', gte: '>=' } as const;

/**
 * The SQL of a condition on the field `keys` of the jsonb value `x` (then the condition's data
 * path), agreeing with `holds` of the evaluator: jsonb_path_exists with a strict SQL/JSON path,
 * which reads the value once, without copying each step out as `->` does (the attribute term of a
 * count runs this on every profile). Strict mode makes a step select a field of an object and
 * nothing else (no array element, no unwrapping of arrays); a missing field is an error that
 * `silent` turns into null, which matches nothing, as does a comparison between different JSON
 * types. Strings compare by code point (binary UTF-8, like the "C" collation), numbers as numeric.
 * Only `!=` holds between null and a non-null value in SQL/JSON, hence the type test for neq.
 * Keys and constant are bound values: the keys as string literals inside the path (JSON escapes
 * are jsonpath escapes), the constant as the variable $c.
 */
function condition(x: string, keys: string[], c: Condition, values: SqlValues): string {
  // Lone surrogates travel as U+FFFD, as they do in text parameters (and in the evaluator's UTF-8).
  const well = (v: string) => v.toWellFormed();
  const path = ['strict $', ...[...keys, ...c.path].map((k) => JSON.stringify(well(k)))].join('.');
  const type = typeof c.value === 'string' ? 'string' : typeof c.value === 'number' ? 'number' : 'boolean';
  const filter =
    c.comparator === 'neq' ? `@.type() == "${type}" && @ != $c` : `@ ${JSONPATH_OPERATORS[c.comparator]} $c`;
  const constant = typeof c.value === 'string' ? well(c.value) : c.value;
  return `jsonb_path_exists(${x}, ${values.add(`${path} ? (${filter})`, 'jsonpath')}, ${values.add(JSON.stringify({ c: constant }), 'jsonb')}, true)`;
}

/**
 * The sections in which every profile the query matches has a row: those of its attribute terms
 * that it cannot do without (any term of an "and", every branch of an "or").
 */
export function requiredSections(expression: Expression): string[] {
  switch (expression.kind) {
    case 'attribute':
      return [expression.sectionId];
    case 'event':
      return [];
    case 'and':
      return [...new Set(expression.terms.flatMap(requiredSections))];
    case 'or': {
      const [first, ...rest] = expression.terms.map(requiredSections);
      return first.filter((s) => rest.every((r) => r.includes(s)));
    }
  }
}

/**
 * Compiles a checked query into a predicate over the canonical profile `p` (a row of `profiles`)
 * as it is now: attribute values of its section rows, events of every member of its cluster.
 *
 * `clusters: false` says that the account has no merge clusters, so that every profile is its
 * own cluster: an event term is then a plain semi-join on the event's profile, which PostgreSQL can
 * run as a parallel hash semi-join. With clusters (the default), an event counts for the canonical
 * profile of the member that received it: a left join with the members (profiles with a
 * canonical profile, few), never a join with all profiles.
 *
 * `sectionRow` (with `clusters: false`, and a section of requiredSections) makes `p` the profile's
 * row of `profile_sections` in that section instead: its attribute terms are then conditions on
 * that row, and a count reads the section's rows alone, without the join with every profile.
 *
 * `joinedSection` names a row of `profile_sections` that the statement has joined beside `p`: the
 * canonical profile's row in that section, its columns null where it has none. Attribute terms of
 * that section are then conditions on that row, not a second look-up of it for every profile.
 *
 * `perProfile` is for a predicate judged for every profile a statement reads (a column of an
 * export's rows, or beside other terms under `or`), where PostgreSQL cannot join it as a set: an
 * event term then looks up the events of the cluster's members by the index of events by profile,
 * section and time. The set form (`p.profile_id in (…)`, correlated by the account) would be run
 * again for every profile there, reading every event of the window each time.
 *
 * `account` is the account's placeholder: every table's rows are chosen by it, not by the outer
 * profile's account_id, so that Citus sees every part of the statement on the account's node.
 */
export function compilePredicate(
  expression: Expression,
  options: {
    account: string;
    now: number;
    timeZone: string;
    clusters?: boolean;
    sectionRow?: string;
    joinedSection?: { sectionId: string; row: string };
    perProfile?: boolean;
  },
  values: SqlValues,
): string {
  const { account } = options;
  if (options.sectionRow !== undefined && options.clusters !== false)
    throw new Error('sectionRow needs clusters: false');
  switch (expression.kind) {
    case 'and':
    case 'or':
      return `(${expression.terms.map((t) => compilePredicate(t, options, values)).join(expression.kind === 'and' ? ' and ' : ' or ')})`;
    case 'attribute': {
      // The values a row shows: its cluster's on a merge cluster's canonical profile.
      const holds = (row: string) =>
        condition(
          `coalesce(${row}.cluster_attributes, ${row}.attributes)`,
          [expression.versionId],
          expression.condition,
          values,
        );
      const row =
        expression.sectionId === options.sectionRow
          ? 'p'
          : expression.sectionId === options.joinedSection?.sectionId
            ? options.joinedSection.row
            : undefined;
      // As the semi-join below: a condition that is null (unknown) does not hold.
      if (row !== undefined) return `coalesce(${holds(row)}, false)`;
      return `exists (select 1 from profile_sections ps where ps.account_id = ${account} and ps.profile_id = p.profile_id
        and ps.section_id = ${values.add(expression.sectionId, 'bigint')}
        and ${holds('ps')})`;
    }
    case 'event': {
      if (expression.conditions.length === 0 && !expression.window) return summarised(expression, options, values);
      const where = [
        `e.section_id = ${values.add(expression.sectionId, 'bigint')}`,
        `e.version_id = ${values.add(expression.versionId, 'bigint')}`,
      ];
      if (expression.window) {
        const { start, end } = windowBounds(expression.window, options.now, options.timeZone);
        where.push(
          `e.event_time >= ${values.add(timestamp(start), 'timestamptz')}`,
          `e.event_time <= ${values.add(timestamp(end), 'timestamptz')}`,
        );
      }
      for (const c of expression.conditions) where.push(condition('e.data', [], c, values));
      if (options.clusters === false) {
        return `exists (select 1 from profile_events e where e.account_id = ${account} and e.profile_id = p.profile_id and ${where.join(' and ')})`;
      }
      if (options.perProfile) {
        return `exists (select 1 from profile_events e where e.account_id = ${account}
          and e.profile_id = any(array(select p.profile_id union all select m.profile_id from profiles m where m.account_id = ${account} and m.canonical_id = p.profile_id))
          and ${where.join(' and ')})`;
      }
      return `p.profile_id in (select coalesce(m.canonical_id, e.profile_id) from profile_events e
        left join profiles m on m.account_id = ${account} and m.profile_id = e.profile_id and m.canonical_id is not null
        where e.account_id = ${account} and ${where.join(' and ')})`;
    }
  }
}

/**
 * An event term without conditions on the event's data and without a time window, answered from
 * the profiles' rows of profile_event_summaries (migration 0021; the options as compilePredicate's):
 * a profile has such an event exactly when it has a row there, one per profile and event version
 * however many events it sums. (With a window the events are read: first and last time answer a
 * window only when it reaches past one of them, and the look-up of the events for the other
 * profiles, in the same statement, made PostgreSQL plan the count without its parallel hash join:
 * docs/benchmarks.md "Issue 26".)
 */
function summarised(
  term: EventTerm,
  options: { account: string; clusters?: boolean; perProfile?: boolean },
  values: SqlValues,
): string {
  const { account } = options;
  const where = `s.account_id = ${account} and s.section_id = ${values.add(term.sectionId, 'bigint')} and s.version_id = ${values.add(term.versionId, 'bigint')}`;
  if (options.clusters === false)
    return `exists (select 1 from profile_event_summaries s where s.profile_id = p.profile_id and ${where})`;
  if (options.perProfile)
    return `exists (select 1 from profile_event_summaries s
      where s.profile_id = any(array(select p.profile_id union all select m.profile_id from profiles m where m.account_id = ${account} and m.canonical_id = p.profile_id))
        and ${where})`;
  return `p.profile_id in (select coalesce(m.canonical_id, s.profile_id) from profile_event_summaries s
    left join profiles m on m.account_id = ${account} and m.profile_id = s.profile_id and m.canonical_id is not null
    where ${where})`;
}

/** At most this many sampling points: their bits fill a bigint. */
export const MAX_POINTS = 62;

/**
 * The bits lo … k - 1 of a bigint mask (none when k <= lo; both at most MAX_POINTS): the bits from
 * lo up, less those from k up. Each operand appears once, so that PostgreSQL computes each
 * width_bucket once per row (a trend runs this on millions of rows).
 */
const bits = (k: string, lo: string) => `((-1::bigint << ${lo}) & ~(-1::bigint << ${k}))`;

/** Whether a sequence never decreases (-Infinity and Infinity included). */
const ascending = (xs: number[]) => xs.every((x, i) => i === 0 || xs[i - 1] <= x);

/**
 * The instants [start, end] (ms) in which an event makes an event term hold at each sampling point
 * of a trend (`points`, ms): its time window counted back from the point, cut off at the point
 * (events up to it); without a window, every event up to the point. Both back ends of trends
 * (compileMasks, the projection's trend in src/segments/projection.ts) take their windows from here.
 */
export function trendWindows(term: EventTerm, points: number[], timeZone: string): { start: number; end: number }[] {
  return points.map((t) => {
    if (!term.window) return { start: -Infinity, end: t };
    const bounds = windowBounds(term.window, t, timeZone);
    return { start: bounds.start, end: Math.min(bounds.end, t) };
  });
}

/**
 * Compiles a checked query for a trend: which canonical profiles matched it at which sampling
 * points, judged by the attribute history and the events up to each point, with time windows
 * counted back from it. `points` must be in ascending order; `pointsParam` is the placeholder of the
 * same instants as a timestamptz[]. Point i is bit i - 1 of a bigint mask.
 *
 * Answers `rows`, the SQL of rows (profile_id, term, mask) with term 1, 2, … for the query's terms
 * in order (the canonical profile, and the points at which one attribute value or event makes the
 * term hold), and `mask`, an aggregate over those rows of one profile, aliased `t`: the points at
 * which the whole query holds, && and || being & and | of the terms' masks. The caller groups the
 * rows by profile. Nothing grows with the number of points: an attribute value held from its
 * set time until it was replaced (a row of attribute_history; a current value, from the set time
 * kept beside it, until now) covers the points in between, a contiguous run of bits found with
 * width_bucket; so does an event, whose windows start and end later for later points (when
 * they do not, e.g. windows of calendar months around a change of daylight saving time, the event
 * is joined with each window instead). `clusters: false` (an account without merge clusters) leaves
 * out the mapping of members to their canonical profile, as in compilePredicate.
 */
export function compileMasks(
  expression: Expression,
  options: { accountParam: string; points: number[]; pointsParam: string; timeZone: string; clusters?: boolean },
  values: SqlValues,
): { rows: string; mask: string } {
  const { accountParam: account, points, pointsParam: pts } = options;
  const clusters = options.clusters !== false;
  if (points.length > MAX_POINTS) throw new Error(`at most ${MAX_POINTS} sampling points`);
  if (!ascending(points)) throw new Error('sampling points must be in ascending order');
  const leaves: string[] = [];
  let terms = 0;
  /** The SQL of the (profile_id, term, mask) rows of a term (one or more selects); answers the term's number. */
  const leaf = (term: AttributeTerm | EventTerm): number => {
    const k = ++terms;
    if (term.kind === 'attribute') {
      // A value covers the points t with set_at <= t < replaced_at: the bits from (number of points
      // before set_at) to (number of points before replaced_at); width_bucket counts the points <=
      // its operand. Past values are rows of attribute_history, spans that cover no point left out;
      // current values are the profiles' own entries, with their set times in microseconds.
      const section = values.add(term.sectionId, 'bigint');
      const version = values.add(term.versionId, 'bigint');
      const first = values.add(timestamp(points[0]), 'timestamptz');
      const last = values.add(timestamp(points[points.length - 1]), 'timestamptz');
      const micros = values.add(
        points.map((t) => String(BigInt(t) * 1000n)),
        'bigint[]',
      );
      const lastMicros = values.add(String(BigInt(points[points.length - 1]) * 1000n), 'bigint');
      const setAt = `(ps.attribute_set_at ->> ${values.add(term.versionId, 'text')})::bigint`;
      const member = (x: string) =>
        clusters
          ? `left join profiles m on m.account_id = ${account} and m.profile_id = ${x}.profile_id and m.canonical_id is not null`
          : '';
      const profile = (x: string) => (clusters ? `coalesce(m.canonical_id, ${x}.profile_id)` : `${x}.profile_id`);
      leaves.push(`select ${profile('h')} as profile_id, ${k} as term,
          ${bits(`width_bucket(h.replaced_at - interval '1 microsecond', ${pts})`, `width_bucket(h.set_at - interval '1 microsecond', ${pts})`)} as mask
        from attribute_history h ${member('h')}
        where h.account_id = ${account} and h.section_id = ${section} and h.version_id = ${version}
          and h.replaced_at > ${first} and h.set_at <= ${last} and ${condition('h.value', [], term.condition, values)}`);
      leaves.push(`select ${profile('ps')} as profile_id, ${k} as term,
          ${bits(`cardinality(${micros})`, `width_bucket(${setAt} - 1, ${micros})`)} as mask
        from profile_sections ps ${member('ps')}
        where ps.account_id = ${account} and ps.section_id = ${section} and ${setAt} <= ${lastMicros}
          and ${condition('ps.attributes', [term.versionId], term.condition, values)}`);
      return k;
    }
    const windows = trendWindows(term, points, options.timeZone);
    const starts = values.add(
      windows.map((w) => timestamp(w.start)),
      'timestamptz[]',
    );
    const ends = values.add(
      windows.map((w) => timestamp(w.end)),
      'timestamptz[]',
    );
    const where = [
      `e.account_id = ${account}`,
      `e.section_id = ${values.add(term.sectionId, 'bigint')}`,
      `e.version_id = ${values.add(term.versionId, 'bigint')}`,
      ...term.conditions.map((c) => condition('e.data', [], c, values)),
    ];
    const from = clusters
      ? 'from profile_events e left join profiles m on m.account_id = e.account_id and m.profile_id = e.profile_id and m.canonical_id is not null'
      : 'from profile_events e';
    const profile = clusters ? 'coalesce(m.canonical_id, e.profile_id)' : 'e.profile_id';
    if (ascending(windows.map((w) => w.start)) && ascending(windows.map((w) => w.end))) {
      // An event at te lies in the windows i with start_i <= te <= end_i: with both bounds
      // ascending, those after the (number of ends before te) and up to the (number of starts
      // at or before te). Events before the first start or after the last end lie in none.
      const first = values.add(timestamp(windows[0].start), 'timestamptz');
      const last = values.add(timestamp(windows[windows.length - 1].end), 'timestamptz');
      leaves.push(`select ${profile} as profile_id, ${k} as term,
          ${bits(`width_bucket(e.event_time, ${starts})`, `width_bucket(e.event_time - interval '1 microsecond', ${ends})`)} as mask
        ${from}
        where ${where.join(' and ')} and e.event_time >= ${first} and e.event_time <= ${last}`);
    } else {
      leaves.push(`select ${profile} as profile_id, ${k} as term, 1::bigint << (w.i - 1)::int as mask
        ${from}
        join unnest(${starts}, ${ends}) with ordinality as w(start_at, end_at, i) on e.event_time >= w.start_at and e.event_time <= w.end_at
        where ${where.join(' and ')}`);
    }
    return k;
  };
  /** The mask of a (sub)query: an aggregate over the rows `t` of a profile, with & for && and | for ||. */
  const combine = (e: Expression): string => {
    if ('terms' in e) return `(${e.terms.map(combine).join(e.kind === 'and' ? ' & ' : ' | ')})`;
    return `coalesce(bit_or(t.mask) filter (where t.term = ${leaf(e)}), 0)`;
  };
  const mask = combine(expression);
  return { rows: leaves.map((l) => `(${l})`).join(' union all '), mask };
}

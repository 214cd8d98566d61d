import type { Condition, Expression } from './ast.ts';
import { windowBounds } from './time.ts';

/** What the evaluator knows of one profile (a merge cluster): values per section and events. */
export interface ProfileFacts {
  /** Section id → attribute version id → value. */
  attributes: Map<string, Record<string, unknown>>;
  events: { sectionId: string; versionId: string; time: number; data: Record<string, unknown> }[];
}

/** Text compares by code point (UTF-8 byte order), as PostgreSQL's "C" collation does: case-sensitive. */
export function compareText(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Whether a value meets a condition. A missing value, or one of another JSON type than the
 * constant, meets none (not even neq).
 */
export function holds(value: unknown, condition: Condition): boolean {
  let v = value;
  for (const key of condition.path)
    v = v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[key] : undefined;
  const c = condition.value;
  if (v === null || typeof v !== typeof c) return false;
  const order =
    typeof v === 'string'
      ? compareText(v, c as string)
      : typeof v === 'number'
        ? Math.sign(v - (c as number))
        : v === c
          ? 0
          : 1;
  switch (condition.comparator) {
    case 'eq':
      return order === 0;
    case 'neq':
      return order !== 0;
    case 'lt':
      return order < 0;
    case 'lte':
      return order <= 0;
    case 'gt':
      return order > 0;
    case 'gte':
      return order >= 0;
  }
}

/** Evaluates a checked query for one profile at `now` in `timeZone` (docs/aql.md "Meaning"). */
export function evaluate(expression: Expression, facts: ProfileFacts, now: number, timeZone: string): boolean {
  switch (expression.kind) {
    case 'and':
      return expression.terms.every((t) => evaluate(t, facts, now, timeZone));
    case 'or':
      return expression.terms.some((t) => evaluate(t, facts, now, timeZone));
    case 'attribute': {
      const values = facts.attributes.get(expression.sectionId);
      return values !== undefined && holds(values[expression.versionId], expression.condition);
    }
    case 'event': {
      const bounds = expression.window ? windowBounds(expression.window, now, timeZone) : undefined;
      return facts.events.some(
        (e) =>
          e.sectionId === expression.sectionId &&
          e.versionId === expression.versionId &&
          (!bounds || (e.time >= bounds.start && e.time <= bounds.end)) &&
          expression.conditions.every((c) => holds(e.data, c)),
      );
    }
  }
}

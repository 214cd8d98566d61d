/** The typed syntax tree of an AQL query (docs/aql.md). Positions are 0-based character offsets. */

export type Comparator = 'eq' | 'neq' | 'lt' | 'lte' | 'gt' | 'gte';
export const COMPARATORS: readonly Comparator[] = ['eq', 'neq', 'lt', 'lte', 'gt', 'gte'];

export type Constant = string | number | boolean;

export interface Condition {
  comparator: Comparator;
  value: Constant;
  /** Field path inside a struct attribute or event data (`attributeData` / `eventData`); empty for the value itself. */
  path: string[];
  /** Where the comparator, the data path's string (when there is one) and the constant are. */
  at: number;
  pathAt?: number;
  valueAt: number;
}

export type TimeUnit = 'minute' | 'hour' | 'day' | 'week' | 'month';

export type TimeWindow =
  | { kind: 'inLast'; unit: TimeUnit; from: number; to: number; at: number }
  | { kind: 'betweenDates'; start: string; end: string; at: number };

export interface AttributeTerm {
  kind: 'attribute';
  sectionId: string;
  versionId: string;
  condition: Condition;
  /** Where the term, its section id and its version id are. */
  at: number;
  sectionAt: number;
  versionAt: number;
}

export interface EventTerm {
  kind: 'event';
  sectionId: string;
  versionId: string;
  /** All hold for one and the same event. */
  conditions: Condition[];
  window: TimeWindow | undefined;
  at: number;
  sectionAt: number;
  versionAt: number;
}

export interface Logical {
  kind: 'and' | 'or';
  terms: Expression[];
}

export type Expression = AttributeTerm | EventTerm | Logical;

/** The attribute and event terms of an expression, in the order they are written. */
export function termsOf(expression: Expression): (AttributeTerm | EventTerm)[] {
  return 'terms' in expression ? expression.terms.flatMap(termsOf) : [expression];
}

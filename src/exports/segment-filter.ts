import { Problem } from '../core/problems.ts';

/**
 * The `filter` of an export's `segments` (SPEC §4.7): a logical expression over segment names.
 *
 *   filter  := or
 *   or      := and ( "|" and )*
 *   and     := not ( "&" not )*
 *   not     := "!" not | primary
 *   primary := NAME | "(" or ")"
 *
 * A NAME is a run of characters other than white space and `! & | ( )`. Positions in errors are
 * 1-based characters of the filter, as in AQL's errors.
 */
export type Filter =
  { kind: 'name'; name: string } | { kind: 'not'; operand: Filter } | { kind: 'and' | 'or'; terms: Filter[] };

interface Token {
  text: string;
  at: number;
}

const OPERATORS = new Set(['!', '&', '|', '(', ')']);

function tokens(text: string): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < text.length;) {
    if (/\s/.test(text[i])) {
      i++;
    } else if (OPERATORS.has(text[i])) {
      out.push({ text: text[i], at: i });
      i++;
    } else {
      const start = i;
      while (i < text.length && !/\s/.test(text[i]) && !OPERATORS.has(text[i])) i++;
      out.push({ text: text.slice(start, i), at: start });
    }
  }
  return out;
}

/** Parses a filter whose names must be among `names`; 400 AUD-1906 naming `field` and the position at fault. */
export function parseFilter(text: string, names: ReadonlySet<string>, field: string): Filter {
  const list = tokens(text);
  let next = 0;
  const fail = (at: number, message: string) => new Problem('AUD-1906', `${field}: ${message} at position ${at + 1}`);
  const found = (t: Token | undefined) => (t ? `"${t.text}"` : 'the end');
  const where = (t: Token | undefined) => t?.at ?? text.length;

  /** or := and ( "|" and )* */
  const parseOr = (): Filter => {
    const terms = [parseAnd()];
    while (list[next]?.text === '|') {
      next++;
      terms.push(parseAnd());
    }
    return terms.length === 1 ? terms[0] : { kind: 'or', terms };
  };
  /** and := not ( "&" not )* */
  const parseAnd = (): Filter => {
    const terms = [parseNot()];
    while (list[next]?.text === '&') {
      next++;
      terms.push(parseNot());
    }
    return terms.length === 1 ? terms[0] : { kind: 'and', terms };
  };
  /** not := "!" not | primary */
  const parseNot = (): Filter => {
    if (list[next]?.text === '!') {
      next++;
      return { kind: 'not', operand: parseNot() };
    }
    return parsePrimary();
  };
  /** primary := NAME | "(" or ")" */
  const parsePrimary = (): Filter => {
    const token = list[next];
    if (token?.text === '(') {
      next++;
      const inner = parseOr();
      if (list[next]?.text !== ')')
        throw fail(
          where(list[next]),
          `expected ")" closing the "(" at position ${token.at + 1}, found ${found(list[next])}`,
        );
      next++;
      return inner;
    }
    if (!token || OPERATORS.has(token.text))
      throw fail(where(token), `expected a segment name, "!" or "(", found ${found(token)}`);
    if (!names.has(token.text))
      throw fail(
        token.at,
        `unknown segment name "${token.text}" (the names are the keys of segments.segment_discriminators)`,
      );
    next++;
    return { kind: 'name', name: token.text };
  };

  const filter = parseOr();
  if (next < list.length) throw fail(list[next].at, `expected "&", "|" or the end, found ${found(list[next])}`);
  return filter;
}

/** The SQL of a filter, each name standing for the boolean SQL `column(name)`. */
export function filterSql(filter: Filter, column: (name: string) => string): string {
  switch (filter.kind) {
    case 'name':
      return column(filter.name);
    case 'not':
      return `not ${filterSql(filter.operand, column)}`;
    case 'and':
    case 'or':
      return `(${filter.terms.map((t) => filterSql(t, column)).join(` ${filter.kind} `)})`;
  }
}

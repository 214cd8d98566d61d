import {
  COMPARATORS,
  type Comparator,
  type Condition,
  type Constant,
  type Expression,
  type TimeUnit,
  type TimeWindow,
} from './ast.ts';
import { aqlError } from './errors.ts';
import { tokenize, type Token } from './lexer.ts';

const UNITS: readonly TimeUnit[] = ['minute', 'hour', 'day', 'week', 'month'];
const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** Parses AQL text into a syntax tree, or throws a 400 problem naming what is wrong and where. The grammar is docs/aql.md. */
export function parse(text: string): Expression {
  return new Parser(text).parseQuery();
}

function describe(token: Token): string {
  switch (token.kind) {
    case 'end':
      return 'the end of the query';
    case 'invalid':
      return `"${token.value}"`;
    case 'string':
      return `the string "${token.value}"`;
    case 'number':
      return `the number ${token.value}`;
    default:
      return `"${token.value}"`;
  }
}

class Parser {
  private readonly tokens: Token[];
  private i = 0;
  private readonly text: string;

  constructor(text: string) {
    this.text = text;
    this.tokens = tokenize(text);
  }

  private get token(): Token {
    return this.tokens[this.i];
  }

  private is(kind: Token['kind'], value?: string): boolean {
    return this.token.kind === kind && (value === undefined || this.token.value === value);
  }

  private expect(value: string, what = `"${value}"`, code: 'AUD-1701' | 'AUD-1707' = 'AUD-1701'): Token {
    if (!this.is('punct', value))
      throw this.error(
        code,
        `${code === 'AUD-1707' ? 'Invalid time-window syntax: expected' : 'Expected'} ${what}, found ${describe(this.token)}`,
      );
    return this.tokens[this.i++];
  }

  /** The problem of a fault at `at`; at text that is no token, that is the fault. */
  private error(code: Parameters<typeof aqlError>[0], message: string, at = this.token.at) {
    if (this.token.kind === 'invalid' && at === this.token.at)
      return aqlError('AUD-1701', this.text, at, this.token.message!);
    return aqlError(code, this.text, at, message);
  }

  /** query = or_expr end */
  parseQuery(): Expression {
    if (this.is('end'))
      throw this.error('AUD-1701', 'Expected a term such as section(<id>).attribute(<id>).eq(…), found an empty query');
    const expression = this.parseOr();
    if (!this.is('end'))
      throw this.error('AUD-1701', `Expected "&&", "||" or the end of the query, found ${describe(this.token)}`);
    return expression;
  }

  /** or_expr = and_expr { "||" and_expr } */
  private parseOr(): Expression {
    const terms = [this.parseAnd()];
    while (this.is('punct', '||')) {
      this.i++;
      terms.push(this.parseAnd());
    }
    return terms.length === 1 ? terms[0] : { kind: 'or', terms };
  }

  /** and_expr = primary { "&&" primary } */
  private parseAnd(): Expression {
    const terms = [this.parsePrimary()];
    while (this.is('punct', '&&')) {
      this.i++;
      terms.push(this.parsePrimary());
    }
    return terms.length === 1 ? terms[0] : { kind: 'and', terms };
  }

  /** primary = "(" or_expr ")" | term */
  private parsePrimary(): Expression {
    if (this.is('punct', '(')) {
      this.i++;
      const inner = this.parseOr();
      this.expect(')');
      return inner;
    }
    if (this.is('punct', '!')) throw this.error('AUD-1709', 'Unsupported expression: negation "!" is not part of AQL');
    return this.parseTerm();
  }

  /** natural = digits, as in section(12); its value and where it is */
  private parseNatural(code: 'AUD-1702' | 'AUD-1703', what: string): [string, number] {
    const token = this.token;
    if (token.kind !== 'number' || !/^\d+$/.test(token.value)) {
      const hint =
        token.kind === 'string'
          ? ' (not a quoted string)'
          : token.kind === 'name'
            ? ' (not a name or discriminator)'
            : '';
      throw this.error(code, `Invalid ${what} specifier: expected a natural number${hint}, found ${describe(token)}`);
    }
    this.i++;
    return [String(BigInt(token.value)), token.at];
  }

  /** term = "section" "(" natural ")" "." ( attribute_term | event_term ) */
  private parseTerm(): Expression {
    const at = this.token.at;
    if (!this.is('name', 'section'))
      throw this.error(
        'AUD-1709',
        `Unsupported expression: expected a term starting with section(<id>), found ${describe(this.token)}`,
      );
    this.i++;
    this.expect('(', '"(" after section');
    const [sectionId, sectionAt] = this.parseNatural('AUD-1702', 'section');
    this.expect(')');
    this.expect('.', '".attribute(<id>)" or ".event(<id>)"');
    const kind = this.token;
    if (kind.kind === 'name' && kind.value === 'attribute') return this.parseAttributeTerm(sectionId, at, sectionAt);
    if (kind.kind === 'name' && kind.value === 'event') return this.parseEventTerm(sectionId, at, sectionAt);
    throw this.error(
      'AUD-1703',
      `Invalid attribute or event specifier: expected attribute(<id>) or event(<id>), found ${describe(kind)}`,
    );
  }

  /** attribute_term = "attribute" "(" natural ")" [ "." "attributeData" "(" path ")" ] "." condition */
  private parseAttributeTerm(sectionId: string, at: number, sectionAt: number): Expression {
    this.i++;
    this.expect('(', '"(" after attribute');
    const [versionId, versionAt] = this.parseNatural('AUD-1703', 'attribute');
    this.expect(')');
    let path: [string[], number] | undefined;
    if (
      this.is('punct', '.') &&
      this.tokens[this.i + 1]?.kind === 'name' &&
      ['attributeData', 'eventData'].includes(this.tokens[this.i + 1].value)
    ) {
      this.i++;
      if (this.token.value === 'eventData')
        throw this.error('AUD-1704', 'Wrong data selector: an attribute takes attributeData("<field>"), not eventData');
      this.i++;
      path = this.parsePath();
    }
    if (!this.is('punct', '.'))
      throw this.error(
        'AUD-1705',
        `Missing condition: expected .eq(…), .lt(…) or another comparison after the attribute, found ${describe(this.token)}`,
      );
    this.i++;
    if (this.is('name', 'inLast') || this.is('name', 'betweenDates'))
      throw this.error('AUD-1707', 'Invalid time-window syntax: time windows apply to events, not attributes');
    if (this.is('name', 'attribute') || this.is('name', 'event'))
      throw this.error('AUD-1708', 'Several attribute or event expressions in one term; join terms with && or ||');
    return { kind: 'attribute', sectionId, versionId, condition: this.parseCondition(path), at, sectionAt, versionAt };
  }

  /** event_term = "event" "(" natural ")" { "." ( "eventData" "(" path ")" "." condition | time_window ) } */
  private parseEventTerm(sectionId: string, at: number, sectionAt: number): Expression {
    this.i++;
    this.expect('(', '"(" after event');
    const [versionId, versionAt] = this.parseNatural('AUD-1703', 'event');
    this.expect(')');
    const conditions: Condition[] = [];
    let window: TimeWindow | undefined;
    while (this.is('punct', '.')) {
      this.i++;
      const name = this.token;
      if (name.kind === 'name' && name.value === 'event')
        throw this.error('AUD-1708', 'Several event expressions: one event expression holds exactly one event()');
      if (name.kind === 'name' && name.value === 'attributeData')
        throw this.error('AUD-1704', 'Wrong data selector: an event takes eventData("<field>"), not attributeData');
      if (name.kind === 'name' && name.value === 'eventData') {
        this.i++;
        const path = this.parsePath();
        if (!this.is('punct', '.'))
          throw this.error(
            'AUD-1705',
            `Missing condition: expected .eq(…), .lt(…) or another comparison after eventData, found ${describe(this.token)}`,
          );
        this.i++;
        conditions.push(this.parseCondition(path));
      } else if (name.kind === 'name' && (name.value === 'inLast' || name.value === 'betweenDates')) {
        if (window)
          throw this.error('AUD-1707', 'Invalid time-window syntax: an event expression has at most one time window');
        window = name.value === 'inLast' ? this.parseInLast() : this.parseBetweenDates();
      } else if (name.kind === 'name' && (COMPARATORS as readonly string[]).includes(name.value)) {
        throw this.error(
          'AUD-1704',
          `Wrong data selector: a condition on an event needs eventData("<field>") before .${name.value}(…)`,
        );
      } else {
        throw this.error(
          'AUD-1709',
          `Unsupported expression: expected eventData, inLast or betweenDates, found ${describe(name)}`,
        );
      }
    }
    return { kind: 'event', sectionId, versionId, conditions, window, at, sectionAt, versionAt };
  }

  /** path = "(" string ")", a dotted field path without array markers; the path and where its string is */
  private parsePath(): [string[], number] {
    this.expect('(', '"(" and a field name');
    const token = this.token;
    if (token.kind !== 'string')
      throw this.error(
        'AUD-1706',
        `Missing string constant: a field name is a quoted string, found ${describe(token)}`,
      );
    this.i++;
    if (this.is('punct', '[')) throw this.error('AUD-1403', 'Array markers [] in data paths are not supported');
    this.expect(')');
    if (token.value.includes('[]') || token.value.includes('['))
      throw this.error('AUD-1403', `Array markers [] in data paths are not supported: "${token.value}"`, token.at);
    const path = token.value.split('.');
    if (path.some((p) => p === ''))
      throw this.error('AUD-1402', `The data path "${token.value}" does not point to a field`, token.at);
    return [path, token.at];
  }

  /** condition = comparator "(" constant ")"; comparator = eq | neq | lt | lte | gt | gte */
  private parseCondition(path: [string[], number] | undefined): Condition {
    const name = this.token;
    if (name.kind !== 'name' || !(COMPARATORS as readonly string[]).includes(name.value)) {
      throw this.error(
        'AUD-1705',
        `Missing condition: expected one of ${COMPARATORS.join(', ')}, found ${describe(name)}`,
      );
    }
    this.i++;
    if (!this.is('punct', '('))
      throw this.error(
        'AUD-1706',
        `Missing string constant: expected "(" and a constant after ${name.value}, found ${describe(this.token)}`,
      );
    this.i++;
    const valueAt = this.token.at;
    const value = this.parseConstant();
    this.expect(')');
    return {
      comparator: name.value as Comparator,
      value,
      path: path?.[0] ?? [],
      at: name.at,
      ...(path ? { pathAt: path[1] } : {}),
      valueAt,
    };
  }

  /** constant = string | number | "true" | "false" */
  private parseConstant(): Constant {
    const token = this.token;
    if (token.kind === 'string') {
      this.i++;
      return token.value;
    }
    if (token.kind === 'number' && Number.isFinite(Number(token.value))) {
      this.i++;
      return Number(token.value);
    }
    if (token.kind === 'name' && (token.value === 'true' || token.value === 'false')) {
      this.i++;
      return token.value === 'true';
    }
    throw this.error(
      'AUD-1706',
      `Missing string constant: expected a quoted string, a number, true or false, found ${describe(token)}`,
    );
  }

  /** time_window = "inLast" "(" "\"events.<unit>\"" "," natural "," natural ")" */
  private parseInLast(): TimeWindow {
    const at = this.token.at;
    this.i++;
    this.expect('(', '"(" after inLast', 'AUD-1707');
    const unitToken = this.token;
    const unit = unitToken.kind === 'string' ? unitToken.value.replace(/^events\./, '') : '';
    if (
      unitToken.kind !== 'string' ||
      !unitToken.value.startsWith('events.') ||
      !(UNITS as readonly string[]).includes(unit)
    ) {
      throw this.error(
        'AUD-1707',
        `Invalid time-window syntax: expected "events.<minute|hour|day|week|month>", found ${describe(unitToken)}`,
      );
    }
    this.i++;
    const bounds: number[] = [];
    for (let k = 0; k < 2; k++) {
      this.expect(',', 'a "," and a natural number', 'AUD-1707');
      const n = this.token;
      if (n.kind !== 'number' || !/^\d+$/.test(n.value))
        throw this.error('AUD-1707', `Invalid time-window syntax: expected a natural number, found ${describe(n)}`);
      bounds.push(Number(n.value));
      this.i++;
    }
    this.expect(')', '")" after the window', 'AUD-1707');
    if (bounds[0] > bounds[1])
      throw this.error(
        'AUD-1707',
        `Invalid time-window syntax: the window's start (${bounds[0]}) is after its end (${bounds[1]})`,
        at,
      );
    return { kind: 'inLast', unit: unit as TimeUnit, from: bounds[0], to: bounds[1], at };
  }

  /** time_window = "betweenDates" "(" "\"events\"" "," date "," date ")" */
  private parseBetweenDates(): TimeWindow {
    const at = this.token.at;
    this.i++;
    this.expect('(', '"(" after betweenDates', 'AUD-1707');
    if (!this.is('string', 'events'))
      throw this.error('AUD-1707', `Invalid time-window syntax: expected "events", found ${describe(this.token)}`);
    this.i++;
    const dates: string[] = [];
    for (let k = 0; k < 2; k++) {
      this.expect(',', 'a "," and a date', 'AUD-1707');
      const d = this.token;
      if (
        d.kind !== 'string' ||
        !DATE.test(d.value) ||
        Number.isNaN(Date.parse(d.value.length === 10 ? `${d.value}T00:00:00Z` : d.value))
      ) {
        throw this.error(
          'AUD-1707',
          `Invalid time-window syntax: expected a date such as "2026-01-31", found ${describe(d)}`,
        );
      }
      dates.push(d.value);
      this.i++;
    }
    this.expect(')', '")" after the dates', 'AUD-1707');
    return { kind: 'betweenDates', start: dates[0], end: dates[1], at };
  }
}

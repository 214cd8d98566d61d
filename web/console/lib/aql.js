// AQL (docs/aql.md) for the segment builder: a query read into the builder's conditions, and the
// builder's conditions written as a query. Pure functions, no DOM: the service stays the judge of
// a query (it checks it against the definitions on every count and save); this module only has
// to read back what the builder can show, and say "no" to the rest.

/**
 * The builder's tree:
 * - a group `{ kind: 'all' | 'any', items: [node…] }` (&& or ||; the top is always a group);
 * - an attribute condition `{ kind: 'attribute', section, version, path, comparator, value }`;
 * - an event condition `{ kind: 'event', section, version, conditions: [{ path, comparator, value }], window }`,
 *   its window null, `{ kind: 'inLast', unit, from, to }` or `{ kind: 'betweenDates', start, end }`.
 * `section` and `version` are the numeric ids as text; `path` a field path ('' for the value
 * itself); `value` `{ type: 'string' | 'number' | 'boolean', text }`, `text` the string itself, the
 * number as written, or 'true' / 'false'.
 */

export const COMPARATORS = ['eq', 'neq', 'lt', 'lte', 'gt', 'gte'];
export const UNITS = ['minute', 'hour', 'day', 'week', 'month'];

/** Why a query cannot be read into the builder (the text is still sent to the service as it is). */
export class NotBuildable extends Error {}

function tokenize(text) {
  const tokens = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) i++;
    else if (/[A-Za-z_]/.test(c)) {
      const start = i;
      while (i < text.length && /[A-Za-z0-9_]/.test(text[i])) i++;
      tokens.push({ kind: 'name', value: text.slice(start, i) });
    } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(text[i + 1] ?? ''))) {
      const start = i++;
      while (i < text.length && /[0-9.eE+-]/.test(text[i]) && !(text[i] === '.' && !/[0-9]/.test(text[i + 1] ?? '')))
        i++;
      tokens.push({ kind: 'number', value: text.slice(start, i) });
    } else if (c === '"' || c === "'") {
      let value = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\') {
          const next = text[i + 1];
          if (next === undefined) break;
          value += next === 'n' ? '\n' : next === 't' ? '\t' : next;
          i += 2;
        } else value += text[i++];
      }
      if (i >= text.length) throw new NotBuildable('an unclosed string');
      i++;
      tokens.push({ kind: 'string', value });
    } else {
      const p = ['&&', '||', '(', ')', '.', ','].find((p) => text.startsWith(p, i));
      if (!p) throw new NotBuildable(`the character "${c}"`);
      tokens.push({ kind: 'punct', value: p });
      i += p.length;
    }
  }
  tokens.push({ kind: 'end', value: '' });
  return tokens;
}

/** Reads a query into the builder's tree; throws NotBuildable for what the builder cannot show. */
export function parseAql(text) {
  const tokens = tokenize(text);
  let at = 0;
  const peek = () => tokens[at];
  const next = () => tokens[at++];
  const expect = (kind, value) => {
    const t = next();
    if (t.kind !== kind || (value !== undefined && t.value !== value))
      throw new NotBuildable(`expected ${value ?? kind}, found ${t.value || 'the end'}`);
    return t;
  };
  const natural = () => {
    const t = expect('number');
    if (!/^\d+$/.test(t.value)) throw new NotBuildable(`${t.value} is not an id`);
    return t.value;
  };
  const constant = () => {
    const t = next();
    if (t.kind === 'string') return { type: 'string', text: t.value };
    if (t.kind === 'number' && Number.isFinite(Number(t.value))) return { type: 'number', text: t.value };
    if (t.kind === 'name' && (t.value === 'true' || t.value === 'false')) return { type: 'boolean', text: t.value };
    throw new NotBuildable(`expected a constant, found ${t.value || 'the end'}`);
  };
  const condition = (path) => {
    const comparator = expect('name').value;
    if (!COMPARATORS.includes(comparator)) throw new NotBuildable(`${comparator} is not a comparison`);
    expect('punct', '(');
    const value = constant();
    expect('punct', ')');
    return { path, comparator, value };
  };
  const dataPath = () => {
    expect('punct', '(');
    const path = expect('string').value;
    expect('punct', ')');
    expect('punct', '.');
    return path;
  };
  const term = () => {
    expect('name', 'section');
    expect('punct', '(');
    const section = natural();
    expect('punct', ')');
    expect('punct', '.');
    const what = expect('name').value;
    expect('punct', '(');
    const version = natural();
    expect('punct', ')');
    if (what === 'attribute') {
      expect('punct', '.');
      let path = '';
      if (peek().value === 'attributeData') {
        next();
        path = dataPath();
      }
      return { kind: 'attribute', section, version, ...condition(path) };
    }
    if (what !== 'event') throw new NotBuildable(`${what} is neither attribute nor event`);
    const event = { kind: 'event', section, version, conditions: [], window: null };
    while (peek().value === '.') {
      next();
      const step = expect('name').value;
      if (step === 'eventData') event.conditions.push(condition(dataPath()));
      else if (step === 'inLast' || step === 'betweenDates') {
        if (event.window) throw new NotBuildable('a second time window');
        expect('punct', '(');
        const first = expect('string').value;
        expect('punct', ',');
        if (step === 'inLast') {
          const unit = /^events\.(\w+)$/.exec(first)?.[1];
          if (!UNITS.includes(unit)) throw new NotBuildable(`the unit ${first}`);
          const from = Number(natural());
          expect('punct', ',');
          const to = Number(natural());
          event.window = { kind: 'inLast', unit, from, to };
        } else {
          if (first !== 'events') throw new NotBuildable(`betweenDates of ${first}`);
          const start = expect('string').value;
          expect('punct', ',');
          const end = expect('string').value;
          event.window = { kind: 'betweenDates', start, end };
        }
        expect('punct', ')');
      } else throw new NotBuildable(`${step} after an event`);
    }
    return event;
  };
  // or_expr of and_exprs; a parenthesised group keeps its place, a group of the same kind merges.
  const group = (kind, items) => ({ kind, items: items.flatMap((i) => (i.kind === kind ? i.items : [i])) });
  const primary = () => {
    if (peek().value === '(') {
      next();
      const inner = or();
      expect('punct', ')');
      return inner.items.length === 1 ? inner.items[0] : inner;
    }
    return term();
  };
  const and = () => {
    const items = [primary()];
    while (peek().value === '&&') {
      next();
      items.push(primary());
    }
    return group('all', items);
  };
  const or = () => {
    const items = [and()];
    while (peek().value === '||') {
      next();
      items.push(and());
    }
    if (items.length === 1) return items[0];
    return group(
      'any',
      items.map((i) => (i.items.length === 1 ? i.items[0] : i)),
    );
  };
  if (peek().kind === 'end') return { kind: 'all', items: [] };
  const tree = or();
  expect('end');
  return tree;
}

/** A string constant as AQL writes it. */
function quote(text) {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t')}"`;
}

function constantText(value) {
  return value.type === 'string' ? quote(value.text) : value.text;
}

function conditionText({ comparator, value }) {
  return `${comparator}(${constantText(value)})`;
}

function termText(node) {
  const head = `section(${node.section})`;
  if (node.kind === 'attribute')
    return `${head}.attribute(${node.version})${node.path ? `.attributeData(${quote(node.path)})` : ''}.${conditionText(node)}`;
  const parts = [`${head}.event(${node.version})`];
  for (const c of node.conditions) parts.push(`eventData(${quote(c.path)}).${conditionText(c)}`);
  const w = node.window;
  if (w?.kind === 'inLast') parts.push(`inLast("events.${w.unit}", ${w.from}, ${w.to})`);
  if (w?.kind === 'betweenDates') parts.push(`betweenDates("events", ${quote(w.start)}, ${quote(w.end)})`);
  return parts.join('.');
}

/** The builder's tree as a query: `&&` inside `||` needs no parentheses, `||` inside `&&` does. */
export function writeAql(node, inside) {
  if (node.kind !== 'all' && node.kind !== 'any') return termText(node);
  const items = node.items.map((i) => writeAql(i, node.kind)).filter(Boolean);
  if (items.length === 0) return '';
  if (items.length === 1) return items[0];
  const text = items.join(node.kind === 'all' ? ' && ' : ' || ');
  return node.kind === 'any' && inside === 'all' ? `(${text})` : text;
}

/**
 * How deep a request body (or a stored JSON value) may nest objects and arrays. Deeper documents
 * are refused before anything walks them: every later step (validation, the database's jsonb,
 * answers) would recurse once per level. No body of the interface needs more than a handful.
 */
export const MAX_JSON_DEPTH = 64;

/** Why a value cannot be stored: a NUL character, a lone UTF-16 surrogate, or nesting beyond MAX_JSON_DEPTH. */
export type TextFault = 'nul' | 'surrogate' | 'depth';

/** What PostgreSQL's text and jsonb cannot hold: NUL, and a surrogate without its pair (`"\ud800"` in JSON). */
export function textFaultOf(text: string): TextFault | undefined {
  if (text.includes('\u0000')) return 'nul';
  if (!text.isWellFormed()) return 'surrogate';
  return undefined;
}

interface Node {
  value: unknown;
  parent: Node | undefined;
  key: string | number | undefined;
  depth: number;
}

/** The field a node is at, as clients name fields: `items[0].data.url` (built only for the one reported). */
function fieldOf(node: Node): string {
  const parts: (string | number)[] = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) parts.push(n.key!);
  return parts
    .reverse()
    .reduce<string>((acc, k) => (typeof k === 'number' ? `${acc}[${k}]` : acc ? `${acc}.${k}` : k), '');
}

/**
 * The first fault in a parsed JSON value (in a string or an object key) and the field it is at;
 * undefined when there is none. Walks with a stack of its own, so that no depth of input reaches
 * the call stack.
 */
export function textFaultIn(value: unknown): { fault: TextFault; field: string } | undefined {
  const stack: Node[] = [{ value, parent: undefined, key: undefined, depth: 0 }];
  for (let node = stack.pop(); node; node = stack.pop()) {
    const v = node.value;
    if (typeof v === 'string') {
      const fault = textFaultOf(v);
      if (fault) return { fault, field: fieldOf(node) };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    const depth = node.depth + 1;
    if (depth > MAX_JSON_DEPTH) return { fault: 'depth', field: fieldOf(node) };
    // Pushed last first, so that the first fault in document order is the one found.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: node, key: i, depth });
      continue;
    }
    const keys = Object.keys(v);
    for (const key of keys) {
      const fault = textFaultOf(key);
      if (fault) return { fault, field: fieldOf({ value: undefined, parent: node, key, depth }) };
    }
    for (let i = keys.length - 1; i >= 0; i--)
      stack.push({ value: (v as Record<string, unknown>)[keys[i]], parent: node, key: keys[i], depth });
  }
  return undefined;
}

import type { FastifyInstance } from 'fastify';
import { Problem } from '../../core/problems.ts';
import { MAX_JSON_DEPTH } from '../../core/text.ts';

/**
 * Parses `a[0][b]=x&a[1][b]=y` into `{a: [{b: 'x'}, {b: 'y'}]}`: the form bodies that existing
 * clients send to /oauth/token, merges and evaluations (ENDPOINTS.md "Profiles").
 */
export function parseBracketForm(body: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const path = key.match(/^([^[\]]+)((?:\[[^[\]]*\])*)$/);
    if (!path) throw new Problem('AUD-1004', `Form field name "${key}" is not of the form name[key][key]…`);
    const parts = [path[1], ...[...path[2].matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1])];
    // Bounded here, before arraysFromIndexes walks the result by recursion.
    if (parts.length > MAX_JSON_DEPTH)
      throw new Problem(
        'AUD-1014',
        `Form field name "${key.slice(0, 100)}…" nests deeper than ${MAX_JSON_DEPTH} levels`,
      );
    let node: Record<string, unknown> = root;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] === '' ? String(Object.keys(node).length) : parts[i];
      if (['__proto__', 'constructor', 'prototype'].includes(part))
        throw new Problem('AUD-1004', `Form field name "${key}" is not allowed`);
      if (i === parts.length - 1) {
        if (typeof node[part] === 'object')
          throw new Problem('AUD-1004', `Form field "${key}" conflicts with another field`);
        node[part] = value;
      } else {
        const next = node[part];
        if (next !== undefined && (typeof next !== 'object' || next === null))
          throw new Problem('AUD-1004', `Form field "${key}" conflicts with another field`);
        node = (next ?? (node[part] = {})) as Record<string, unknown>;
      }
    }
  }
  return arraysFromIndexes(root) as Record<string, unknown>;
}

/** Objects whose keys are exactly 0..n-1 become arrays. */
function arraysFromIndexes(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const obj = value as Record<string, unknown>;
  for (const k of Object.keys(obj)) obj[k] = arraysFromIndexes(obj[k]);
  const keys = Object.keys(obj);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => obj[k]);
  return obj;
}

/** JSON lines (one JSON value a line, blank lines ignored) as an array: the operator's event ingestion takes them. */
export function parseJsonLines(body: string): unknown[] {
  const values: unknown[] = [];
  let line = 0;
  for (const text of body.split('\n')) {
    line++;
    if (text.trim() === '') continue;
    try {
      values.push(JSON.parse(text));
    } catch (err) {
      throw new Problem('AUD-1004', `Line ${line} of the JSON lines body is not valid JSON: ${(err as Error).message}`);
    }
  }
  return values;
}

/** JSON, JSON merge patch (SPEC §1.1), JSON lines and form bodies; any other type (text/plain included) → 415. */
export function registerBodyParsers(app: FastifyInstance): void {
  // Fastify reads text/plain as a string by default; no route takes text, and a JSON document sent
  // without its type (fetch's default) should hear "send application/json", not "body must be object".
  app.removeContentTypeParser('text/plain');
  const strict = app.getDefaultJsonParser('error', 'error');
  // An empty body with a JSON type (clients send one on PUT …/locks and DELETE) is no body;
  // routes that need one say so through their schema.
  const json: typeof strict = (request, body, done) =>
    body === '' ? done(null, undefined) : strict(request, body, done);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, json);
  app.addContentTypeParser('application/merge-patch+json', { parseAs: 'string' }, json);
  const lines: Parameters<typeof app.addContentTypeParser>[2] = (_req, body, done) => {
    try {
      done(null, parseJsonLines(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  };
  app.addContentTypeParser(['application/x-ndjson', 'application/jsonl'], { parseAs: 'string' }, lines);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseBracketForm(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Problem } from '../../core/problems.ts';

/** Where a value holds a NUL character (in a string or an object key), as clients name fields: `items[0].data.url`; undefined when nowhere. */
export function nulFieldOf(value: unknown, field = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? field : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = nulFieldOf(item, `${field}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const name = field ? `${field}.${key}` : key;
    if (key.includes('\u0000')) return name;
    const found = nulFieldOf(item, name);
    if (found !== undefined) return found;
  }
  return undefined;
}

const PARTS = [
  ['params', 'path parameter'],
  ['query', 'query parameter'],
  ['body', 'body field'],
] as const;

/**
 * Refuses text holding NUL (U+0000) anywhere in a request's path, query or body, before any
 * validation or handler: PostgreSQL stores no NUL in text or jsonb, so it would otherwise end in a
 * 500 wherever it reached the database (a tag name, a key, event data, a client_id).
 */
export function registerNulGuard(app: FastifyInstance): void {
  // A callback hook, not an async one: it runs on every request and has nothing to wait for.
  app.addHook('preValidation', (request: FastifyRequest, _reply, done) => {
    for (const [part, name] of PARTS) {
      const field = nulFieldOf(request[part]);
      if (field !== undefined)
        return done(
          new Problem(
            'AUD-1012',
            `The ${field ? `${name} "${field}"` : `request ${part}`} holds a NUL character (U+0000), which no text may hold`,
          ),
        );
    }
    done();
  });
}

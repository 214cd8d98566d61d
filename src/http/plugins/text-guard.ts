import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Problem } from '../../core/problems.ts';
import { MAX_JSON_DEPTH, textFaultIn } from '../../core/text.ts';

const PARTS = [
  ['params', 'path parameter'],
  ['query', 'query parameter'],
  ['body', 'body field'],
] as const;

/**
 * Refuses, in a request's path, query or body and before any validation or handler, what would
 * otherwise end in a 500: text holding NUL (U+0000) or a lone UTF-16 surrogate (`"\ud800"`), which
 * PostgreSQL's text and jsonb cannot store (a tag name, a key, event data, a client_id), and a body
 * nested deeper than MAX_JSON_DEPTH, which every later step would walk by recursion.
 */
export function registerTextGuard(app: FastifyInstance): void {
  // A callback hook, not an async one: it runs on every request and has nothing to wait for.
  app.addHook('preValidation', (request: FastifyRequest, _reply, done) => {
    for (const [part, name] of PARTS) {
      const found = textFaultIn(request[part]);
      if (!found) continue;
      const where = found.field ? `The ${name} "${found.field}"` : `The request ${part}`;
      return done(
        found.fault === 'nul'
          ? new Problem('AUD-1012', `${where} holds a NUL character (U+0000), which no text may hold`)
          : found.fault === 'surrogate'
            ? new Problem(
                'AUD-1013',
                `${where} holds a lone UTF-16 surrogate (such as "\\ud800" without its pair), which is no character`,
              )
            : new Problem('AUD-1014', `${where} nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`),
      );
    }
    done();
  });
}

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { TestServer } from '../../test/app.ts';
import { createLogger } from './logging.ts';
import { operation, registerOperations } from './operation.ts';

// The access an operation declares (src/http/operation.ts) is the one /openapi.json publishes:
// an operation documented with `security: []` is served without a token, every other one
// refuses a request without one. A client generated from the document knows which calls need a token.

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

describe('access published in /openapi.json', () => {
  it('AUTH-09: an operation is documented without security exactly when it answers without a token', async () => {
    const { paths } = (await server.request('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { security?: unknown[] }>>;
    };
    const mismatched: string[] = [];
    for (const [path, methods] of Object.entries(paths))
      for (const [method, op] of Object.entries(methods)) {
        const open = Array.isArray(op.security) && op.security.length === 0;
        const res = await server.request(method.toUpperCase(), path.replace(/\{[^}]+\}/g, '1'));
        if ((res.status === 401) === open) mismatched.push(`${method.toUpperCase()} ${path} → ${res.status}`);
      }
    expect(mismatched).toEqual([]);
  });
});

describe('an operation that sends its own answer (files, pixels, redirects)', () => {
  it('answers once: the shared handler does not send again, and nothing is logged about a second answer', async () => {
    const lines: string[] = [];
    const app = Fastify({ loggerInstance: createLogger('warn', { write: (line) => void lines.push(line) }) });
    await registerOperations(app, server.services, {
      tags: ['test'],
      operations: [
        operation({
          method: 'GET',
          path: '/own-answer',
          summary: 'Sends its own answer',
          description: 'A file, a pixel or a redirect.',
          scope: 'public',
          handle: async ({ reply }) => reply.code(200).type('text/plain').send('sent by the handler'),
        }),
      ],
    });
    const res = await app.inject({ method: 'GET', url: '/own-answer' });
    await app.close();
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('sent by the handler');
    expect(lines.filter((line) => /already sent/i.test(line))).toEqual([]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';

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

import { expect } from 'vitest';
import type { Manifest } from '../src/definitions/schemas.ts';
import { expectProblem, type Response, type TestServer } from './app.ts';
import { declaredIn } from './problem-codes.ts';

// An account made of what the examples of /openapi.json name (the section "Shop", its attributes,
// tags, topics and segments), and each operation's request as its examples make it: the tests that
// send the examples (test/examples.test.ts) or change one part of them to cause a refusal
// (test/declared-codes*.test.ts) share both, and the latter the check of such a refusal.

export const SECTION = 'com.vendor1.sections.user-created.shop';

export const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      ecommerce_connected: false,
      attributes: [
        { name: 'City', versions: [{ type: ['Text'] }] },
        { name: 'Loyalty points', versions: [{ type: ['Number with decimal'] }] },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
      ],
      tags: [{ name: 'VIP' }, { name: 'First order' }, { name: 'Newsletter reader' }],
      events: [
        {
          name: 'Page view',
          discriminator: 'com.vendor1.events.page-view',
          versions: [{ type: ['url', 'title', 'device'].map((name) => ({ name, type: 'Text' })) }],
        },
      ],
      topic_folders: [{ name: 'Newsletters' }],
      topics: [{ name: 'Weekly newsletter', folder: 'com.vendor1.topic-folders.user-created.newsletters' }],
    },
  ],
  segments: ['Loyal customers', 'Recent visitors', 'Frequent buyers'].map((name) => ({
    name,
    section: SECTION,
    versions: [
      {
        query: 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.loyalty-points@1}).gt(100)',
      },
    ],
  })),
};

/** An operation of /openapi.json, with its method and path. */
export interface DocumentedOperation {
  method: string;
  path: string;
  operationId: string;
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; example?: unknown; required?: boolean }[];
  requestBody?: { content: Record<string, { example?: unknown }> };
  responses: Record<string, unknown>;
}

/** Every operation of the server's /openapi.json. */
export async function documentedOperations(server: TestServer): Promise<DocumentedOperation[]> {
  const document = (await server.request('GET', '/openapi.json')).body as {
    paths: Record<string, Record<string, DocumentedOperation>>;
  };
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ ...op, method: method.toUpperCase(), path })),
  );
}

/**
 * Sends the operation's request as its examples make it, in the account of `accountId` (its id in
 * `account_id`) with `token` for the account's routes: `params` in place of the examples of those
 * parameters (of the path or the query), and `body` in place of the example's body when given.
 */
export function sendExample(
  server: TestServer,
  op: DocumentedOperation,
  account: { accountId: string; token: string },
  change: { params?: Record<string, string>; body?: (example: unknown) => unknown } = {},
): Promise<Response> {
  let path = op.path;
  const query = new URLSearchParams();
  for (const p of op.parameters ?? []) {
    const value = p.name === 'account_id' ? account.accountId : (change.params?.[p.name] ?? p.example);
    if (value === undefined) continue;
    if (p.in === 'path') path = path.replace(`{${p.name}}`, encodeURIComponent(String(value)));
    if (p.in === 'query') query.set(p.name, Array.isArray(value) ? value.join(',') : String(value));
  }
  const example = op.requestBody?.content['application/json']?.example;
  const body = change.body ? change.body(structuredClone(example)) : example;
  const scheme = Object.keys(op.security?.[0] ?? {})[0];
  const credential = scheme === 'operator' ? server.services.adminToken : scheme ? account.token : undefined;
  return server.request(op.method, `${path}${query.size > 0 ? `?${query}` : ''}`, {
    token: credential,
    ...(body !== undefined ? { body } : {}),
  });
}

/** Where a test of declared codes sends its requests: a server, an account of it, and the operations of its /openapi.json. */
export interface Target {
  server: TestServer;
  account: { accountId: string; token: string };
  operations: DocumentedOperation[];
}

/** The checks of declared codes by example requests, on the target a test file's set-up makes (`target` answers it once made). */
export function refusals(target: () => Target) {
  return {
    /**
     * Sends each operation of `ids` (that declares `code`) its example with `change`; each must
     * answer `code` with a detail that holds `names`.
     */
    async eachOf(
      code: string,
      ids: string[],
      change: (op: DocumentedOperation) => Parameters<typeof sendExample>[3],
      names: string,
    ): Promise<void> {
      const { server, account, operations } = target();
      const ops = operations.filter((op) => ids.includes(op.operationId) && declaredIn(op.description).includes(code));
      expect(ops.map((op) => op.operationId).sort()).toEqual([...ids].sort());
      const missed: string[] = [];
      for (const op of ops) {
        const res = await sendExample(server, op, account, change(op));
        // The per-second limits are spent by the clock of the test's server.
        server.clock.advance(2000);
        if (res.body?.type !== `/errors/${code}` || !String(res.body?.detail).includes(names))
          missed.push(`${op.operationId}: ${res.status} ${res.body?.type} ${res.body?.detail ?? res.text}`);
        else expectProblem(res, res.status, code);
      }
      expect(missed).toEqual([]);
    },
  };
}

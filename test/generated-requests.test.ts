import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer } from './app.ts';

// Requests generated from /openapi.json, over every operation: valid-looking and hostile path
// values, query values and bodies shaped by each operation's schema or not at all. Whatever comes
// in, the answer is never a 5xx, and every 4xx is a problem document (docs/security.md).

let server: TestServer;
let token: string;
let accountId: string;
interface Operation {
  method: string;
  path: string;
  params: { in: string; name: string }[];
  body: JsonSchema | undefined;
}
interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  $ref?: string;
}
let operations: Operation[];
let components: Record<string, JsonSchema> = {};

const SECTION = 'com.vendor1.sections.user-created.shop';
/** Stands for the test account's id, known only once it exists. */
const ACCOUNT = Symbol('account');
/** Values a client or an attacker might put anywhere: real identifiers, numbers past every range, escapes, NUL, traversal. */
const hostile = fc.oneof(
  fc.constantFrom(
    SECTION,
    'com.vendor1.keyspaces.email',
    'com.vendor1.keyspaces.web',
    'com.vendor1.channels.email',
    'ann@example.com',
    '+4741234567',
    'com.vendor1.topic-folders.root',
  ),
  fc.constantFrom(
    '',
    '0',
    '-1',
    '1',
    '99999999999999999999999',
    '1e309',
    'NaN',
    'null',
    'true',
    '%',
    '%00',
    '\u0000',
    '../../etc',
    '__proto__',
    'constructor',
    ' ',
    '\uFFFF',
    '\uD800',
  ),
  fc.stringMatching(/^\d{1,30}$/),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

/** A value for a JSON schema: of its shape most of the time, anything JSON otherwise. */
function valueOf(schema: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  const anything = fc.jsonValue({ maxDepth: 2 });
  if (!schema || depth > 4) return anything;
  // Named shapes are components of the document (src/http/openapi.ts).
  if (schema.$ref) return valueOf(components[schema.$ref.split('/').pop()!], depth);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((s) => valueOf(s, depth + 1)), anything);
  if (schema.enum) return fc.oneof(fc.constantFrom(...schema.enum), anything);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  const shaped: fc.Arbitrary<unknown> = (() => {
    switch (type) {
      case 'object':
        return schema.properties
          ? fc.record(
              Object.fromEntries(Object.entries(schema.properties).map(([k, s]) => [k, valueOf(s, depth + 1)])),
              { requiredKeys: [] },
            )
          : fc.dictionary(hostile, valueOf(undefined, depth + 1), { maxKeys: 4 });
      case 'array':
        return fc.array(valueOf(schema.items, depth + 1), { maxLength: 4 });
      case 'string':
        return hostile;
      case 'integer':
      case 'number':
        return fc.oneof(fc.integer(), fc.constantFrom(2 ** 63, -(2 ** 63), 1e308, 0.5, -1));
      case 'boolean':
        return fc.boolean();
      default:
        return anything;
    }
  })();
  return fc.oneof({ weight: 4, arbitrary: shaped }, { weight: 1, arbitrary: anything });
}

/**
 * How the body goes: as JSON, form-encoded, or broken; as JSON with a lone surrogate ending every
 * string (keys too), or with a value nested thousands of levels deep added to it.
 */
const encoding = fc.constantFrom('json', 'json', 'json', 'form', 'garbage', 'surrogates', 'deep');

/** The JSON text of a body with a lone surrogate after every string of it. */
function withSurrogates(body: unknown): string {
  const walk = (v: unknown): unknown =>
    typeof v === 'string'
      ? `${v}\uD800`
      : Array.isArray(v)
        ? v.map(walk)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [`${k}\uDC00`, walk(x)]))
          : v;
  return JSON.stringify(walk(body));
}

/** The JSON text of a body with `levels` nested arrays in it: as a new field of an object, else as the body. */
function withDepth(body: unknown, levels: number): string {
  const deep = '['.repeat(levels) + ']'.repeat(levels);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return deep;
  const text = JSON.stringify(body);
  return `${text.slice(0, -1)}${text === '{}' ? '' : ','}"deep":${deep}}`;
}

function formOf(value: unknown, prefix = ''): string[] {
  if (value !== null && typeof value === 'object')
    return Object.entries(value).flatMap(([k, v]) => formOf(v, prefix ? `${prefix}[${k}]` : k));
  return [
    `${encodeURIComponent((prefix || 'value').toWellFormed())}=${encodeURIComponent(String(value).toWellFormed())}`,
  ];
}

beforeAll(async () => {
  server = await TestServer.start();
  const limits = Object.fromEntries(
    [
      'requests_per_second',
      'token_requests_per_minute',
      'import_requests_per_minute',
      'profile_export_requests_per_second',
      'event_export_requests_per_minute',
      'profile_key_operations_per_second',
      'pending_imports',
    ].map((n) => [n, null]),
  );
  const creds = await server.login(SHOP, limits);
  token = creds.token;
  accountId = creds.accountId;
  const doc = (await server.request('GET', '/openapi.json')).body as {
    components: { schemas: Record<string, JsonSchema> };
    paths: Record<
      string,
      Record<
        string,
        {
          parameters?: { in: string; name: string }[];
          requestBody?: { content: Record<string, { schema: JsonSchema }> };
        }
      >
    >;
  };
  components = doc.components.schemas;
  operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        params: op.parameters ?? [],
        body: Object.values(op.requestBody?.content ?? {})[0]?.schema,
      })),
  );
});
afterAll(async () => server?.close());

describe('generated requests over every operation of /openapi.json', () => {
  // 2,500 requests: an outer bound of its own, for the work, not the clock (130 s at a load of
  // 12–14 with two test files at a time; the suite's bound is 120 s).
  it('never answer a 5xx, and answer every 4xx as application/problem+json', { timeout: 600_000 }, async () => {
    expect(operations.length).toBeGreaterThan(50);
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: operations.length - 1 }).chain((i) => {
          const op = operations[i];
          const queryNames = op.params.filter((p) => p.in === 'query').map((p) => p.name);
          return fc.record({
            op: fc.constant(op),
            // Path values: hostile, or the test account's own id where an account id goes.
            path: fc.tuple(
              ...op.params
                .filter((p) => p.in === 'path')
                .map((p) =>
                  p.name !== 'account_id'
                    ? hostile
                    : op.method === 'DELETE' && op.path === '/admin/accounts/{account_id}'
                      ? // Deleting the test's account would leave the other operations nothing to reach.
                        hostile.filter((v) => String(v) !== accountId)
                      : fc.oneof(fc.constant(ACCOUNT), hostile),
                ),
              fc.constant(''),
            ),
            query: fc.dictionary(
              fc.oneof(fc.constantFrom(...(queryNames.length ? queryNames : ['x'])), hostile),
              hostile,
              { maxKeys: 3 },
            ),
            body: op.body ? valueOf(op.body) : fc.option(fc.jsonValue({ maxDepth: 1 })),
            encoding,
            garbage: fc.string({ maxLength: 30 }),
            levels: fc.constantFrom(65, 1000, 10_000),
          });
        }),
        async ({ op, path, query, body, encoding: how, garbage, levels }) => {
          const pathParams = op.params.filter((p) => p.in === 'path');
          let url = op.path;
          pathParams.forEach(
            (p, i) =>
              (url = url.replace(
                `{${p.name}}`,
                encodeURIComponent((path[i] === ACCOUNT ? accountId : String(path[i])).toWellFormed()),
              )),
          );
          const search = new URLSearchParams(query as Record<string, string>).toString();
          const headers: Record<string, string> = {
            authorization: `Bearer ${op.path.startsWith('/admin') ? server.services.adminToken : token}`,
          };
          let raw: string | undefined;
          if (body !== null && body !== undefined && op.method !== 'GET') {
            if (how === 'form') {
              headers['content-type'] = 'application/x-www-form-urlencoded';
              raw = formOf(body).join('&');
            } else {
              headers['content-type'] = op.method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
              raw =
                how === 'garbage'
                  ? garbage
                  : how === 'surrogates'
                    ? withSurrogates(body)
                    : how === 'deep'
                      ? withDepth(body, levels)
                      : JSON.stringify(body);
            }
          }
          const res = await server.request(op.method, `${url}${search ? `?${search}` : ''}`, { raw, headers });
          seen.add(`${op.method} ${op.path}`);
          const where = `${op.method} ${url} ${raw?.slice(0, 500) ?? ''} → ${res.status} ${res.text.slice(0, 300)}`;
          expect(res.status, where).toBeLessThan(500);
          if (res.status >= 400) {
            expect(res.headers.get('content-type') ?? '', where).toMatch(/^application\/problem\+json/);
            expect(res.body.status, where).toBe(res.status);
          }
        },
      ),
      { numRuns: 2500 },
    );
    // Every operation was called.
    expect(operations.filter((o) => !seen.has(`${o.method} ${o.path}`))).toEqual([]);
  });
});

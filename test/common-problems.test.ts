import crypto from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../src/core/text.ts';
import { expectProblem, SHOP, TestServer, type Response } from './app.ts';
import { declaredIn } from './problem-codes.ts';

// The refusals every operation of a kind declares (`commonErrors` in src/http/operation.ts), asked
// of every operation of /openapi.json by a request made from its entry there: no token and a
// wrong token (AUTH-09), text no column holds, a body that is no JSON, of another type, too deep
// or too large (LIM-08), a body the schema refuses, an account beyond its rate (LIM-01), an unknown account on the operator's routes,
// a section or segment of the path that the account does not have. Each probe runs where the operation
// declares the code, and must answer it: a declared code no request can meet fails here.

let server: TestServer;
/** Tokens: the account's, and one of an account that may make no request a second. */
let token: string;
let throttled: string;
let accountId: string;

interface Schema {
  type?: string | string[];
  required?: string[];
  properties?: Record<string, Schema>;
  $ref?: string;
}
interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema?: Schema & { pattern?: string; enum?: unknown[]; default?: unknown };
}
interface Operation {
  method: string;
  path: string;
  operationId: string;
  declared: string[];
  security: boolean;
  parameters: Parameter[];
  body: Schema | undefined;
  /** The request body of the document's example. */
  example: unknown;
}
let operations: Operation[] = [];
let components: Record<string, Schema> = {};

beforeAll(async () => {
  server = await TestServer.start();
  ({ token, accountId } = await server.login(SHOP));
  throttled = (await server.login(SHOP, { requests_per_second: 0, token_requests_per_minute: null })).token;
  const document = (await server.request('GET', '/openapi.json')).body as {
    paths: Record<string, Record<string, Omit<Operation, 'declared'> & { description?: string; security?: unknown[] }>>;
    components: { schemas: Record<string, Schema> };
  };
  components = document.components.schemas;
  for (const [path, methods] of Object.entries(document.paths))
    for (const [method, op] of Object.entries(methods)) {
      const json = (op as { requestBody?: { content: Record<string, { schema: Schema; example?: unknown }> } })
        .requestBody?.content?.['application/json'];
      operations.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        declared: declaredIn(op.description),
        security: (op.security ?? []).length > 0,
        parameters: op.parameters ?? [],
        body: json ? resolve(json.schema) : undefined,
        example: json?.example,
      });
    }
});
afterAll(async () => server?.close());

function resolve(schema: Schema): Schema {
  return schema.$ref ? resolve(components[schema.$ref.split('/').pop()!]) : schema;
}

/** The operation's path with a value that its schema accepts in each parameter: the account's own id, `1` elsewhere. */
function pathOf(op: Operation, account = accountId): string {
  return op.path.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'account_id' ? account : '1'));
}

/** The credentials the operation takes: the operator's token for the operator's and metrics routes, the account's for the others. */
function credentialsOf(op: Operation): string | undefined {
  if (!op.security) return undefined;
  return op.path.startsWith('/admin') || op.path === '/metrics' ? server.services.adminToken : token;
}

/** Calls the operation with a raw body and Content-Type. */
function call(op: Operation, options: { path?: string; query?: string; type?: string; raw?: string; token?: string }) {
  const headers: Record<string, string> = options.type ? { 'content-type': options.type } : {};
  return server.request(op.method, (options.path ?? pathOf(op)) + (options.query ?? ''), {
    token: options.token ?? credentialsOf(op),
    raw: options.raw,
    headers,
  });
}

/** A request whose Content-Length says more than the route takes, answered before its body is read. */
function tooLarge(op: Operation): Promise<Response> {
  return new Promise((done, fail) => {
    const request = http.request(server.url + pathOf(op), {
      method: op.method,
      headers: {
        'content-type': 'application/json',
        'content-length': String(2 ** 30),
        ...(credentialsOf(op) ? { authorization: `Bearer ${credentialsOf(op)}` } : {}),
      },
    });
    request.on('response', (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        request.destroy();
        done({
          status: res.statusCode!,
          headers: new Headers(res.headers as Record<string, string>),
          text,
          body: JSON.parse(text),
        });
      });
    });
    request.on('error', fail);
    request.write('{"a":"');
  });
}

/** Runs `probe` on each operation that declares `code`; names those that answered otherwise. */
async function everyDeclaring(
  code: string,
  probe: (op: Operation) => Promise<Response>,
  only = (_: Operation) => true,
) {
  const ops = operations.filter((op) => op.declared.includes(code) && only(op));
  expect(ops.length).toBeGreaterThan(0);
  const missed: string[] = [];
  for (const op of ops) {
    const res = await probe(op);
    if (res.status >= 500 || !String(res.headers.get('content-type')).startsWith('application/problem+json'))
      missed.push(`${op.method} ${op.path}: ${res.status} ${res.text.slice(0, 200)}`);
    else if (res.body.type !== `/errors/${code}`)
      missed.push(`${op.method} ${op.path}: ${res.body.type} ${res.body.detail}`);
    else expectProblem(res, res.status, code);
  }
  expect(missed).toEqual([]);
}

describe('the refusals every operation of a kind declares, on every operation', () => {
  it('AUTH-09: no token, and a token the service never issued: 401 AUD-8', async () => {
    await everyDeclaring('AUD-8', (op) => call(op, { token: '' }));
    await everyDeclaring('AUD-8', (op) => call(op, { token: crypto.randomBytes(24).toString('base64url') }));
  });

  it('LIM-01: an account past its requests a second: 429 AUD-1002', async () => {
    await everyDeclaring(
      'AUD-1002',
      (op) => call(op, { token: throttled }),
      (op) => credentialsOf(op) === token,
    );
  });

  it("an operator's route of an account that does not exist: 404 AUD-1110", async () => {
    // With the example's body, which the schema takes: the account is looked up once the request is valid.
    await everyDeclaring('AUD-1110', (op) =>
      call(op, {
        path: pathOf(op, '999999999999999'),
        ...(op.body ? { type: 'application/json', raw: JSON.stringify(op.example ?? {}) } : {}),
      }),
    );
  });

  it('ERR-04: NUL in a query parameter, a lone surrogate in a JSON body: 400 AUD-1012, AUD-1013', async () => {
    await everyDeclaring('AUD-1012', (op) => call(op, { query: '?note=a%00b' }));
    await everyDeclaring('AUD-1013', (op) => call(op, { type: 'application/json', raw: '{"note":"a\\ud800"}' }));
  });

  it('ERR-04, LIM-08: a body that is no JSON, of another type, nested too deeply or too large: AUD-1004, 1005, 1014, 413', async () => {
    await everyDeclaring('AUD-1004', (op) => call(op, { type: 'application/json', raw: '{"note":' }));
    await everyDeclaring('AUD-1005', (op) => call(op, { type: 'text/plain', raw: 'note' }));
    const deep = '['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1);
    await everyDeclaring('AUD-1014', (op) => call(op, { type: 'application/json', raw: deep }));
    await everyDeclaring('AUD-1001', tooLarge);
  });

  it('ERR-04: a body of another type, a query value of another, a path not decoded: 400 AUD-0', async () => {
    await everyDeclaring('AUD-0', (op) => {
      if (op.body) return call(op, { type: 'application/json', raw: '"note"' });
      const typed = op.parameters.find((p) => p.in === 'query' && p.schema && !isPlainText(p.schema));
      if (typed) return call(op, { query: `?${typed.name}=not-a-value!` });
      // A % that starts no escape, where the path has a parameter to decode.
      return call(op, { path: pathOf(op).replace(/\/1(\/|$)/, '/%zz$1') });
    });
  });

  // Where the operation has no body (those with one: their own tests, whose bodies must be valid first).
  it('a section or a segment the account does not have, named in the path: 404 AUD-1102, AUD-1104', async () => {
    const named = (param: string) => (op: Operation) => op.body === undefined && op.path.includes(`{${param}}`);
    // The profile KNOWN names exists: operations that look the profile up first find it.
    const created = await server.request(
      'POST',
      `/audience/keyspaces/${KNOWN.keyspace_discriminator}/sections/com.vendor1.sections.user-created.shop/profiles`,
      { token, body: { profile_key: KNOWN.profile_key } },
    );
    expect(created.status, created.text).toBe(201);
    await everyDeclaring(
      'AUD-1102',
      (op) => call(op, { path: pathNaming(op, 'section_discriminator', NO_SECTION), query: requiredQuery(op) }),
      named('section_discriminator'),
    );
    await everyDeclaring(
      'AUD-1104',
      (op) => call(op, { path: pathNaming(op, 'segment_discriminator', NO_SEGMENT), query: requiredQuery(op) }),
      named('segment_discriminator'),
    );
  });

  // Where the limited list is a field of the body's own; one deeper, the operation's own tests.
  it('LIM-09: a list of the body over its maximum: 413 AUD-1007', async () => {
    await everyDeclaring(
      'AUD-1007',
      (op) => call(op, { type: 'application/json', raw: JSON.stringify(overLimit(op)) }),
      (op) => limitedLists(op).length > 0,
    );
  });

  // Where the schema requires a field. An operation without a body or a required query field
  // answers AUD-1003 for a field one other needs (`key_prefix` needs `keyspace`): its own tests.
  it('ERR-04: a body or query without a field it requires: 400 AUD-1003', async () => {
    await everyDeclaring(
      'AUD-1003',
      (op) => {
        const body = op.body && lacking(op.body);
        return body === undefined ? call(op, {}) : call(op, { type: 'application/json', raw: JSON.stringify(body) });
      },
      (op) =>
        op.body !== undefined ||
        op.parameters.some((p) => p.in === 'query' && p.required && p.schema?.default === undefined),
    );
  });
});

const NO_SECTION = 'com.vendor1.sections.user-created.nowhere';
const NO_SEGMENT = 'com.vendor1.segments.user-created.nowhere';

/** Values of the account's own for the path parameters that name them: the rest is `1`. */
const KNOWN: Record<string, string> = {
  keyspace_discriminator: 'com.vendor1.keyspaces.email',
  profile_key: 'ann@example.com',
  channel_discriminator: 'com.vendor1.channels.email',
  address: 'ann@example.com',
};

/** The operation's path with `value` in the parameter `name`, one of KNOWN or `1` in the others. */
function pathNaming(op: Operation, name: string, value: string): string {
  return op.path.replace(/\{(\w+)\}/g, (_, param: string) =>
    encodeURIComponent(param === name ? value : (KNOWN[param] ?? '1')),
  );
}

/** The query of the operation's required parameters, each with a value its schema takes. */
function requiredQuery(op: Operation): string {
  const values = op.parameters
    .filter((p) => p.in === 'query' && p.required)
    .map((p) => {
      const schema = p.schema as Parameter['schema'] & { minimum?: number; type?: string };
      const value =
        schema?.enum?.[0] ??
        schema?.default ??
        (schema?.type === 'integer' || schema?.type === 'number' ? Math.max(1, schema.minimum ?? 1) : '1');
      return `${p.name}=${encodeURIComponent(String(value))}`;
    });
  return values.length > 0 ? `?${values.join('&')}` : '';
}

/** The lists of the body's own fields that have a maximum, by name. */
function limitedLists(op: Operation): [string, number][] {
  return Object.entries(op.body?.properties ?? {}).flatMap(([name, property]) => {
    const { maxItems } = resolve(property) as { maxItems?: number };
    return maxItems === undefined ? [] : [[name, maxItems] as [string, number]];
  });
}

/** The example's body with its limited lists one over their limit: `maxItems` + 1 of their first item. */
function overLimit(op: Operation): unknown {
  const example = { ...(op.example as Record<string, unknown[]>) };
  for (const [name, maxItems] of limitedLists(op)) example[name] = Array(maxItems + 1).fill(example[name]?.[0] ?? '1');
  return example;
}

/** A string the schema takes whatever it holds. */
function isPlainText(schema: Schema & { items?: Schema }): boolean {
  if (schema.type === 'array' && schema.items) return isPlainText(schema.items);
  return (
    Object.keys(schema).every((key) => ['type', 'description', 'title', 'examples', 'example'].includes(key)) &&
    schema.type === 'string'
  );
}

/** A value of the schema that leaves out a field it requires, the shallowest one; undefined when none. */
function lacking(schema: Schema): unknown {
  const s = resolve(schema) as Schema & { items?: Schema; anyOf?: Schema[] };
  if ((s.required ?? []).length > 0) return {};
  if (s.anyOf) return lacking(s.anyOf[0]);
  if (s.items) {
    const item = lacking(s.items);
    return item === undefined ? undefined : [item];
  }
  for (const [name, property] of Object.entries(s.properties ?? {})) {
    const value = lacking(property);
    if (value !== undefined) return { [name]: value };
  }
  return undefined;
}

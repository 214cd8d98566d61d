import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer, type Response, expectProblem, metric, testDatabase } from '../../test/app.ts';
import { readConfig } from '../config.ts';
import { createServices } from '../services.ts';
import { freePort } from '../store/embedded.ts';
import { createPool } from '../store/pool.ts';
import { buildApp } from './app.ts';
import { createLogger } from './logging.ts';
import { enqueue, Worker, type JobRun } from '../jobs/queue.ts';
import { parseBracketForm } from './plugins/body-parsers.ts';
import { Problem } from '../core/problems.ts';
import { MAX_JSON_DEPTH } from '../core/text.ts';

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

const SHOP_SECTION = 'com.vendor1.sections.user-created.shop';
const TAGS = `/audience/sections/${SHOP_SECTION}/tags`;

/** ERR-20: a success body never carries a top-level integer `status`. */
function expectSuccessBody(res: Response): void {
  expect(res.status).toBeLessThan(300);
  if (res.body && typeof res.body === 'object') expect(Number.isInteger(res.body.status)).toBe(false);
}

describe('problem documents (ERR-01, ERR-02, ERR-03, ERR-04, ERR-09)', () => {
  it('401 without a token is a problem document with AUD-8 (ERR-01..04, ERR-09, AUTH-09)', async () => {
    const res = await server.request('GET', '/audience/sections');
    expectProblem(res, 401, 'AUD-8');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('an unknown route answers 404 with AUD-1, with or without a token (ERR-01..04, ERR-09, ERR-11)', async () => {
    const { token } = await server.login();
    expectProblem(await server.request('GET', '/audience/nothing-here'), 404, 'AUD-1');
    const res = await server.request('GET', '/audience/nothing-here', { token });
    expectProblem(res, 404, 'AUD-1');
    expect(res.body.detail).toContain('/audience/nothing-here');
  });

  it('a known path with another method answers 405 with an Allow header (ERR-01..04, ERR-09)', async () => {
    const res = await server.request('DELETE', '/audience/sections');
    expectProblem(res, 405);
    expect(res.headers.get('allow')).toBe('GET');
    const tags = await server.request('DELETE', TAGS);
    expectProblem(tags, 405);
    expect(tags.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'POST']);
  });

  it('an unsupported Content-Type answers 415 (ERR-01..04, ERR-09)', async () => {
    const { token } = await server.login(SHOP);
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/xml']) {
      const res = await server.request('POST', TAGS, {
        token,
        raw: '{"name":"Typed"}',
        headers: { 'content-type': type },
      });
      expectProblem(res, 415, 'AUD-1005');
      expect(res.body.detail).toContain(type);
    }
    expect((await server.request('GET', TAGS, { token })).body.items.map((t: { name: string }) => t.name)).toEqual([
      'VIP',
    ]);
  });

  it('malformed JSON answers 400 (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, {
      token,
      raw: '{"name": "VIP',
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(res, 400);
    expect(res.body.detail).toMatch(/JSON/);
  });

  it('a wrong field type answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: ['VIP'] } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('a missing required field answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: {} });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
    expect(res.body.detail).toMatch(/required/);
  });

  it('a body field of the wrong type answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: ['New'], colour: 'red' } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('a body over 100 KB answers 413, as JSON or raw (LIM-08, ERR-17, ERR-01..04, ERR-09)', async () => {
    const { token } = await server.login(SHOP);
    const big = await server.request('POST', TAGS, { token, body: { name: 'x'.repeat(101 * 1024) } });
    expectProblem(big, 413);
    const raw = await server.request('POST', TAGS, {
      token,
      raw: ' '.repeat(150 * 1024),
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(raw, 413);
    // Nothing was created.
    const list = await server.request('GET', TAGS, { token });
    expect(list.body.items.map((t: { name: string }) => t.name)).toEqual(['VIP']);
  });

  it('a body just under 100 KB is read and then validated (LIM-08)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: 'x'.repeat(99 * 1024) } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('success bodies carry no integer status (ERR-20)', async () => {
    const { token, clientId, clientSecret } = await server.login(SHOP);
    expectSuccessBody(await server.request('GET', '/audience/sections', { token }));
    expectSuccessBody(await server.request('GET', TAGS, { token }));
    expectSuccessBody(await server.request('POST', TAGS, { token, body: { name: 'Status' } }));
    expectSuccessBody(
      await server.request('POST', '/oauth/token', {
        body: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
      }),
    );
    expectSuccessBody(await server.request('GET', '/healthz'));
    expectSuccessBody(await server.request('GET', '/errors/AUD-8'));
  });
});

describe('body validation (STYLE practice 4)', () => {
  it('does not coerce body values: a tag name sent as the number 12 is refused, not stored as "12" (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: 12 } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
    const list = await server.request('GET', TAGS, { token });
    expect(list.body.items.map((t: { name: string }) => t.name)).not.toContain('12');
  });

  it('ignores unknown top-level fields of a public body, as the platform does: not stored, nothing changed (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const accepted = await server.request('POST', TAGS, {
      token,
      body: { name: 'Extra', extra: true, time_zone: 'Europe/Oslo' },
    });
    expect(accepted.status, accepted.text).toBe(201);
    expect(accepted.body).toEqual({
      discriminator: expect.any(String),
      name: 'Extra',
      id: expect.stringMatching(/^\d+$/),
    });
    const stored = (await server.request('GET', `${TAGS}/${accepted.body.discriminator}`, { token })).body;
    expect(stored).toEqual(accepted.body);
  });

  it('checks the keys of data bodies (merge-patch maps) and of operator bodies, naming the field (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const created = await server.request(
      'POST',
      `/audience/keyspaces/com.vendor1.keyspaces.email/sections/${SHOP_SECTION}/profiles`,
      { token, body: { profile_key: 'datamap@example.com' } },
    );
    expect(created.status).toBe(201);
    const tags = await server.request(
      'PATCH',
      `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/datamap@example.com/sections/${SHOP_SECTION}/tags`,
      { token, body: { 'no.such.tag': true } },
    );
    expectProblem(tags, 400, 'AUD-1218');
    expect(tags.body.detail).toContain('no.such.tag');
    const operator = await server.admin('POST', '/admin/accounts', { name: 'Typo', limit: {} });
    expectProblem(operator, 400);
    expect(operator.body.detail).toContain('"limit"');
  });

  it('coerces query values: include_keyspace_permissions=true is read as a boolean (DEF-06)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('GET', `${TAGS}?include_keyspace_permissions=true`, { token });
    expect(res.status).toBe(200);
    expect(res.body.items[0].keyspace_permissions).toBeTypeOf('object');
    const wrong = await server.request('GET', `${TAGS}?include_keyspace_permissions=perhaps`, { token });
    expectProblem(wrong, 400);
    expect(wrong.body.detail).toContain('include_keyspace_permissions');
  });
});

describe('ERR-19: an unexpected failure', () => {
  it('answers 500 as a problem document with AUD-4 when the program ended its own pool (ERR-19, ERR-01..04)', async () => {
    const broken = await TestServer.start();
    const { token } = await broken.login(SHOP);
    // The pool is ended for real: every query of this server now fails, though the database is
    // there. The change feed still holds its client, so end() settles only once the services are closed below.
    const ended = broken.services.pool.end();
    try {
      // Creating a tag needs a transaction, which no cache can answer.
      const res = await broken.request('POST', TAGS, { token, body: { name: 'Lost' } });
      expectProblem(res, 500, 'AUD-4');
      expect(res.body.detail).not.toMatch(/pool/i);
      expect(res.headers.get('retry-after')).toBeNull();
    } finally {
      await broken.app.close();
      await broken.services.close();
      await ended;
    }
  });
});

/** A TCP proxy in front of PostgreSQL, which the test stops (connections cut, new ones refused) and starts again. */
class DatabaseProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

describe('ERR-19: a database that goes away', () => {
  it('answers 503 AUD-2 with Retry-After while the database does not answer, and serves again once it does (ERR-19, ERR-01..04)', async () => {
    const database = new URL(await testDatabase());
    const proxy = new DatabaseProxy({ host: database.hostname, port: Number(database.port) });
    await proxy.start();
    const through = new URL(database);
    through.host = `127.0.0.1:${proxy.port}`;
    // A server as TestServer starts one, on the same database, but through the proxy.
    const config = readConfig({ LOG_LEVEL: 'silent', DATA_DIR: server.services.config.dataDir });
    const pool = createPool(through.toString(), 4);
    const services = await createServices(config, pool, Date.now, {
      adminToken: 'unused',
      serverSecret: 'test-server-secret',
    });
    const app = await buildApp(services, { logger: createLogger('silent') });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    const call = async (method: string, path: string, body?: unknown): Promise<Response> => {
      const res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : text };
    };
    const { token } = await server.login(SHOP);
    try {
      expect((await call('POST', TAGS, { name: 'Before' })).status).toBe(201);
      await proxy.stop();
      // Cut connections (the pool's and the change feed's), then refused ones: both are the database gone.
      for (const [method, path, body] of [
        ['POST', TAGS, { name: 'Lost' }],
        ['GET', '/readyz'],
        ['GET', `/audience/sections/${SHOP_SECTION}/tags`],
      ] as const) {
        const res = await call(method, path, body);
        expectProblem(res, 503, 'AUD-2');
        expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        expect(res.body.detail).toMatch(/database/);
      }
      await proxy.start();
      expect((await call('POST', TAGS, { name: 'After' })).status).toBe(201);
      expect((await call('GET', '/readyz')).status).toBe(200);
    } finally {
      await app.close();
      await proxy.stop();
      await services.close();
      await pool.end();
    }
  });
});

describe('rate limits (LIM-01)', () => {
  const sections = (token: string) => server.request('GET', '/audience/sections', { token });

  it('the 101st request within one second answers 429 with Retry-After, and the next second passes (LIM-01, ERR-18, ERR-01)', async () => {
    const { token } = await server.login({}, { requests_per_second: 100 });
    const refusals = async () =>
      metric(
        (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text,
        'audience_rate_limit_refusals_total',
        { limit: 'requests_per_second' },
      ) ?? 0;
    const before = await refusals();
    for (let i = 0; i < 100; i++) expect((await sections(token)).status).toBe(200);
    const refused = await sections(token);
    expectProblem(refused, 429, 'AUD-1002');
    // Counted by the name of the limit, for /metrics.
    expect(await refusals()).toBe(before + 1);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body.detail).toMatch(/retry later/);
    server.clock.advance(1000);
    expect((await sections(token)).status).toBe(200);
  });

  it('is shared by all API keys of one account (LIM-01, AUTH-06)', async () => {
    const first = await server.login({}, { requests_per_second: 100 });
    const token2 = await server.token(await server.createKey(first.accountId));
    for (let i = 0; i < 50; i++) expect((await sections(first.token)).status).toBe(200);
    for (let i = 0; i < 50; i++) expect((await sections(token2)).status).toBe(200);
    expectProblem(await sections(token2), 429, 'AUD-1002');
    expectProblem(await sections(first.token), 429, 'AUD-1002');
    // Another account has its own budget.
    const other = await server.login({}, { requests_per_second: 100 });
    expect((await sections(other.token)).status).toBe(200);
  });

  it('a limit lifted with null allows many more (LIM-01, LIM-12)', async () => {
    const { token } = await server.login({}, { requests_per_second: null });
    for (let i = 0; i < 250; i++) expect((await sections(token)).status).toBe(200);
  });

  it('an operator change of the limits takes effect at once (LIM-12)', async () => {
    const { accountId, token } = await server.login();
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 3 } })).status,
    ).toBe(200);
    for (let i = 0; i < 3; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
    const lifted = await server.admin('PATCH', `/admin/accounts/${accountId}`, {
      limits: { requests_per_second: null },
    });
    expect(lifted.status).toBe(200);
    expect(lifted.body.limits.requests_per_second).toBeNull();
    expect((await sections(token)).status).toBe(200);
  });

  it('a raised limit serves at once: 5 per second spent, raised to 100, the next requests pass (LIM-12)', async () => {
    const { accountId, token } = await server.login({}, { requests_per_second: 5, token_requests_per_minute: null });
    for (let i = 0; i < 5; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 100 } })).status,
    ).toBe(200);
    // The test clock stands still: no refill, only the raise.
    for (let i = 0; i < 8; i++) expect((await sections(token)).status).toBe(200);
    // Lowered again, it binds at once.
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 2 } })).status,
    ).toBe(200);
    for (let i = 0; i < 2; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
  });

  it('a patch of the limits changes only the limits it names; an empty one changes none', async () => {
    const { accountId } = await server.login(
      {},
      { requests_per_second: 7, tags_per_section: 9, token_requests_per_minute: null },
    );
    let res = await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { tags_per_section: 4 } });
    expect(res.body.limits).toMatchObject({ requests_per_second: 7, tags_per_section: 4 });
    res = await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: {} });
    expect(res.body.limit_overrides).toEqual({
      requests_per_second: 7,
      tags_per_section: 4,
      token_requests_per_minute: null,
    });
    // A manifest's account.limits are changes too: nothing absent from it is removed.
    expect(
      (
        await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
          account: { limits: { merges_per_profile: 10 } },
        })
      ).status,
    ).toBe(200);
    expect((await server.admin('GET', `/admin/accounts/${accountId}`)).body.limits).toMatchObject({
      requests_per_second: 7,
      tags_per_section: 4,
      merges_per_profile: 10,
    });
  });
});

describe('path handling (COMP-09, COMP-10, COMP-11)', () => {
  const section = 'com.vendor1.sections.user-created.a+b@c.d';
  const tag = 'com.vendor1.tags.x+y@z.json';
  const manifest = { sections: [{ name: 'X', discriminator: section, tags: [{ name: 'T', discriminator: tag }] }] };

  it('percent-encoded and raw segments address the same section and tag (COMP-09)', async () => {
    const { token } = await server.login(manifest);
    const raw = await server.request('GET', `/audience/sections/${section}/tags/${tag}`, { token });
    expect(raw.status).toBe(200);
    expect(raw.body).toMatchObject({ discriminator: tag, name: 'T' });
    const encoded = await server.request(
      'GET',
      `/audience/sections/${encodeURIComponent(section)}/tags/${encodeURIComponent(tag)}`,
      { token },
    );
    expect(encoded.status).toBe(200);
    expect(encoded.body).toEqual(raw.body);
    const list = await server.request('GET', `/audience/sections/com.vendor1.sections.user-created.a%2Bb%40c.d/tags`, {
      token,
    });
    expect(list.status).toBe(200);
    expect(list.body.items.map((t: { discriminator: string }) => t.discriminator)).toEqual([tag]);
  });

  it('a + in a path segment stays + and is never read as a space (COMP-10)', async () => {
    const { token } = await server.login(manifest);
    expect((await server.request('GET', `/audience/sections/${section}/tags`, { token })).status).toBe(200);
    const spaced = await server.request('GET', '/audience/sections/com.vendor1.sections.user-created.a%20b@c.d/tags', {
      token,
    });
    expectProblem(spaced, 404, 'AUD-1102');
    expect(spaced.body.detail).toContain('a b@c.d');
    const tagSpaced = await server.request('GET', `/audience/sections/${section}/tags/com.vendor1.tags.x%20y@z.json`, {
      token,
    });
    expectProblem(tagSpaced, 404, 'AUD-1103');
  });

  it('dots are part of the discriminator, never a format suffix (COMP-11)', async () => {
    const { token } = await server.login(manifest);
    const res = await server.request('GET', `/audience/sections/${section}/tags/${tag}`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.discriminator).toBe(tag);
    // Without its ".json" the tag is another (unknown) identifier.
    expectProblem(
      await server.request('GET', `/audience/sections/${section}/tags/com.vendor1.tags.x+y@z`, { token }),
      404,
      'AUD-1103',
    );
    expectProblem(
      await server.request('GET', `/audience/sections/com.vendor1.sections.user-created.a+b@c/tags`, { token }),
      404,
      'AUD-1102',
    );
  });
});

describe('form bodies (COMP-13, AUTH-02)', () => {
  it('parseBracketForm turns bracket keys into arrays of objects (COMP-13)', () => {
    expect(parseBracketForm('profiles[0][keyspace_discriminator]=a&profiles[1][profile_key]=b')).toEqual({
      profiles: [{ keyspace_discriminator: 'a' }, { profile_key: 'b' }],
    });
    expect(
      parseBracketForm(
        'profiles[0][keyspace_discriminator]=com.vendor1.keyspaces.email&profiles[0][profile_key]=a%2Bb%40c.com&x=1',
      ),
    ).toEqual({
      profiles: [{ keyspace_discriminator: 'com.vendor1.keyspaces.email', profile_key: 'a+b@c.com' }],
      x: '1',
    });
    expect(parseBracketForm('ids[]=a&ids[]=b')).toEqual({ ids: ['a', 'b'] });
    expect(parseBracketForm('a[2]=x')).toEqual({ a: { 2: 'x' } });
  });

  it('parseBracketForm refuses prototype-pollution keys and conflicting fields (COMP-13)', () => {
    for (const body of [
      '__proto__[polluted]=1',
      'a[__proto__][polluted]=1',
      'constructor[prototype][polluted]=1',
      'a[0][prototype]=1',
    ]) {
      expect(() => parseBracketForm(body), body).toThrow(Problem);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(() => parseBracketForm('a=1&a[b]=2')).toThrow(Problem);
    expect(() => parseBracketForm('a]b=1')).toThrow(Problem);
  });

  it('POST /oauth/token accepts a form body (AUTH-02, COMP-13)', async () => {
    const { clientId, clientSecret } = await server.createAccount();
    const raw = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    }).toString();
    const res = await server.request('POST', '/oauth/token', {
      raw,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
    });
    expect((await server.request('GET', '/audience/sections', { token: res.body.access_token })).status).toBe(200);
  });

  it('POST /oauth/token refuses a form body with a prototype key as a 400 problem (COMP-13)', async () => {
    const res = await server.request('POST', '/oauth/token', {
      raw: '__proto__[x]=1&grant_type=client_credentials',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expectProblem(res, 400);
  });
});

describe('operations', () => {
  it('GET /healthz and /readyz answer 200 without a token', async () => {
    const health = await server.request('GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ state: 'up' });
    const ready = await server.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ state: 'ready' });
  });

  it('GET /metrics needs its token: METRICS_TOKEN when set, else the operator token; without it 401', async () => {
    expectProblem(await server.request('GET', '/metrics'), 401, 'AUD-8');
    expectProblem(await server.request('GET', '/metrics', { token: (await server.login()).token }), 401, 'AUD-8');
    expect((await server.request('GET', '/metrics', { token: server.services.adminToken })).status).toBe(200);
    const own = await TestServer.start({ METRICS_TOKEN: 'scraper-token' });
    try {
      expect((await own.request('GET', '/metrics', { token: 'scraper-token' })).status).toBe(200);
      expectProblem(await own.request('GET', '/metrics', { token: own.services.adminToken }), 401, 'AUD-8');
    } finally {
      await own.close();
    }
  });

  it('GET /metrics answers Prometheus text with http_request_duration_seconds', async () => {
    await server.request('GET', '/healthz');
    const res = await server.request('GET', '/metrics', { token: server.services.metricsToken });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toContain('# TYPE http_request_duration_seconds histogram');
    expect(res.text).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/healthz"[^}]*\} \d+/);
  });

  it('GET /metrics shows the use of the database pool', async () => {
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'total' })).toBeGreaterThan(0);
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'waiting' })).toBe(0);
  });

  it('GET /metrics and GET /admin/jobs show waiting jobs by kind, with how long the one due longest ago has waited, read from the database', async () => {
    const { accountId } = await server.createAccount();
    const kind = `waits-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    await enqueue(server.services.pool, accountId, kind, { n: 2 });
    await server.services.pool.query(
      `update jobs set created_at = now() - interval '90 seconds', run_at = now() - interval '90 seconds' where kind = $1 and payload->>'n' = '1'`,
      [kind],
    );
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_jobs', { kind, state: 'waiting' })).toBe(2);
    expect(metric(text, 'audience_jobs', { kind, state: 'failed' })).toBe(0);
    expect(metric(text, 'audience_jobs_oldest_waiting_seconds', { kind })).toBeGreaterThanOrEqual(90);
    const listed = await server.admin('GET', `/admin/jobs?state=waiting&kind=${kind}`);
    expect(listed.status, listed.text).toBe(200);
    expect(
      listed.body.items.map((j: { payload: unknown; state: string; attempts: number }) => [
        j.payload,
        j.state,
        j.attempts,
      ]),
    ).toEqual([
      [{ n: 1 }, 'waiting', 0],
      [{ n: 2 }, 'waiting', 0],
    ]);
  });

  it('a job that fails its last attempt is kept as failed: GET /admin/jobs?state=failed lists it, /metrics counts it and its runs, each run is reported for the log', async () => {
    const { accountId } = await server.createAccount();
    const kind = `always-fails-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    const runs: JobRun[] = [];
    const worker = new Worker(
      server.services.pool,
      { [kind]: async () => Promise.reject(new Error('the mail server said no')) },
      () => {},
      server.services.metrics,
      {},
      (run) => runs.push(run),
    );
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect(await worker.runOne()).toBe(true);
      // The wait before the next attempt, skipped.
      await server.services.pool.query('update jobs set run_at = now() where kind = $1', [kind]);
    }
    // No sixth attempt.
    expect(await worker.runOne()).toBe(false);
    // What the worker thread logs: each run's start, then its failure, the last one for good.
    expect(runs.map((r) => `${r.attempt} ${r.outcome}`)).toEqual([
      ...[1, 2, 3, 4].flatMap((n) => [`${n} started`, `${n} failed`]),
      '5 started',
      '5 failed for good',
    ]);
    expect(runs.at(-1)).toMatchObject({ kind, account: accountId, seconds: expect.any(Number) });
    const failed = await server.admin('GET', '/admin/jobs?state=failed');
    expect(failed.status, failed.text).toBe(200);
    expect(failed.body.items.filter((j: { kind: string }) => j.kind === kind)).toEqual([
      {
        account_id: accountId,
        job_id: expect.stringMatching(/^\d+$/),
        kind,
        state: 'failed',
        payload: { n: 1 },
        attempts: 5,
        last_error: 'the mail server said no',
        created_at: expect.any(String),
        run_at: expect.any(String),
        failed_at: expect.any(String),
      },
    ]);
    expect((await server.admin('GET', `/admin/jobs?state=waiting&kind=${kind}`)).body.items).toEqual([]);
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_jobs', { kind, state: 'failed' })).toBe(1);
    expect(metric(text, 'audience_jobs', { kind, state: 'waiting' })).toBe(0);
    expect(metric(text, 'audience_job_duration_seconds_count', { kind, outcome: 'failed' })).toBe(5);
    expectProblem(await server.admin('GET', '/admin/jobs?state=lost'), 400);
  });

  it('GET /openapi.json is an OpenAPI 3 document listing /audience/sections', async () => {
    const res = await server.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
    expect(res.body.paths['/audience/sections']).toHaveProperty('get');
    expect(res.body.paths['/audience/sections/{section_discriminator}/tags']).toHaveProperty('post');
  });

  it('GET /openapi.json lints clean (the recommended rules of redocly lint): servers from PUBLIC_URL, unique operationIds, a licence', async () => {
    const published = await TestServer.start({ PUBLIC_URL: 'https://cdp.shop.test/' });
    try {
      const res = await published.request('GET', '/openapi.json');
      const config = await createConfig({ extends: ['recommended'] });
      const problems = await lintFromString({ source: res.text, absoluteRef: '/openapi.json', config });
      expect(problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
      expect(res.body.servers).toEqual([{ url: 'https://cdp.shop.test', description: expect.any(String) }]);
      expect(res.body.info.license.name).toBe('Apache-2.0');
      const operations = Object.values(
        res.body.paths as Record<string, Record<string, { operationId: string }>>,
      ).flatMap((path) => Object.values(path));
      expect(operations.length).toBeGreaterThan(50);
      expect(new Set(operations.map((o) => o.operationId)).size).toBe(operations.length);
      expect(res.body.paths['/audience/segments/{segment_discriminator}'].get.operationId).toBe(
        'getAudienceSegmentsBySegmentDiscriminator',
      );
    } finally {
      await published.close();
    }
  });

  it('GET /openapi.json declares every error of every operation as application/problem+json, as errors are sent', async () => {
    const { paths } = (await server.request('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, unknown> }> }>>;
    };
    for (const [path, methods] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const status of ['4XX', '5XX'])
          expect(Object.keys(operation.responses[status]?.content ?? {}), `${method} ${path} ${status}`).toEqual([
            'application/problem+json',
          ]);
      }
    }
    const sent = await server.request('GET', '/audience/sections');
    expectProblem(sent, 401);
  });

  it('GET /docs answers 200 HTML without a token', async () => {
    const res = await server.request('GET', '/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html/i);
  });

  it('GET /errors/AUD-8 describes the code (ERR-04)', async () => {
    const res = await server.request('GET', '/errors/AUD-8');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      type: '/errors/AUD-8',
      code: 'AUD-8',
      title: 'Authorization failure',
      http_status: 401,
    });
    expectProblem(await server.request('GET', '/errors/AUD-99999'), 404, 'AUD-1');
  });
});

describe('request logs', () => {
  it('leave out profile keys, addresses, tokens and client secrets, and name the route', async () => {
    const lines: string[] = [];
    const logged = await TestServer.start({ LOG_LEVEL: 'info' }, { log: { write: (line) => void lines.push(line) } });
    try {
      const { accountId, clientId, clientSecret, token } = await logged.login(SHOP);
      const email = 'com.vendor1.keyspaces.email';
      await logged.request(
        'GET',
        `/audience/keyspaces/${email}/profiles/ann.logged@example.com/sections/${SHOP_SECTION}/attributes`,
        { token },
      );
      await logged.request(
        'GET',
        `/v2/audience/keyspaces/com.vendor1.keyspaces.mobile/profiles/+4791234567/sections/${SHOP_SECTION}/consents?suppression_channel_discriminator=com.vendor1.channels.email&suppression_address=bo.logged%40example.com`,
        { token },
      );
      await logged.request(
        'GET',
        '/audience/channels/com.vendor1.channels.email/addresses/cy.logged@example.com/suppressions',
        { token },
      );
      await logged.request(
        'POST',
        `/oauth/token?grant_type=client_credentials&client_id=${clientId}&client_secret=${clientSecret}`,
      );
      await logged.admin(
        'DELETE',
        `/admin/accounts/${accountId}/suppressions/com.vendor1.channels.email/dee.logged@example.com`,
      );
      const urls = lines
        .map((line) => JSON.parse(line))
        .filter((l) => l.msg === 'incoming request')
        .map((l) => `${l.req.url} ${l.req.route ?? '(no route)'}`);
      expect(urls).toEqual(
        expect.arrayContaining([
          `/audience/keyspaces/${email}/profiles/[redacted]/sections/${SHOP_SECTION}/attributes /audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/attributes`,
          `/v2/audience/keyspaces/com.vendor1.keyspaces.mobile/profiles/[redacted]/sections/${SHOP_SECTION}/consents?suppression_channel_discriminator=[redacted]&suppression_address=[redacted] /v2/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/consents`,
          '/audience/channels/com.vendor1.channels.email/addresses/[redacted]/suppressions (no route)',
          // The token route declares no query parameters: none is kept.
          '/oauth/token /oauth/token',
          `/admin/accounts/${accountId}/suppressions/com.vendor1.channels.email/[redacted] /admin/accounts/:account_id/suppressions/:channel_discriminator/:address`,
        ]),
      );
      const all = lines.join('');
      for (const secret of [
        'logged@example.com',
        'logged%40example.com',
        '4791234567',
        clientSecret,
        token,
        logged.services.adminToken,
      ])
        expect(all).not.toContain(secret);
    } finally {
      await logged.close();
    }
  });
});

describe('operator API', () => {
  it('refuses requests without the admin token with a 401 problem (AUTH-09)', async () => {
    expectProblem(await server.request('GET', '/admin/accounts'), 401, 'AUD-8');
    expectProblem(await server.request('POST', '/admin/accounts', { body: { name: 'intruder' } }), 401, 'AUD-8');
    expectProblem(await server.request('GET', '/admin/accounts', { token: 'not-the-admin-token' }), 401, 'AUD-8');
  });

  it('refuses a public API token (AUTH-09)', async () => {
    const { accountId, token } = await server.login();
    expectProblem(await server.request('GET', '/admin/accounts', { token }), 401, 'AUD-8');
    expectProblem(
      await server.request('PATCH', `/admin/accounts/${accountId}`, {
        token,
        body: { limits: { requests_per_second: null } },
      }),
      401,
      'AUD-8',
    );
  });
});

describe('tenant isolation (AUTH-17)', () => {
  it("an account's token reads nothing of another account", async () => {
    const alpha = { sections: [{ name: 'Alpha', tags: [{ name: 'A tag' }] }] };
    const beta = { sections: [{ name: 'Beta', tags: [{ name: 'B tag' }] }] };
    const a = await server.login(alpha);
    const b = await server.login(beta);
    const seenByA = await server.request('GET', '/audience/sections', { token: a.token });
    expect(seenByA.body.items.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      'com.vendor1.sections.user-created.alpha',
    ]);
    const betaTags = '/audience/sections/com.vendor1.sections.user-created.beta/tags';
    expect((await server.request('GET', betaTags, { token: b.token })).status).toBe(200);
    expectProblem(await server.request('GET', betaTags, { token: a.token }), 404, 'AUD-1102');
    expectProblem(
      await server.request('POST', betaTags, { token: a.token, body: { name: 'Sneaky' } }),
      404,
      'AUD-1102',
    );
    const bList = await server.request('GET', betaTags, { token: b.token });
    expect(bList.body.items.map((t: { name: string }) => t.name)).toEqual(['B tag']);
  });
});

// ---- RedisBuckets: several API processes share one budget per account ----

const redisBinary = spawnSync('which', ['redis-server']).status === 0;

/** Starts redis-server and resolves once it accepts connections. */
function startRedis(port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) resolve(child);
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
  });
}

describe.skipIf(!redisBinary)('RedisBuckets (LIM-01 across processes)', () => {
  let redis: ChildProcess | undefined;
  let url = '';
  beforeAll(async () => {
    const port = await freePort();
    redis = await startRedis(port);
    url = `redis://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    if (!redis || redis.exitCode !== null) return;
    const exited = new Promise((resolve) => redis!.once('exit', resolve));
    redis.kill();
    await exited;
  });

  it('a raised or lowered limit takes effect at once in the shared buckets too (LIM-12)', async () => {
    const shared = await TestServer.start({ REDIS_URL: url });
    try {
      const { accountId, token } = await shared.login({}, { requests_per_second: 5, token_requests_per_minute: null });
      for (let i = 0; i < 5; i++)
        expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expectProblem(await shared.request('GET', '/audience/sections', { token }), 429, 'AUD-1002');
      expect(
        (await shared.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 100 } })).status,
      ).toBe(200);
      for (let i = 0; i < 8; i++)
        expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expect(
        (await shared.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 1 } })).status,
      ).toBe(200);
      expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expectProblem(await shared.request('GET', '/audience/sections', { token }), 429, 'AUD-1002');
    } finally {
      await shared.close();
    }
  });

  it('two servers with one REDIS_URL share one budget per account (LIM-01)', async () => {
    const first = await TestServer.start({ REDIS_URL: url });
    const second = await TestServer.start({ REDIS_URL: url });
    try {
      // Both processes read the same instant, as machines with synchronised clocks do.
      second.clock.now = first.clock.now;
      const { token } = await first.login({}, { requests_per_second: 5 });
      const other = await first.login({}, { requests_per_second: 5 });
      for (let i = 0; i < 5; i++)
        expect((await first.request('GET', '/audience/sections', { token })).status).toBe(200);
      const refused = await second.request('GET', '/audience/sections', { token });
      expectProblem(refused, 429, 'AUD-1002');
      expect(refused.headers.get('retry-after')).toBe('1');
      // Another account's budget is untouched.
      expect((await second.request('GET', '/audience/sections', { token: other.token })).status).toBe(200);
      first.clock.advance(1000);
      second.clock.advance(1000);
      expect((await second.request('GET', '/audience/sections', { token })).status).toBe(200);
      // A request refused for its input gives back its route limit, in the shared bucket too.
      const imports = '/v2/audience/sections/com.vendor1.sections.user-created.shop/imports';
      const exporter = await first.login(SHOP, { requests_per_second: null, import_requests_per_minute: 1 });
      expectProblem(await first.request('POST', imports, { token: exporter.token, body: {} }), 400);
      const attributes = await first.request(
        'GET',
        '/audience/sections/com.vendor1.sections.user-created.shop/attributes',
        {
          token: exporter.token,
        },
      );
      const firstname = attributes.body.items.find(
        (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
      ).versions[0].id;
      const good = {
        keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'e' },
        attribute_mappings: [{ field_selector: 'f', attribute_version_id: firstname }],
      };
      const accepted = await second.request('POST', imports, { token: exporter.token, body: good });
      expect(accepted.status, accepted.text).toBe(201);
      expectProblem(await first.request('POST', imports, { token: exporter.token, body: good }), 429, 'AUD-1002');
    } finally {
      await first.close();
      await second.close();
    }
  });
});

/** Sends raw bytes to the server and reads the whole answer: for requests fetch would refuse to send. */
function rawRequest(bytes: Buffer | string): Promise<{ status: number; type: string; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(server.url);
    const socket = net.connect(Number(url.port), url.hostname, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
      resolve({
        status: Number(head.split(' ')[1]),
        type: /content-type: ([^\r\n]+)/i.exec(head)?.[1] ?? '',
        body: body ? JSON.parse(body) : undefined,
      });
    });
  });
}

describe('bad bytes and malformed requests: 4xx problem documents, never a 5xx', () => {
  it('refuses NUL in any text with 400 naming the field, and stores nothing: bodies, data map keys, paths, credentials, operator bodies', async () => {
    const { token } = await server.login(SHOP);
    const tag = await server.request('POST', TAGS, { token, body: { name: 'bad\u0000tag' } });
    expect(expectProblem(tag, 400, 'AUD-1012')).toContain('"name"');
    expect(
      (await server.request('GET', TAGS, { token })).body.items.map((t: { name: string }) => t.name),
    ).not.toContain('bad\u0000tag');
    const profiles = `/audience/keyspaces/com.vendor1.keyspaces.email/sections/${SHOP_SECTION}/profiles`;
    expect(
      expectProblem(
        await server.request('POST', profiles, { token, body: { profile_key: 'a\u0000@example.com' } }),
        400,
        'AUD-1012',
      ),
    ).toContain('"profile_key"');
    expect((await server.request('POST', profiles, { token, body: { profile_key: 'nul@example.com' } })).status).toBe(
      201,
    );
    const path = `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/nul@example.com/sections/${SHOP_SECTION}`;
    expect(
      expectProblem(
        await server.request('PATCH', `${path}/tags`, {
          token,
          body: { 'com.vendor1.tags.user-created.vip\u0000': true },
        }),
        400,
        'AUD-1012',
      ),
    ).toContain('vip');
    expectProblem(
      await server.request(
        'GET',
        `/audience/keyspaces/com.vendor1.keyspaces.web/profiles/x%00y/sections/${SHOP_SECTION}/attributes`,
        { token },
      ),
      400,
      'AUD-1012',
    );
    expect(
      expectProblem(
        await server.request('POST', '/audience/profiles/reports/segments/count?x=%00', { token, body: {} }),
        400,
        'AUD-1012',
      ),
    ).toContain('"x"');
    // Unauthenticated, as JSON and as a form.
    expectProblem(
      await server.request('POST', '/oauth/token', {
        body: { grant_type: 'client_credentials', client_id: 'a\u0000b', client_secret: 'x' },
      }),
      400,
      'AUD-1012',
    );
    expectProblem(
      await server.request('POST', '/oauth/token', {
        raw: 'grant_type=client_credentials&client_id=a%00b&client_secret=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      400,
      'AUD-1012',
    );
    expectProblem(await server.admin('POST', '/admin/accounts', { name: 'Nul\u0000' }), 400, 'AUD-1012');
  });

  it('refuses a lone UTF-16 surrogate in any text with 400 AUD-1013 naming the field, and stores nothing', async () => {
    const { token, accountId } = await server.login(SHOP);
    const lone = 'Ann\ud800';
    const email = 'com.vendor1.keyspaces.email';
    const profile = `/audience/keyspaces/${email}/profiles/lone@example.com/sections/${SHOP_SECTION}`;
    const attributes = (await server.request('GET', `/audience/sections/${SHOP_SECTION}/attributes`, { token })).body
      .items;
    const firstname = attributes.find(
      (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
    ).versions[0].id;
    const refused: [string, string, unknown, string][] = [
      ['POST', `/audience/keyspaces/${email}/sections/${SHOP_SECTION}/profiles`, { profile_key: lone }, 'profile_key'],
      ['PATCH', `${profile}/attributes`, { [firstname]: lone }, firstname],
      [
        'PATCH',
        `/v2${profile}/attributes`,
        { 'com.vendor1.attributes.firstname': lone },
        'com.vendor1.attributes.firstname',
      ],
      [
        'POST',
        `${profile}/events`,
        { items: [{ type: 'com.vendor1.events.page-view', version: 1, data: { title: lone } }] },
        'items[0].data.title',
      ],
      [
        'POST',
        `/v2/audience/sections/${SHOP_SECTION}/imports`,
        { keyspace_mapping: { keyspace_discriminator: email, field_selector: lone } },
        'keyspace_mapping.field_selector',
      ],
      [
        'POST',
        `/emails/sections/${SHOP_SECTION}/activities/transactional/tx-1/transactions`,
        {
          keyspace_discriminator: email,
          profile_key: 'lone@example.com',
          to_name: 'Ann',
          to_email_address: 'lone@example.com',
          variables: { [lone]: 1 },
        },
        `variables.${lone}`,
      ],
      ['POST', '/oauth/token', { grant_type: 'client_credentials', client_id: lone, client_secret: 'x' }, 'client_id'],
    ];
    for (const [method, path, body, field] of refused) {
      const res = await server.request(method, path, { token, body });
      expect(expectProblem(res, 400, 'AUD-1013'), `${method} ${path}`).toContain(`"${field}"`);
    }
    const activity = await server.admin('PUT', `/admin/accounts/${accountId}/activities/lone`, {
      kind: 'website',
      section_discriminator: SHOP_SECTION,
      name: lone,
    });
    expect(expectProblem(activity, 400, 'AUD-1013')).toContain('"name"');
    // Nothing was stored: the profile was never created, the activity does not exist.
    expectProblem(await server.request('GET', `${profile}/attributes`, { token }), 404);
    expectProblem(await server.admin('GET', `/admin/accounts/${accountId}/activities/lone`), 404);
    // A surrogate pair (an emoji) is a character like any other.
    expect(
      (await server.request('PATCH', `${profile}/attributes`, { token, body: { [firstname]: 'Ann \ud83d\ude00' } }))
        .status,
    ).toBe(204);
  });

  it(`refuses a body nested deeper than ${MAX_JSON_DEPTH} levels with 400 AUD-1014, unauthenticated too, JSON and forms`, async () => {
    const { token } = await server.login(SHOP);
    const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    const attributes = `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/deep@example.com/sections/${SHOP_SECTION}/attributes`;
    for (const levels of [MAX_JSON_DEPTH + 1, 10_000]) {
      const body = `{"grant_type":"client_credentials","client_id":"x","client_secret":${deep(levels)}}`;
      expectProblem(
        await server.request('POST', '/oauth/token', { raw: body, headers: { 'content-type': 'application/json' } }),
        400,
        'AUD-1014',
      );
      const patch = `{"com.vendor1.attributes.firstname":${deep(levels)}}`;
      expect(
        expectProblem(
          await server.request('PATCH', attributes, {
            token,
            raw: patch,
            headers: { 'content-type': 'application/merge-patch+json' },
          }),
          400,
          'AUD-1014',
        ),
      ).toContain('"com.vendor1.attributes.firstname');
      expectProblem(
        await server.request('POST', '/oauth/token', {
          raw: `grant_type=client_credentials&client_id=x&client_secret${'[a]'.repeat(levels)}=x`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
        400,
        'AUD-1014',
      );
    }
    // At the limit a body is read as usual: refused here by what it says (no such attribute), not by its depth.
    const atLimit = `{"com.vendor1.attributes.firstname":${deep(MAX_JSON_DEPTH - 1)}}`;
    expectProblem(
      await server.request('PATCH', attributes, {
        token,
        raw: atLimit,
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      400,
      'AUD-1206',
    );
  });

  it('refuses an account id that cannot be one with 400, not a 500 from the database', async () => {
    const res = await server.admin('DELETE', '/admin/accounts/99999999999999999999999/keys/x');
    expect(expectProblem(res, 400)).toContain('account_id');
  });

  it('answers a truncated multipart upload, unauthenticated, with 400 AUD-1810', async () => {
    const { token } = await server.login(SHOP);
    const attributes = (await server.request('GET', `/audience/sections/${SHOP_SECTION}/attributes`, { token })).body
      .items;
    const first = attributes.find(
      (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
    ).versions[0].id;
    const created = await server.request('POST', `/v2/audience/sections/${SHOP_SECTION}/imports`, {
      token,
      body: {
        keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'first', attribute_version_id: first }],
      },
    });
    expect(created.status, created.text).toBe(201);
    // The signed fields, whole; the file part breaks off with no closing boundary.
    const boundary = 'XyZ';
    const fields = Object.entries(created.body.file_upload_body as Record<string, string>)
      .map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
      .join('');
    const truncated = `${fields}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.csv"\r\ncontent-type: text/csv\r\n\r\nemail;first\r\na@b.c`;
    const res = await server.request('POST', '/files/uploads', {
      raw: truncated,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.type).toBe('/errors/AUD-1810');
  });

  it('answers errors met before the routes as problem documents: a URL over 16 KB (431), bad percent-encoding and raw non-ASCII in a path (400)', async () => {
    const long = await rawRequest(`GET /audience/sections?x=${'a'.repeat(20_000)} HTTP/1.1\r\nhost: localhost\r\n\r\n`);
    expect(long).toMatchObject({
      status: 431,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 431, type: '/errors/AUD-1010', title: expect.any(String), detail: expect.any(String) },
    });
    const badEscape = await server.request('GET', '/audience/sections/%E0%A4%A/attributes');
    expectProblem(badEscape, 400, 'AUD-0');
    const nonAscii = await rawRequest(
      Buffer.concat([
        Buffer.from('GET /audience/sections/'),
        Buffer.from('ünï', 'utf8'),
        Buffer.from('/attributes HTTP/1.1\r\nhost: localhost\r\n\r\n'),
      ]),
    );
    expect(nonAscii).toMatchObject({
      status: 400,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 400, detail: expect.any(String) },
    });
  });
});

import crypto from 'node:crypto';
import pg from 'pg';
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  TestServer,
  testDatabase,
  type Credentials,
  type Response,
  expectProblem as expectSpecProblem,
} from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { SIGNING_KEY_SEALING } from './api-keys.ts';
import { sealingKey, unseal } from './sealing.ts';

let server: TestServer;
let db: pg.Client;

beforeAll(async () => {
  server = await TestServer.start();
  db = new pg.Client({ connectionString: await testDatabase() });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await server?.close();
});

const TWO_SECTIONS: Manifest = { sections: [{ name: 'Alpha' }, { name: 'Beta' }] };

// ---- helpers ----

/** Checks a problem document (ERR-01, ERR-02, ERR-03) and returns its detail. */
function expectProblem(res: Response, status: number, code?: string): string {
  const detail = expectSpecProblem(res, status, code);
  expect(res.body.access_token).toBeUndefined();
  return detail;
}

/** A 401 of SPEC §5.7: AUD-8 with the RFC 6750 challenge; returns the detail. */
function expect401(res: Response): string {
  const detail = expectProblem(res, 401, 'AUD-8');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  return detail;
}

function grant(c: { clientId: string; clientSecret: string }) {
  return { grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret };
}

function tokenJson(body: unknown, s: TestServer = server): Promise<Response> {
  return s.request('POST', '/oauth/token', { body });
}

function tokenForm(fields: Record<string, string>, s: TestServer = server): Promise<Response> {
  return s.request('POST', '/oauth/token', {
    raw: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** GET /audience/sections with a raw Authorization header (or none). */
function withAuthorization(authorization: string | undefined, s: TestServer = server): Promise<Response> {
  return s.request('GET', '/audience/sections', { headers: authorization === undefined ? {} : { authorization } });
}

function sections(token: string, s: TestServer = server): Promise<Response> {
  return s.request('GET', '/audience/sections', { token });
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The servers' SERVER_SECRET in tests (test/app.ts), which seals the signing keys. */
const SEALING = sealingKey('test-server-secret', SIGNING_KEY_SEALING);

/** The current signing key of the service, read from its database and opened (tests only: to forge claims). */
async function serverSigningKey(): Promise<{ kid: string; key: jose.CryptoKey }> {
  const { rows } = await db.query<{ kid: string; private_key_sealed: Buffer }>(
    'select kid, private_key_sealed from signing_keys where retired_at is null',
  );
  expect(rows).toHaveLength(1);
  return {
    kid: rows[0].kid,
    key: (await jose.importJWK(JSON.parse(unseal(SEALING, rows[0].private_key_sealed)), 'ES256')) as jose.CryptoKey,
  };
}

/** Signs `claims` as an ES256 JWT; by default with the service's own key and kid. */
async function sign(
  claims: Record<string, unknown>,
  options: { kid?: string | null; key?: jose.CryptoKey } = {},
): Promise<string> {
  const own = options.key ? undefined : await serverSigningKey();
  const kid = options.kid === undefined ? own!.kid : options.kid;
  const header: jose.JWTHeaderParameters = { alg: 'ES256', typ: 'JWT', ...(kid === null ? {} : { kid }) };
  return new jose.SignJWT(claims as jose.JWTPayload).setProtectedHeader(header).sign(options.key ?? own!.key);
}

/** The claims of a real token of `creds`, as a template for forged ones. */
async function realClaims(creds: Credentials): Promise<jose.JWTPayload> {
  return jose.decodeJwt(await server.token(creds));
}

function without(claims: jose.JWTPayload, name: string): jose.JWTPayload {
  const copy = { ...claims };
  delete copy[name];
  return copy;
}

const nowSeconds = () => Math.floor(server.clock.now / 1000);

// ---- POST /oauth/token ----

describe('POST /oauth/token', () => {
  it('answers every refusal with Cache-Control: no-store too: a body refused by its schema, its parsing, its type or the rate limit', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: 1 } });
    const refusals = [
      await tokenJson({ grant_type: 'password', client_id: creds.clientId, client_secret: 'x' }),
      await tokenJson({ grant_type: 'client_credentials' }),
      await server.request('POST', '/oauth/token', {
        raw: '{"grant_type":',
        headers: { 'content-type': 'application/json' },
      }),
      await server.request('POST', '/oauth/token', { raw: 'x', headers: { 'content-type': 'text/xml' } }),
      await tokenJson(grant(creds)),
      await tokenJson(grant(creds)),
    ];
    expect(refusals.map((r) => r.status)).toEqual([400, 400, 400, 415, 200, 429]);
    for (const res of refusals) {
      expect(res.headers.get('cache-control'), res.text).toBe('no-store');
      expect(res.headers.get('pragma')).toBe('no-cache');
    }
  });

  it('AUTH-01 AUTH-03 VER-05 a JSON client_credentials request without Authorization gets a Bearer token with integer expires_in', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const res = await tokenJson(grant(creds));
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      access_token: expect.any(String),
      expires_in: expect.any(Number),
      token_type: 'Bearer',
    });
    expect(Number.isInteger(res.body.expires_in)).toBe(true);
    expect(res.body.expires_in).toBeGreaterThan(0);
    // A JSON number, not a string holding one (VER-05: the deprecated field is still there).
    expect(res.text).toMatch(/"expires_in":\d+[,}]/);
    expect(res.body.status).toBeUndefined();
    expect(res.body.access_token.split('.')).toHaveLength(3);
    // RFC 6749 §5.1: no cache keeps it, and neither an answer refusing credentials.
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect((await tokenJson({ ...grant(creds), client_secret: 'wrong' })).headers.get('cache-control')).toBe(
      'no-store',
    );
    // The token works.
    expect((await sections(res.body.access_token)).status).toBe(200);
  });

  it('AUTH-02 the same fields as application/x-www-form-urlencoded give the same result', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const res = await tokenForm(grant(creds));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      access_token: expect.any(String),
      expires_in: expect.any(Number),
      token_type: 'Bearer',
    });
    expect(Number.isInteger(res.body.expires_in)).toBe(true);
    const json = await tokenJson(grant(creds));
    expect(json.body.expires_in).toBe(res.body.expires_in);
    expect(jose.decodeJwt(res.body.access_token).account).toBe(creds.accountId);
    expect((await sections(res.body.access_token)).status).toBe(200);
  });

  it('AUTH-03 the token endpoint ignores an Authorization header it does not need', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const res = await server.request('POST', '/oauth/token', {
      body: grant(creds),
      headers: { authorization: 'Bearer not-a-token' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.token_type).toBe('Bearer');
  });

  it('AUTH-04 a missing field or another grant_type answers 400 and no token', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const full = grant(creds);
    const cases: Array<Promise<Response>> = [
      tokenJson({}),
      tokenJson(without(full, 'grant_type')),
      tokenJson(without(full, 'client_id')),
      tokenJson(without(full, 'client_secret')),
      tokenJson({ ...full, grant_type: 'password' }),
      tokenJson({ ...full, grant_type: 'authorization_code' }),
      tokenJson({ ...full, client_secret: '' }),
      tokenJson({ ...full, client_id: 42 }),
      tokenForm({ client_id: creds.clientId, client_secret: creds.clientSecret }),
      tokenForm({ ...full, grant_type: 'password' }),
      server.request('POST', '/oauth/token', {
        raw: '{"grant_type":',
        headers: { 'content-type': 'application/json' },
      }),
      server.request('POST', '/oauth/token', { raw: '', headers: { 'content-type': 'application/json' } }),
    ];
    for (const res of await Promise.all(cases)) expectProblem(res, 400);
    // The field at fault is named.
    expect(expectProblem(await tokenJson(without(full, 'client_secret')), 400)).toMatch(/client_secret/);
    expect(expectProblem(await tokenJson({ ...full, grant_type: 'password' }), 400)).toMatch(/grant_type/);
    expect(
      expectProblem(await tokenForm({ grant_type: 'client_credentials', client_secret: creds.clientSecret }), 400),
    ).toMatch(/client_id/);
  });

  it('AUTH-05 unknown credentials, a wrong secret or a deleted key obtain no token (401)', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const unknown = expectProblem(
      await tokenJson(grant({ clientId: crypto.randomUUID(), clientSecret: creds.clientSecret })),
      401,
      'AUD-1009',
    );
    const wrong = expectProblem(
      await tokenJson(grant({ clientId: creds.clientId, clientSecret: `${creds.clientSecret}x` })),
      401,
      'AUD-1009',
    );
    expectProblem(await tokenForm(grant({ clientId: creds.clientId, clientSecret: 'guess' })), 401, 'AUD-1009');
    // Another key's secret does not open this key.
    const other = await server.createKey(creds.accountId);
    expectProblem(
      await tokenJson(grant({ clientId: creds.clientId, clientSecret: other.clientSecret })),
      401,
      'AUD-1009',
    );
    expect(unknown).toMatch(/client_id|client_secret/);
    // Unknown client and wrong secret are not told apart.
    expect(wrong).toBe(unknown);

    expect((await tokenJson(grant(creds))).status).toBe(200);
    expect((await server.admin('DELETE', `/admin/accounts/${creds.accountId}/keys/${creds.clientId}`)).status).toBe(
      204,
    );
    expectProblem(await tokenJson(grant(creds)), 401, 'AUD-1009');
  });

  it('AUTH-07 the token is an ES256 JWT with a kid; exp is at most 24 h after issue and expires_in = exp - iat', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const issuedAt = nowSeconds();
    const res = await tokenJson(grant(creds));
    expect(res.status).toBe(200);
    const header = jose.decodeProtectedHeader(res.body.access_token);
    expect(header.alg).toBe('ES256');
    expect(header.kid).toEqual(expect.any(String));
    const payload = jose.decodeJwt(res.body.access_token);
    expect(payload.iat).toBe(issuedAt);
    expect(Number.isInteger(payload.exp)).toBe(true);
    expect(payload.exp! - payload.iat!).toBe(res.body.expires_in);
    expect(payload.exp! - issuedAt).toBeGreaterThan(0);
    expect(payload.exp! - issuedAt).toBeLessThanOrEqual(24 * 3600);
    expect(payload.account).toBe(creds.accountId);
    expect(payload.aud).toBeDefined();

    // Any client can verify it with the published key set.
    const jwks = await server.request('GET', '/.well-known/jwks.json');
    const verified = await jose.jwtVerify(res.body.access_token, jose.createLocalJWKSet(jwks.body), {
      algorithms: ['ES256'],
      currentDate: new Date(server.clock.now),
    });
    expect(verified.payload.account).toBe(creds.accountId);
    expect(verified.protectedHeader.kid).toBe(header.kid);
  });
});

// ---- Bearer authentication ----

describe('Token lifetime', () => {
  // The PrestaShop and Drupal clients refresh once now + expires_in - 3600 has passed: with a
  // one-hour token they asked on every call and ran into the token limit.
  it('AUTH-07 tokens live 24 hours by default, with exp to match, and serve for the 23 hours such clients keep them', async () => {
    const own = await TestServer.start();
    try {
      const creds = await own.createAccount();
      const res = await tokenJson(grant(creds), own);
      expect(res.status).toBe(200);
      expect(res.body.expires_in).toBe(24 * 3600);
      const payload = jose.decodeJwt(res.body.access_token);
      expect(payload.exp! - payload.iat!).toBe(24 * 3600);
      own.clock.advance((24 * 3600 - 3600) * 1000);
      expect((await sections(res.body.access_token, own)).status).toBe(200);
      own.clock.advance(3600 * 1000 + 1000);
      expect401(await sections(res.body.access_token, own));
    } finally {
      await own.close();
    }
  });

  it('AUTH-07 an account may shorten it, to no less than 2 hours; null restores the 24 hours', async () => {
    const creds = await server.createAccount({}, { limits: { token_lifetime_seconds: 7200 } });
    let res = await tokenJson(grant(creds));
    expect(res.body.expires_in).toBe(7200);
    const payload = jose.decodeJwt(res.body.access_token);
    expect(payload.exp! - payload.iat!).toBe(7200);
    for (const wrong of [3600, 24 * 3600 + 1]) {
      const refused = await server.admin('PATCH', `/admin/accounts/${creds.accountId}`, {
        limits: { token_lifetime_seconds: wrong },
      });
      expectSpecProblem(refused, 400);
      expect(refused.body.detail).toContain('token_lifetime_seconds');
    }
    const manifest = await server.admin('PUT', `/admin/accounts/${creds.accountId}/manifest`, {
      account: { limits: { token_lifetime_seconds: 60 } },
    });
    expectSpecProblem(manifest, 400);
    expect(manifest.body.detail).toContain('token_lifetime_seconds');
    expect(
      (await server.admin('PATCH', `/admin/accounts/${creds.accountId}`, { limits: { token_lifetime_seconds: null } }))
        .status,
    ).toBe(200);
    res = await tokenJson(grant(creds));
    expect(res.body.expires_in).toBe(24 * 3600);
  });
});

describe('Bearer authentication', () => {
  it('AUTH-08 a token is accepted for any number of calls until its exp passes', async () => {
    const creds = await server.createAccount(
      {},
      { limits: { token_requests_per_minute: null, requests_per_second: null } },
    );
    const token = await server.token(creds);
    for (let i = 0; i < 25; i++) expect((await sections(token)).status).toBe(200);
    for (const path of ['/audience/keyspaces', '/audience/channels', '/audience/segments']) {
      expect((await server.request('GET', path, { token })).status).toBe(200);
    }
    const { exp } = jose.decodeJwt(token);
    server.clock.advance(exp! * 1000 - server.clock.now - 1000);
    expect((await sections(token)).status).toBe(200);
  });

  it('AUTH-09 every other endpoint needs Authorization: Bearer (401 AUD-8 without it)', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/audience/sections'],
      ['GET', '/audience/keyspaces'],
      ['GET', '/audience/channels'],
      ['GET', '/audience/segments'],
      ['GET', '/audience/segments/com.vendor1.segments.user-created.x'],
      ['GET', '/audience/sections/com.vendor1.sections.user-created.x/attributes'],
      ['GET', '/audience/sections/com.vendor1.sections.user-created.x/tags'],
      ['POST', '/audience/sections/com.vendor1.sections.user-created.x/tags', { name: 'New' }],
      ['GET', '/audience/sections/com.vendor1.sections.user-created.x/events'],
      ['GET', '/v2/audience/sections/com.vendor1.sections.user-created.x/topics'],
      ['GET', '/folders/topic/sections/com.vendor1.sections.user-created.x/folders'],
    ];
    const details = new Set<string>();
    for (const [method, path, body] of routes) {
      const detail = expect401(await server.request(method, path, { body }));
      details.add(detail);
    }
    expect([...details]).toHaveLength(1);
    expect([...details][0]).toMatch(/missing/i);
    // The credential-free URLs.
    expect((await server.request('GET', '/.well-known/jwks.json')).status).toBe(200);
    expect((await server.request('GET', '/healthz')).status).toBe(200);
  });

  it('AUTH-09 an API token does not open the operator API', async () => {
    const { token } = await server.login();
    expectProblem(await server.request('GET', '/admin/accounts', { token }), 401, 'AUD-8');
    expectProblem(await server.request('POST', '/admin/signing-keys', { token }), 401, 'AUD-8');
  });

  it('AUTH-10 an Authorization header that does not start with Bearer is refused', async () => {
    const { token } = await server.login();
    const details = new Set<string>();
    for (const value of [
      `Basic ${Buffer.from('a:b').toString('base64')}`,
      `Token ${token}`,
      token,
      `Bearer${token}`,
      `MAC ${token}`,
    ]) {
      details.add(expect401(await withAuthorization(value)));
    }
    expect([...details]).toHaveLength(1);
    expect([...details][0]).toMatch(/Bearer/);
    // The scheme is case-insensitive (RFC 7235).
    expect((await withAuthorization(`bearer ${token}`)).status).toBe(200);
  });

  it('AUTH-09 AUTH-20 "Bearer" with no token says the token is missing', async () => {
    const missing = expect401(await withAuthorization(undefined));
    expect(expect401(await withAuthorization('Bearer'))).toBe(missing);
    expect(expect401(await withAuthorization('Bearer    '))).toBe(missing);
  });

  it('AUTH-11 a bearer value that cannot be decoded is refused', async () => {
    const details = new Set<string>();
    for (const value of [
      'not-a-jwt',
      'a.b.c',
      `${b64({ alg: 'ES256' })}.%%%.sig`,
      `${b64({ alg: 'ES256', kid: 'k' })}.${Buffer.from('not json').toString('base64url')}.sig`,
      'e30.e30',
    ]) {
      details.add(expect401(await withAuthorization(`Bearer ${value}`)));
    }
    expect([...details]).toHaveLength(1);
    expect([...details][0]).toMatch(/decode/i);
  });

  it('AUTH-12 an expired token is refused, whether or not it was used before', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const used = await server.token(creds);
    const unused = await server.token(creds);
    expect((await sections(used)).status).toBe(200);
    const { exp } = jose.decodeJwt(used);
    server.clock.advance(exp! * 1000 - server.clock.now);
    const detail = expect401(await sections(used));
    expect(detail).toMatch(/expired/i);
    expect(expect401(await sections(unused))).toBe(detail);
    // A new token works again.
    expect((await sections(await server.token(creds))).status).toBe(200);
    // A token signed by the service itself but with exp in the past.
    const claims = await realClaims(creds);
    expect(expect401(await sections(await sign({ ...claims, iat: nowSeconds() - 7200, exp: nowSeconds() - 1 })))).toBe(
      detail,
    );
  });

  it('AUTH-13 a token whose signature cannot be verified is refused', async () => {
    const a = await server.login();
    const b = await server.login();
    const [head, payload, signature] = a.token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = [
      // An altered payload: another account, a longer life.
      `${head}.${b64({ ...claims, account: b.accountId })}.${signature}`,
      `${head}.${b64({ ...claims, exp: claims.exp + 86400 })}.${signature}`,
      // An altered signature; no signature; alg none.
      `${head}.${payload}.${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`,
      `${head}.${payload}.`,
      `${b64({ alg: 'none', kid: jose.decodeProtectedHeader(a.token).kid })}.${payload}.`,
    ];
    // Signed by another key under the service's kid.
    const { privateKey } = await jose.generateKeyPair('ES256');
    forged.push(await sign(claims, { key: privateKey, kid: jose.decodeProtectedHeader(a.token).kid }));
    const details = new Set<string>();
    for (const token of forged) details.add(expect401(await sections(token)));
    expect([...details]).toHaveLength(1);
    expect([...details][0]).toMatch(/signature/i);
    // The genuine token still works.
    expect((await sections(a.token)).status).toBe(200);
  });

  it('AUTH-14 a token with a missing or invalid required claim is refused, naming the claim', async () => {
    const a = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const b = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const claims = await realClaims(a);
    // The forging works: an exact copy signed with the service key is accepted.
    expect((await sections(await sign(claims))).status).toBe(200);

    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [without(claims, 'account'), /"account"/],
      [{ ...claims, account: 12 }, /"account"/],
      [{ ...claims, account: '' }, /"account"/],
      [without(claims, 'sub'), /"sub"/],
      [{ ...claims, sub: 7 }, /"sub"/],
      [without(claims, 'exp'), /"exp"/],
      [{ ...claims, exp: 'tomorrow' }, /"exp"/],
      [without(claims, 'iat'), /"iat"/],
      [without(claims, 'iss'), /"iss"/],
      [{ ...claims, iss: 'someone-else' }, /"iss"/],
      // Validly signed, and still not a token the service could have issued.
      [{ ...claims, iat: nowSeconds() + 3600, exp: nowSeconds() + 7200 }, /"iat".*future/],
      [{ ...claims, nbf: nowSeconds() + 3600 }, /"nbf"/],
      [{ ...claims, nbf: 'later' }, /"nbf"/],
      [{ ...claims, iat: nowSeconds(), exp: nowSeconds() + 24 * 3600 + 1 }, /24 hours/],
    ];
    for (const [forged, detail] of cases) expect(expect401(await sections(await sign(forged)))).toMatch(detail);

    // A sub and account that do not belong together: another account, an unknown key.
    const mismatch = expect401(await sections(await sign({ ...claims, account: b.accountId })));
    expect(mismatch).toMatch(/"sub"/);
    expect(expect401(await sections(await sign({ ...claims, sub: b.clientId })))).toBe(mismatch);
    expect(expect401(await sections(await sign({ ...claims, sub: crypto.randomUUID() })))).toBe(mismatch);
  });

  it('AUTH-15 a token whose key ID is absent from the key set is refused', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const claims = await realClaims(creds);
    const { privateKey } = await jose.generateKeyPair('ES256');
    const unknownKid = crypto.randomBytes(12).toString('base64url');
    const detail = expect401(await sections(await sign(claims, { key: privateKey, kid: unknownKid })));
    expect(detail).toMatch(/key ID/i);
    expect(detail).toContain(unknownKid);
    // The service's own key under an unknown kid is refused just the same.
    expect(expect401(await sections(await sign(claims, { kid: unknownKid })))).toMatch(/key ID/i);
    // No kid at all.
    expect(expect401(await sections(await sign(claims, { kid: null })))).toMatch(/kid|key ID/i);
  });

  it('AUTH-16 a token whose audience is not recognised is refused', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const claims = await realClaims(creds);
    const details = [
      expect401(await sections(await sign({ ...claims, aud: 'audience-mars' }))),
      expect401(await sections(await sign({ ...claims, aud: ['somebody', 'else'] }))),
      expect401(await sections(await sign(without(claims, 'aud')))),
    ];
    for (const detail of details) expect(detail).toMatch(/audience/i);
    expect(details[0]).toContain('audience-mars');
  });
});

// ---- API keys ----

describe('API keys', () => {
  it('AUTH-06 several keys obtain tokens for one account; deleting one ends its tokens at once and leaves the others working', async () => {
    const first = await server.createAccount(TWO_SECTIONS, { limits: { token_requests_per_minute: null } });
    const second = await server.createKey(first.accountId);
    expect(second.clientId).not.toBe(first.clientId);
    const t1 = await server.token(first);
    const t2 = await server.token(second);
    expect(jose.decodeJwt(t1).account).toBe(first.accountId);
    expect(jose.decodeJwt(t2).account).toBe(first.accountId);
    const s1 = await sections(t1);
    const s2 = await sections(t2);
    expect(s1.status).toBe(200);
    expect(s1.body.items).toHaveLength(2);
    expect(s2.body).toEqual(s1.body);

    const listed = await server.admin('GET', `/admin/accounts/${first.accountId}/keys`);
    expect(listed.body.items.map((k: { client_id: string }) => k.client_id).sort()).toEqual(
      [first.clientId, second.clientId].sort(),
    );
    expect(JSON.stringify(listed.body)).not.toContain(first.clientSecret);

    expect((await server.admin('DELETE', `/admin/accounts/${first.accountId}/keys/${first.clientId}`)).status).toBe(
      204,
    );
    // The issued token stops at once ...
    expect(expect401(await sections(t1))).toMatch(/deleted/i);
    // ... and the key gets no new one.
    expectProblem(await tokenJson(grant(first)), 401, 'AUD-1009');
    // The other key keeps working, with its old token and new ones.
    expect((await sections(t2)).status).toBe(200);
    expect((await sections(await server.token(second))).status).toBe(200);

    const after = await server.admin('GET', `/admin/accounts/${first.accountId}/keys`);
    expect(after.body.items.map((k: { client_id: string }) => k.client_id)).toEqual([second.clientId]);
    // Deleting it again, or through another account, finds nothing.
    expectProblem(await server.admin('DELETE', `/admin/accounts/${first.accountId}/keys/${first.clientId}`), 404);
    const other = await server.createAccount();
    expectProblem(await server.admin('DELETE', `/admin/accounts/${other.accountId}/keys/${second.clientId}`), 404);
    expect((await sections(t2)).status).toBe(200);
  });

  it('AUTH-19 a key limited to some sections gets 403 on the others and lists only its own', async () => {
    const creds = await server.createAccount(TWO_SECTIONS, { limits: { token_requests_per_minute: null } });
    const all = await sections(await server.token(creds));
    expect(all.body.items).toHaveLength(2);
    const [alpha, beta] = all.body.items.map((s: { discriminator: string }) => s.discriminator);
    expect(alpha).toMatch(/alpha$/);
    expect(beta).toMatch(/beta$/);

    const limited = await server.createKey(creds.accountId, { section_discriminators: [alpha] });
    const token = await server.token(limited);
    const listed = await sections(token);
    expect(listed.status).toBe(200);
    expect(listed.body.items.map((s: { discriminator: string }) => s.discriminator)).toEqual([alpha]);

    expect((await server.request('GET', `/audience/sections/${alpha}/tags`, { token })).status).toBe(200);
    expect((await server.request('GET', `/audience/sections/${alpha}/attributes`, { token })).status).toBe(200);
    const detail = expectProblem(
      await server.request('GET', `/audience/sections/${beta}/tags`, { token }),
      403,
      'AUD-1107',
    );
    expect(detail).toMatch(/section/i);
    expect(detail).toContain(beta);
    for (const [method, path, body] of [
      ['GET', `/audience/sections/${beta}/attributes`],
      ['GET', `/audience/sections/${beta}/events`],
      ['GET', `/v2/audience/sections/${beta}/topics`],
      ['GET', `/folders/topic/sections/${beta}/folders`],
      ['POST', `/audience/sections/${beta}/tags`, { name: 'Sneaky' }],
    ] as Array<[string, string, unknown?]>) {
      expectProblem(await server.request(method, path, { token, body }), 403, 'AUD-1107');
    }
    // The tag was not created.
    const betaTags = await server.request('GET', `/audience/sections/${beta}/tags`, {
      token: await server.token(creds),
    });
    expect(betaTags.body.items.map((t: { name: string }) => t.name)).not.toContain('Sneaky');
    // An unknown section is still 404, not 403.
    expectProblem(
      await server.request('GET', '/audience/sections/com.vendor1.sections.user-created.nowhere/tags', { token }),
      404,
    );
    // A key cannot be limited to a section that does not exist.
    expectProblem(
      await server.admin('POST', `/admin/accounts/${creds.accountId}/keys`, {
        section_discriminators: ['com.vendor1.sections.user-created.nowhere'],
      }),
      400,
    );
  });
});

// ---- Signing keys ----

describe('Signing keys', () => {
  it('AUTH-07 GET /.well-known/jwks.json publishes the public keys only, without credentials', async () => {
    const res = await server.request('GET', '/.well-known/jwks.json');
    expect(res.status).toBe(200);
    expect(res.body.keys.length).toBeGreaterThanOrEqual(1);
    for (const key of res.body.keys) {
      expect(key).toMatchObject({
        kty: 'EC',
        crv: 'P-256',
        alg: 'ES256',
        use: 'sig',
        kid: expect.any(String),
        x: expect.any(String),
        y: expect.any(String),
      });
      expect(key.d).toBeUndefined();
    }
    const { token } = await server.login();
    expect(res.body.keys.map((k: { kid: string }) => k.kid)).toContain(jose.decodeProtectedHeader(token).kid);
  });

  it('AUTH-15 rotating the signing key keeps old tokens valid; new tokens carry the new kid', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const oldUsed = await server.token(creds);
    const oldUnused = await server.token(creds);
    const oldKid = jose.decodeProtectedHeader(oldUsed).kid;
    expect((await sections(oldUsed)).status).toBe(200);

    expectProblem(await server.request('POST', '/admin/signing-keys', { token: oldUsed }), 401, 'AUD-8');
    const rotated = await server.admin('POST', '/admin/signing-keys');
    expect(rotated.status, rotated.text).toBe(201);
    const newKid = rotated.body.kid;
    expect(newKid).toEqual(expect.any(String));
    expect(newKid).not.toBe(oldKid);

    const jwks = await server.request('GET', '/.well-known/jwks.json');
    const kids = jwks.body.keys.map((k: { kid: string }) => k.kid);
    expect(kids).toContain(oldKid);
    expect(kids).toContain(newKid);

    const fresh = await server.token(creds);
    expect(jose.decodeProtectedHeader(fresh).kid).toBe(newKid);
    expect((await sections(fresh)).status).toBe(200);
    expect((await sections(oldUsed)).status).toBe(200);
    expect((await sections(oldUnused)).status).toBe(200);
    // Both verify against the published set.
    const set = jose.createLocalJWKSet(jwks.body);
    for (const token of [fresh, oldUnused]) {
      await expect(jose.jwtVerify(token, set, { currentDate: new Date(server.clock.now) })).resolves.toBeDefined();
    }
  });
});

describe('Revoking a signing key', () => {
  it('AUTH-15 a rotation with revoke_old refuses every token of the old key at once: issued, remembered or newly signed with it', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const claims = await realClaims(creds);
    const old = await serverSigningKey();
    const used = await server.token(creds);
    expect((await sections(used)).status).toBe(200);
    const unused = await server.token(creds);
    // Whoever holds the old key signs a token of their own.
    const newlySigned = () =>
      sign(
        { ...claims, iat: nowSeconds(), exp: nowSeconds() + 3600, jti: crypto.randomUUID() },
        { kid: old.kid, key: old.key },
      );
    expect((await sections(await newlySigned())).status).toBe(200);

    const rotated = await server.admin('POST', '/admin/signing-keys?revoke_old=true');
    expect(rotated.status, rotated.text).toBe(201);
    for (const token of [used, unused, await newlySigned()])
      expect(expect401(await sections(token))).toContain(old.kid);
    const kids = (await server.request('GET', '/.well-known/jwks.json')).body.keys.map((k: { kid: string }) => k.kid);
    expect(kids).toEqual([rotated.body.kid]);
    // A new token, signed with the new key, works.
    const fresh = await server.token(creds);
    expect(jose.decodeProtectedHeader(fresh).kid).toBe(rotated.body.kid);
    expect((await sections(fresh)).status).toBe(200);
    expectProblem(await server.admin('POST', '/admin/signing-keys?revoke_old=yes'), 400);
  });
});

// ---- Rate limit of the token endpoint ----

describe('Token rate limit', () => {
  it('LIM-02 the 11th token request of an account within a minute gets 429 with Retry-After; a minute later it works again', async () => {
    // Default limits; two keys share the account's budget.
    const creds = await server.createAccount({});
    const other = await server.createKey(creds.accountId);
    for (let i = 0; i < 10; i++) {
      const res = await (i % 2 === 0 ? tokenJson(grant(creds)) : tokenForm(grant(other)));
      expect(res.status, `request ${i + 1}: ${res.text}`).toBe(200);
    }
    for (const res of [await tokenJson(grant(creds)), await tokenForm(grant(other))]) {
      const detail = expectProblem(res, 429, 'AUD-1002');
      expect(detail).toMatch(/retry later/i);
      const retryAfter = res.headers.get('retry-after');
      expect(retryAfter).toMatch(/^\d+$/);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    }
    // Another account is not affected.
    const stranger = await server.createAccount({});
    expect((await tokenJson(grant(stranger))).status).toBe(200);

    server.clock.advance(60_000);
    expect((await tokenJson(grant(creds))).status).toBe(200);
    expect((await tokenForm(grant(other))).status).toBe(200);
  });
});

// ---- Regions ----

describe('Regions', () => {
  it('VER-01 VER-02 AUTH-16 an account is served only in its region: tokens of one region are refused at the other', async () => {
    const apac = await TestServer.start({ REGION: 'apac' });
    try {
      const created = await server.admin('POST', '/admin/accounts', {
        name: `apac ${crypto.randomUUID()}`,
        region: 'apac',
      });
      expect(created.status, created.text).toBe(201);
      expect(created.body.region).toBe('apac');
      const key = await server.createKey(created.body.id);
      const apacCreds = { accountId: created.body.id as string, ...key };

      // The eu address issues no token to the apac account.
      const refused = expectProblem(await tokenJson(grant(apacCreds)), 401, 'AUD-1009');
      expect(refused).toMatch(/apac/);

      // The apac address does, for the same paths (VER-01).
      const apacToken = await apac.token(apacCreds);
      expect(jose.decodeJwt(apacToken).aud).toEqual(expect.stringMatching(/apac/));
      expect((await sections(apacToken, apac)).status).toBe(200);

      // The eu address refuses the apac token: the audience is not recognised.
      const detail = expect401(await sections(apacToken));
      expect(detail).toMatch(/audience/i);
      expect(detail).toMatch(/apac/);

      // And the other way round.
      const eu = await server.login();
      expect((await sections(eu.token)).status).toBe(200);
      expect(expect401(await sections(eu.token, apac))).toMatch(/audience/i);
      expectProblem(await tokenJson(grant(eu), apac), 401, 'AUD-1009');

      // Both addresses publish the same key set.
      const [euKeys, apacKeys] = await Promise.all([
        server.request('GET', '/.well-known/jwks.json'),
        apac.request('GET', '/.well-known/jwks.json'),
      ]);
      expect(apacKeys.body.keys.map((k: { kid: string }) => k.kid).sort()).toEqual(
        euKeys.body.keys.map((k: { kid: string }) => k.kid).sort(),
      );
    } finally {
      await apac.close();
    }
  });
});

// ---- Distinct causes ----

describe('Failure details', () => {
  it('AUTH-20 each authentication failure names its own cause', async () => {
    const creds = await server.createAccount(TWO_SECTIONS, { limits: { token_requests_per_minute: null } });
    const token = await server.token(creds);
    const claims = jose.decodeJwt(token);
    const all = await sections(token);
    const beta = all.body.items[1].discriminator;
    const limited = await server.createKey(creds.accountId, {
      section_discriminators: [all.body.items[0].discriminator],
    });
    const limitedToken = await server.token(limited);
    const doomed = await server.createKey(creds.accountId);
    const doomedToken = await server.token(doomed);
    expect((await sections(doomedToken)).status).toBe(200);
    expect((await server.admin('DELETE', `/admin/accounts/${creds.accountId}/keys/${doomed.clientId}`)).status).toBe(
      204,
    );
    const { privateKey } = await jose.generateKeyPair('ES256');
    const [head, payload, signature] = token.split('.');

    const failures: Record<string, Response> = {
      'missing token': await withAuthorization(undefined),
      'not Bearer': await withAuthorization(`Basic ${token}`),
      'cannot be decoded': await withAuthorization('Bearer garbage'),
      expired: await sections(await sign({ ...claims, iat: nowSeconds() - 7200, exp: nowSeconds() - 60 })),
      'bad signature': await sections(`${head}.${b64({ ...claims, account: '1' })}.${signature}`),
      'missing claim account': await sections(await sign(without(claims, 'account'))),
      'missing claim sub': await sections(await sign(without(claims, 'sub'))),
      'unknown kid': await sections(await sign(claims, { key: privateKey, kid: crypto.randomUUID() })),
      'no kid': await sections(await sign(claims, { kid: null })),
      audience: await sections(await sign({ ...claims, aud: 'audience-apac' })),
      'deleted key': await sections(doomedToken),
      'section denied': await server.request('GET', `/audience/sections/${beta}/tags`, { token: limitedToken }),
      'bad credentials': await tokenJson(grant({ clientId: creds.clientId, clientSecret: 'wrong' })),
    };
    const details = new Map<string, string>();
    for (const [cause, res] of Object.entries(failures)) {
      const status = cause === 'section denied' ? 403 : 401;
      details.set(cause, expectProblem(res, status));
    }
    expect(details.get('missing token')).toMatch(/missing/i);
    expect(details.get('not Bearer')).toMatch(/Bearer/);
    expect(details.get('cannot be decoded')).toMatch(/decode/i);
    expect(details.get('expired')).toMatch(/expired/i);
    expect(details.get('bad signature')).toMatch(/signature/i);
    expect(details.get('missing claim account')).toMatch(/claim "account"/);
    expect(details.get('missing claim sub')).toMatch(/claim "sub"/);
    expect(details.get('unknown kid')).toMatch(/key ID/i);
    expect(details.get('audience')).toMatch(/audience/i);
    expect(details.get('deleted key')).toMatch(/deleted/i);
    expect(details.get('section denied')).toMatch(/section/i);
    expect(details.get('bad credentials')).toMatch(/client_id|client_secret/);
    // No two causes share a detail.
    expect(new Set(details.values()).size).toBe(details.size);
    // The genuine token is unaffected by all of this.
    expect((await sections(token)).status).toBe(200);
  });
});

describe('Signing keys at rest', () => {
  it('keeps no private half in plain text: sealed under SERVER_SECRET, and one stored before sealing is sealed at the next start', async () => {
    const { rows } = await db.query<{ private_jwk: unknown; private_key_sealed: Buffer }>(
      'select private_jwk, private_key_sealed from signing_keys',
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.private_jwk).toBeNull();
      const jwk = JSON.parse(unseal(SEALING, row.private_key_sealed));
      // The sealed bytes do not hold the private scalar.
      expect(row.private_key_sealed.includes(Buffer.from(jwk.d))).toBe(false);
    }
    // A key as programs before sealing stored it (retired, so it signs nothing here).
    const { privateKey, publicKey } = await jose.generateKeyPair('ES256', { extractable: true });
    const plain = await jose.exportJWK(privateKey);
    await db.query(
      `insert into signing_keys (kid, private_jwk, public_jwk, retired_at) values ('legacy', $1, $2, now() + interval '1 hour')`,
      [plain, await jose.exportJWK(publicKey)],
    );
    const next = await TestServer.start();
    await next.close();
    const legacy = (
      await db.query<{ private_jwk: unknown; private_key_sealed: Buffer }>(
        `select private_jwk, private_key_sealed from signing_keys where kid = 'legacy'`,
      )
    ).rows[0];
    expect(legacy.private_jwk).toBeNull();
    expect(JSON.parse(unseal(SEALING, legacy.private_key_sealed))).toEqual(plain);
  });

  it('refuses to start with another SERVER_SECRET, which could not open the signing key, naming the cause', async () => {
    await expect(TestServer.start({ SERVER_SECRET: 'another-secret' })).rejects.toThrow(
      /cannot be opened with this SERVER_SECRET/,
    );
  });
});

// Last: moves the clock more than a day.
describe('Retired signing keys', () => {
  it('AUTH-15 a rotated-out key leaves the key set once its grace period (the longest token life) is over', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const claims = await realClaims(creds);
    const old = await serverSigningKey();
    const rotated = await server.admin('POST', '/admin/signing-keys');
    expect(rotated.status).toBe(201);
    expect(rotated.body.kid).not.toBe(old.kid);
    // Tokens of the old key living the longest allowed, each issued and first presented at the
    // moment checked, since a verified token is remembered until its exp.
    const longLived = () =>
      sign(
        { ...claims, iat: nowSeconds(), exp: nowSeconds() + 86400, jti: crypto.randomUUID() },
        { kid: old.kid, key: old.key },
      );
    expect((await sections(await longLived())).status).toBe(200);
    // The grace period ends at the retired_at the rotation stored (earlier tests moved the clock already).
    const { rows } = await db.query<{ retired_at: Date; grace: string }>(
      'select retired_at, extract(epoch from retired_at - now()) as grace from signing_keys where kid = $1',
      [old.kid],
    );
    const retiredAtMs = rows[0].retired_at.getTime();
    // At least the longest life of a token the service issues.
    expect(Number(rows[0].grace)).toBeGreaterThanOrEqual(24 * 3600 - 60);
    server.clock.advance(retiredAtMs - server.clock.now - 60_000);
    expect((await sections(await longLived())).status).toBe(200);

    server.clock.advance(120_000);
    const detail = expect401(await sections(await longLived()));
    expect(detail).toMatch(/key ID/i);
    expect(detail).toContain(old.kid);
    // Tokens of the current key work.
    expect((await sections(await server.token(creds))).status).toBe(200);
  });
});

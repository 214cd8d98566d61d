import crypto from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import { TestServer, type Response, expectProblem as expectSpecProblem } from '../../test/app.ts';
import {
  apiKeysServer,
  expect401,
  expectProblem,
  grant,
  nowSeconds,
  sections,
  server,
  tokenForm,
  tokenJson,
  without,
} from '../../test/api-keys-http.ts';

// The token endpoint (SPEC §5; CHECKLIST "Authentication") through real HTTP: client credentials,
// the token's lifetime, and its rate limit.

apiKeysServer();

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

  it("AUTH-02 the client id and secret as HTTP Basic credentials (RFC 6749 §2.3.1, the reference's Authorize dialog) with a form of grant_type give a token; a wrong secret there is 401", async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const basic = (secret: string) =>
      'Basic ' + Buffer.from(`${encodeURIComponent(creds.clientId)}:${encodeURIComponent(secret)}`).toString('base64');
    const res = await server.request('POST', '/oauth/token', {
      raw: 'grant_type=client_credentials&scope=',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(creds.clientSecret) },
    });
    expect(res.status, res.text).toBe(200);
    expect(jose.decodeJwt(res.body.access_token).account).toBe(creds.accountId);
    expect((await sections(res.body.access_token)).status).toBe(200);
    const wrong = await server.request('POST', '/oauth/token', {
      raw: 'grant_type=client_credentials',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic('not-the-secret') },
    });
    expectProblem(wrong, 401, 'AUD-1009');
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

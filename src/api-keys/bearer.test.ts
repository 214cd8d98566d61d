import crypto from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import type { Response } from '../../test/app.ts';
import {
  TWO_SECTIONS,
  apiKeysServer,
  b64,
  expect401,
  expectProblem,
  grant,
  nowSeconds,
  realClaims,
  sections,
  server,
  sign,
  tokenJson,
  withAuthorization,
  without,
} from '../../test/api-keys-http.ts';

// Bearer authentication (SPEC §5.5, §5.7) through real HTTP: which tokens are accepted, forged ones
// refused, and the distinct causes a refusal names.

apiKeysServer();

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

import crypto from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';
import { unseal } from './sealing.ts';
import {
  SEALING,
  TWO_SECTIONS,
  apiKeysServer,
  db,
  expect401,
  expectProblem,
  grant,
  nowSeconds,
  realClaims,
  sections,
  server,
  serverSigningKey,
  sign,
  tokenJson,
} from '../../test/api-keys-http.ts';

// API keys, signing keys (their rotation, retirement and sealing at rest) and regions, through the
// operator API and real HTTP.

apiKeysServer();

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

describe('GET /audience/account', () => {
  it("names the caller's account and API key; without a token it is 401", async () => {
    const creds = await server.createAccount();
    const named = await server.createKey(creds.accountId, { name: 'Newsletter team' });
    const account = (await server.admin('GET', `/admin/accounts/${creds.accountId}`)).body;
    for (const [key, name] of [
      [creds, ''],
      [named, 'Newsletter team'],
    ] as const) {
      const res = await server.request('GET', '/audience/account', { token: await server.token(key) });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ id: creds.accountId, name: account.name, key: { client_id: key.clientId, name } });
    }
    expect401(await server.request('GET', '/audience/account'));
  });
});

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

  it('takes revoke_old in the body too, as the operator API takes its settings, and refuses what is not one', async () => {
    const creds = await server.createAccount({}, { limits: { token_requests_per_minute: null } });
    const old = await server.token(creds);
    const kept = await server.admin('POST', '/admin/signing-keys', { revoke_old: false });
    expect(kept.status, kept.text).toBe(201);
    expect((await sections(old)).status).toBe(200);
    const revoked = await server.admin('POST', '/admin/signing-keys', { revoke_old: true });
    expect(revoked.status, revoked.text).toBe(201);
    expect401(await sections(old));
    expect(expectProblem(await server.admin('POST', '/admin/signing-keys', { revoke_old: 'yes' }), 400)).toContain(
      'revoke_old',
    );
    expect(expectProblem(await server.admin('POST', '/admin/signing-keys', { revoke: true }), 400)).toContain('revoke');
  });
});

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

import pg from 'pg';
import * as jose from 'jose';
import { afterAll, beforeAll, expect } from 'vitest';
import {
  TestServer,
  testDatabase,
  type Credentials,
  type Response,
  expectProblem as expectSpecProblem,
} from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { SIGNING_KEY_SEALING } from '../src/api-keys/api-keys.ts';
import { sealingKey, unseal } from '../src/api-keys/sealing.ts';

// What the tests of API keys, tokens and signing keys (src/api-keys/*.test.ts) share: their server,
// a connection of their own to its database (to read and forge signing keys), and requests to the
// token endpoint and with a bearer token.

export let server: TestServer;
export let db: pg.Client;

/** Starts the test file's server and connection, before its tests. */
export function apiKeysServer(): void {
  beforeAll(async () => {
    server = await TestServer.start();
    db = new pg.Client({ connectionString: await testDatabase() });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await server?.close();
  });
}

export const TWO_SECTIONS: Manifest = { sections: [{ name: 'Alpha' }, { name: 'Beta' }] };

/** Checks a problem document (ERR-01, ERR-02, ERR-03) and returns its detail. */
export function expectProblem(res: Response, status: number, code?: string): string {
  const detail = expectSpecProblem(res, status, code);
  expect(res.body.access_token).toBeUndefined();
  return detail;
}

/** A 401 of SPEC §5.7: AUD-8 with the RFC 6750 challenge; returns the detail. */
export function expect401(res: Response): string {
  const detail = expectProblem(res, 401, 'AUD-8');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  return detail;
}

export function grant(c: { clientId: string; clientSecret: string }) {
  return { grant_type: 'client_credentials', client_id: c.clientId, client_secret: c.clientSecret };
}

export function tokenJson(body: unknown, s: TestServer = server): Promise<Response> {
  return s.request('POST', '/oauth/token', { body });
}

export function tokenForm(fields: Record<string, string>, s: TestServer = server): Promise<Response> {
  return s.request('POST', '/oauth/token', {
    raw: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** GET /audience/sections with a raw Authorization header (or none). */
export function withAuthorization(authorization: string | undefined, s: TestServer = server): Promise<Response> {
  return s.request('GET', '/audience/sections', { headers: authorization === undefined ? {} : { authorization } });
}

export function sections(token: string, s: TestServer = server): Promise<Response> {
  return s.request('GET', '/audience/sections', { token });
}

export const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The servers' SERVER_SECRET in tests (test/app.ts), which seals the signing keys. */
export const SEALING = sealingKey('test-server-secret', SIGNING_KEY_SEALING);

/** The current signing key of the service, read from its database and opened (tests only: to forge claims). */
export async function serverSigningKey(): Promise<{ kid: string; key: jose.CryptoKey }> {
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
export async function sign(
  claims: Record<string, unknown>,
  options: { kid?: string | null; key?: jose.CryptoKey } = {},
): Promise<string> {
  const own = options.key ? undefined : await serverSigningKey();
  const kid = options.kid === undefined ? own!.kid : options.kid;
  const header: jose.JWTHeaderParameters = { alg: 'ES256', typ: 'JWT', ...(kid === null ? {} : { kid }) };
  return new jose.SignJWT(claims as jose.JWTPayload).setProtectedHeader(header).sign(options.key ?? own!.key);
}

/** The claims of a real token of `creds`, as a template for forged ones. */
export async function realClaims(creds: Credentials): Promise<jose.JWTPayload> {
  return jose.decodeJwt(await server.token(creds));
}

export function without(claims: jose.JWTPayload, name: string): jose.JWTPayload {
  const copy = { ...claims };
  delete copy[name];
  return copy;
}

export const nowSeconds = () => Math.floor(server.clock.now / 1000);

import crypto from 'node:crypto';
import type pg from 'pg';
import * as jose from 'jose';
import type { JWK } from 'jose';
import type { Clock } from '../core/clock.ts';
import { DEFAULT_LIMITS, type Limits } from '../core/limits.ts';
import { Problem } from '../core/problems.ts';
import type { Caller } from '../core/scope.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { RecordCache } from '../store/changes.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import * as q from './queries.ts';
import { seal, sealingKey, unseal } from './sealing.ts';

export interface IssuedToken {
  access_token: string;
  expires_in: number;
  token_type: 'Bearer';
}

/** SPEC §5.4: tokens are valid up to 24 hours. */
const MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600;
/** A rotated signing key keeps verifying for the longest a token it signed can live. */
const ROTATION_GRACE_SECONDS = MAX_TOKEN_LIFETIME_SECONDS;
/** How far apart the clocks of the processes of a deployment may be. */
const CLOCK_SKEW_MS = 60_000;
const ISSUER = 'audience';
const KEYS_TOPIC = 'api_key';
const SIGNING_TOPIC = 'signing_key';
/** The purpose of the key that seals signing keys (sealing.ts). */
export const SIGNING_KEY_SEALING = 'signing-keys';

/** The audience claim of the tokens of a region (SPEC §1.8: a token serves one region). */
export function regionAudience(region: string): string {
  return `audience-${region}`;
}

function hashSecret(secret: string): Buffer {
  return crypto.createHash('sha256').update(secret, 'utf8').digest();
}

function unauthorized(detail: string): Problem {
  return new Problem('AUD-8', detail, { 'www-authenticate': 'Bearer' });
}

interface VerifyingKey {
  kid: string;
  /** After this instant (ms) the key verifies nothing; null while it signs. */
  retiredAtMs: number | null;
  key: jose.CryptoKey;
  publicJwk: JWK;
}

interface SigningKeys {
  signing: { kid: string; key: jose.CryptoKey } | undefined;
  verifying: Map<string, VerifyingKey>;
}

/**
 * API keys and access tokens (SPEC §5): issues ES256 JWTs to API keys, and turns a bearer
 * header into a Caller. A verified token is remembered until it expires, so steady-state
 * requests pay no signature check; deleting its API key ends it at once in every process.
 */
export class ApiKeys {
  private readonly pool: pg.Pool;
  private readonly feed: ChangeFeed;
  private readonly clock: Clock;
  private readonly region: string;
  /** Seals the signing keys' private halves in the database. */
  private readonly sealing: Buffer;
  private readonly apiKeys: RecordCache<q.ApiKeyRow | null>;
  private readonly signingKeys: RecordCache<SigningKeys>;
  /** Tokens already verified, until they expire or their signing key retires. */
  private verified = new Map<string, { caller: Caller; validUntilMs: number }>();

  constructor(options: { pool: pg.Pool; feed: ChangeFeed; clock: Clock; region: string; serverSecret: string }) {
    this.pool = options.pool;
    this.feed = options.feed;
    this.clock = options.clock;
    this.region = options.region;
    this.sealing = sealingKey(options.serverSecret, SIGNING_KEY_SEALING);
    this.apiKeys = new RecordCache(
      this.feed,
      KEYS_TOPIC,
      async (clientId) => (await q.findApiKeyByClientId(this.pool, clientId)) ?? null,
    );
    this.signingKeys = new RecordCache(this.feed, SIGNING_TOPIC, () => this.loadSigningKeys());
    this.feed.on(KEYS_TOPIC, () => this.verified.clear());
    // A verified token is remembered until its key's retirement as it was: a key revoked since ends it too.
    this.feed.on(SIGNING_TOPIC, () => this.verified.clear());
  }

  /** Creates an API key for `accountId`; the secret is returned here once and stored only as a hash. */
  async createApiKey(db: Queryable, accountId: string, options: { name?: string; sectionIds?: string[] | null } = {}) {
    const clientId = crypto.randomUUID();
    const secret = crypto.randomBytes(32).toString('base64url');
    const row = await q.insertApiKey(db, {
      accountId,
      clientId,
      secretHash: hashSecret(secret),
      name: options.name ?? '',
      sectionIds: options.sectionIds ?? null,
    });
    return {
      client_id: clientId,
      client_secret: secret,
      name: row.name,
      section_ids: row.section_ids,
      created_at: row.created_at.toISOString(),
    };
  }

  async listApiKeys(db: Queryable, accountId: string) {
    const rows = await q.listApiKeysByAccount(db, accountId);
    return rows.map((r) => ({
      client_id: r.client_id,
      name: r.name,
      section_ids: r.section_ids,
      created_at: r.created_at.toISOString(),
    }));
  }

  /** Deletes an API key; it and every token it obtained stop working at once. */
  async deleteApiKey(db: Queryable, accountId: string, clientId: string): Promise<void> {
    if (!(await q.markApiKeyDeleted(db, accountId, clientId)))
      throw new Problem('AUD-1', `No API key with client_id "${clientId}" in account ${accountId}`);
    await this.feed.publish(db, KEYS_TOPIC, clientId);
  }

  /** Erases the API keys of an account being deleted; their tokens stop at once in every process. */
  async forgetAccount(tx: Queryable, accountId: string): Promise<void> {
    for (const clientId of await q.deleteAccountKeys(tx, accountId)) await this.feed.publish(tx, KEYS_TOPIC, clientId);
  }

  /**
   * The client-credentials grant (SPEC §4.1). `accountOf` tells the region the key's account
   * belongs to (a key is only served in its own region) and how long its tokens live.
   */
  async issueToken(
    clientId: string,
    clientSecret: string,
    accountOf: (accountId: string) => Promise<{ region: string; limits: Limits } | undefined>,
  ): Promise<IssuedToken> {
    const key = await this.apiKeys.get(clientId);
    const given = hashSecret(clientSecret);
    if (!key || key.deleted_at || !crypto.timingSafeEqual(key.secret_hash, given)) {
      throw new Problem('AUD-1009', 'The client_id and client_secret do not match an API key');
    }
    const account = await accountOf(key.account_id);
    const region = account?.region;
    if (!account || region !== this.region) {
      throw new Problem(
        'AUD-1009',
        `The account of this API key belongs to region "${region}"; request tokens at that region's base address`,
      );
    }
    const keys = await this.signingKeys.get('all');
    if (!keys.signing) throw new Error('no signing key');
    const now = Math.floor(this.clock() / 1000);
    const lifetime = account.limits.token_lifetime_seconds ?? DEFAULT_LIMITS.token_lifetime_seconds;
    const token = await new jose.SignJWT({ account: key.account_id })
      .setProtectedHeader({ alg: 'ES256', kid: keys.signing.kid, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setAudience(regionAudience(this.region))
      .setSubject(clientId)
      .setIssuedAt(now)
      .setExpirationTime(now + lifetime)
      .setJti(crypto.randomUUID())
      .sign(keys.signing.key);
    return { access_token: token, expires_in: lifetime, token_type: 'Bearer' };
  }

  /** The account an API key belongs to, for rate-limiting token requests before the secret is checked. */
  async accountOfClient(clientId: string): Promise<string | undefined> {
    const key = await this.apiKeys.get(clientId);
    return key && !key.deleted_at ? key.account_id : undefined;
  }

  /** Turns an Authorization header into a Caller, or throws the 401 of SPEC §5.7 naming the cause. */
  async authenticate(header: string | undefined): Promise<Caller> {
    const missing = 'Missing signed bearer token: send the header "Authorization: Bearer <access token>"';
    if (header === undefined || header.trim() === '') throw unauthorized(missing);
    if (!/^Bearer(\s|$)/i.test(header)) throw unauthorized('The Authorization header does not start with "Bearer"');
    const token = header.slice(6).trim();
    // "Bearer" alone (clients send it when they have no token yet): the token is missing.
    if (token === '') throw unauthorized(missing);
    const nowMs = this.clock();
    const hit = this.verified.get(token);
    if (hit && hit.validUntilMs > nowMs) return this.checkKey(hit.caller);
    // Past its expiry or its key's retirement: verified again below, which names the cause.
    if (hit) this.verified.delete(token);

    let header_: jose.ProtectedHeaderParameters;
    let claims: jose.JWTPayload;
    try {
      header_ = jose.decodeProtectedHeader(token);
      claims = jose.decodeJwt(token);
    } catch {
      throw unauthorized('The bearer token cannot be decoded as a JWT');
    }
    const keys = await this.signingKeys.get('all');
    const kid = header_.kid;
    const found = kid === undefined ? undefined : keys.verifying.get(kid);
    const key = found && (found.retiredAtMs === null || found.retiredAtMs > nowMs) ? found : undefined;
    if (!key)
      throw unauthorized(
        kid === undefined
          ? 'The bearer token has no key ID (kid)'
          : `The token's key ID "${kid}" is not in the issuer's key set`,
      );
    try {
      await jose.compactVerify(token, key.key, { algorithms: ['ES256'] });
    } catch {
      throw unauthorized('The signature of the bearer token cannot be verified');
    }
    const audience = regionAudience(this.region);
    const auds = Array.isArray(claims.aud) ? claims.aud : claims.aud === undefined ? [] : [claims.aud];
    if (!auds.includes(audience))
      throw unauthorized(
        `The token's audience "${auds.join(', ')}" is not recognised here; this base address serves "${audience}"`,
      );
    for (const claim of ['exp', 'iat'] as const) {
      if (typeof claims[claim] !== 'number')
        throw unauthorized(`The bearer token's claim "${claim}" is missing or invalid`);
    }
    for (const claim of ['sub', 'account'] as const) {
      if (typeof claims[claim] !== 'string' || claims[claim] === '')
        throw unauthorized(`The bearer token's claim "${claim}" is missing or invalid`);
    }
    if (claims.iss !== ISSUER) throw unauthorized('The bearer token\'s claim "iss" is missing or invalid');
    const expMs = (claims.exp as number) * 1000;
    if (expMs <= nowMs) throw unauthorized('The bearer token has expired');
    // A validly signed token still has to be one this service could have issued: not from the
    // future (beyond the clock skew between processes), and living no longer than SPEC §5.4 allows.
    const iatMs = (claims.iat as number) * 1000;
    if (iatMs > nowMs + CLOCK_SKEW_MS) throw unauthorized('The bearer token\'s claim "iat" is in the future');
    if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf * 1000 > nowMs + CLOCK_SKEW_MS))
      throw unauthorized('The bearer token\'s claim "nbf" is invalid or in the future: it is not valid yet');
    if (expMs - iatMs > MAX_TOKEN_LIFETIME_SECONDS * 1000)
      throw unauthorized(
        `The bearer token lives longer than ${MAX_TOKEN_LIFETIME_SECONDS / 3600} hours (claims "iat" and "exp")`,
      );
    const apiKey = await this.apiKeys.get(claims.sub as string);
    if (!apiKey || apiKey.account_id !== claims.account)
      throw unauthorized('The bearer token\'s claim "sub" does not name an API key of its account');
    const caller: Caller = { accountId: apiKey.account_id, clientId: apiKey.client_id, sectionIds: apiKey.section_ids };
    if (this.verified.size > 100_000) this.verified.clear();
    this.verified.set(token, { caller, validUntilMs: Math.min(expMs, key.retiredAtMs ?? Infinity) });
    return this.checkKey(caller);
  }

  private async checkKey(caller: Caller): Promise<Caller> {
    const key = await this.apiKeys.get(caller.clientId);
    if (!key || key.deleted_at) throw unauthorized('The API key that obtained this token was deleted');
    return { ...caller, sectionIds: key.section_ids };
  }

  /** The public keys that verify tokens (RFC 7517), served at /.well-known/jwks.json. */
  async jwks(): Promise<{ keys: JWK[] }> {
    const keys = await this.signingKeys.get('all');
    return { keys: [...keys.verifying.values()].map((k) => k.publicJwk) };
  }

  /**
   * Makes a new signing key current; the old ones keep verifying until their tokens have expired,
   * or, with `revokeOld` (the old key may be in other hands), are deleted: every token they
   * signed is refused from then on in every process, and its client must ask for a new one.
   */
  async rotateSigningKey(options: { revokeOld?: boolean } = {}): Promise<{ kid: string }> {
    return withTransaction(this.pool, async (tx) => {
      await q.lockSigningKeys(tx);
      const kid = await this.insertNewSigningKey(tx);
      // The service's clock, which decides when a token expires, also decides when its key retires.
      if (options.revokeOld) await q.deleteSigningKeysExcept(tx, kid);
      else await q.retireSigningKeysExcept(tx, kid, new Date(this.clock() + ROTATION_GRACE_SECONDS * 1000));
      await this.feed.publish(tx, SIGNING_TOPIC, 'all');
      return { kid };
    });
  }

  /**
   * At start: seals the private halves still in plain text, checks that SERVER_SECRET opens the
   * signing key (every process of a deployment needs the same one), and creates the first signing
   * key when there is none.
   */
  async ensureSigningKey(): Promise<void> {
    await withTransaction(this.pool, async (tx) => {
      await q.lockSigningKeys(tx);
      for (const row of await q.listUnsealedSigningKeys(tx))
        await q.sealSigningKey(tx, row.kid, seal(this.sealing, JSON.stringify(row.private_jwk)));
      const current = (await q.listVerifyingSigningKeys(tx)).find((k) => k.retired_at === null);
      if (current) {
        this.privateJwkOf(current);
        return;
      }
      await this.insertNewSigningKey(tx);
      await this.feed.publish(tx, SIGNING_TOPIC, 'all');
    });
  }

  /** The private half of a stored signing key. */
  private privateJwkOf(row: q.SigningKeyRow): JWK {
    if (row.private_jwk) return row.private_jwk;
    try {
      return JSON.parse(unseal(this.sealing, row.private_key_sealed!)) as JWK;
    } catch (err) {
      throw new Error(
        `The signing key ${row.kid} cannot be opened with this SERVER_SECRET: every process of a deployment needs the secret that sealed it (${(err as Error).message})`,
        { cause: err },
      );
    }
  }

  private async insertNewSigningKey(tx: Queryable): Promise<string> {
    const { privateKey, publicKey } = await jose.generateKeyPair('ES256', { extractable: true });
    const kid = crypto.randomBytes(12).toString('base64url');
    const privateJwk = await jose.exportJWK(privateKey);
    const publicJwk = { ...(await jose.exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
    await q.insertSigningKey(tx, { kid, privateKeySealed: seal(this.sealing, JSON.stringify(privateJwk)), publicJwk });
    return kid;
  }

  private async loadSigningKeys(): Promise<SigningKeys> {
    const rows = await q.listVerifyingSigningKeys(this.pool);
    const verifying = new Map<string, VerifyingKey>();
    for (const row of rows) {
      verifying.set(row.kid, {
        kid: row.kid,
        retiredAtMs: row.retired_at?.getTime() ?? null,
        key: (await jose.importJWK(row.public_jwk as jose.JWK, 'ES256')) as jose.CryptoKey,
        publicJwk: row.public_jwk,
      });
    }
    const current = rows.find((r) => r.retired_at === null);
    const signing = current
      ? { kid: current.kid, key: (await jose.importJWK(this.privateJwkOf(current), 'ES256')) as jose.CryptoKey }
      : undefined;
    return { signing, verifying };
  }
}

import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';
import { expect } from 'vitest';
import { serverWithPool, SHOP, TestServer, type Response } from './app.ts';
import { type Account, NO_LIMITS, S } from './consents.ts';
import { loadDefinitions } from '../src/definitions/definitions.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { locate } from '../src/profiles/locate.ts';
import { maySend } from '../src/consents/consents.ts';
import type { AccountScope } from '../src/core/scope.ts';

// What the consents and suppressions tests (src/consents/consents-*.test.ts, suppressions.test.ts)
// share: their server, a connection of its own to its database, their accounts and the requests and
// reads they make.

export let server: TestServer;
/** A connection of its own to the file's database, to read the history and for the few set-ups the API cannot make. */
export let db: pg.Pool;

/** Starts the test file's server and connection, before its tests. */
export function consentsServer(): void {
  serverWithPool({}, (s, d) => {
    server = s;
    db = d;
  });
}

export const ROOT = path.resolve(import.meta.dirname, '..');
export const run = promisify(execFile);

/** SHOP with a third topic, and a second section with a topic of its own. */
export const MANIFEST: Manifest = {
  sections: [
    { ...SHOP.sections![0], topics: [...SHOP.sections![0].topics!, { name: 'Offers' }] },
    { name: 'Club', ecommerce_connected: false, topics: [{ name: 'Club news' }] },
  ],
};

export async function account(manifest: Manifest = MANIFEST): Promise<Account> {
  const { accountId, token } = await server.login(manifest, NO_LIMITS);
  return { accountId, token };
}

export const enc = encodeURIComponent;
export const consentsPath = (ks: string, key: string, section = S) =>
  `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/consents`;

export function expectEmpty(r: Response, status: 201 | 204): void {
  expect(r.status, r.text).toBe(status);
  expect(r.text).toBe('');
}

export async function createProfile(a: Account, ks: string, key: string, section = S): Promise<void> {
  const r = await server.request('POST', `/audience/keyspaces/${ks}/sections/${section}/profiles`, {
    token: a.token,
    body: { profile_key: key },
  });
  expect(r.status, r.text).toBe(201);
}

export async function setAttributes(
  a: Account,
  ks: string,
  key: string,
  section: string,
  values: Record<string, unknown>,
): Promise<void> {
  const r = await server.request(
    'PATCH',
    `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/attributes`,
    {
      token: a.token,
      body: values,
      headers: { 'content-type': 'application/merge-patch+json' },
    },
  );
  expect(r.status, r.text).toBe(204);
}

export function postConsent(
  a: Account,
  ks: string,
  key: string,
  body: Record<string, unknown>,
  section = S,
): Promise<Response> {
  return server.request('POST', consentsPath(ks, key, section), { token: a.token, body });
}

export function getConsents(a: Account, ks: string, key: string, query = '', section = S): Promise<Response> {
  return server.request('GET', consentsPath(ks, key, section) + query, { token: a.token });
}

export function optOutAll(a: Account, ks: string, key: string): Promise<Response> {
  return server.request('DELETE', `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/consents/opt-out-all`, {
    token: a.token,
  });
}

export const consent = (topic: string, channel: string, type: string, extra: Record<string, unknown> = {}) => ({
  topic_discriminator: topic,
  channel_discriminator: channel,
  type,
  reason: 'Asked on the phone',
  ...extra,
});

/** The consents a profile shows in a section, as `topic channel` → type. */
export async function typesOf(a: Account, ks: string, key: string, section = S): Promise<Record<string, string>> {
  const r = await getConsents(a, ks, key, '', section);
  expect(r.status, r.text).toBe(200);
  return Object.fromEntries(
    r.body.items.map((c: any) => [`${c.topic_discriminator} ${c.channel_discriminator}`, c.type]),
  );
}

export async function profileIdOf(a: Account, ks: string, key: string): Promise<string> {
  const { rows } = await db.query<{ profile_id: string }>(
    `select i.profile_id from profile_identifiers i join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
     where i.account_id = $1::bigint and k.discriminator = $2 and i.profile_key = $3`,
    [a.accountId, ks, key],
  );
  expect(rows).toHaveLength(1);
  return rows[0].profile_id;
}

export async function historyOf(a: Account, profileIds: string[]) {
  const { rows } = await db.query<{
    profile_id: string;
    topic: string;
    channel: string;
    type: string;
    reason: string;
    source: string;
    address: string | null;
    changed_at: Date;
  }>(
    `select h.profile_id, t.discriminator as topic, c.discriminator as channel, h.type, h.reason, h.source, h.address, h.changed_at
     from consent_history h
     join topics t on t.account_id = h.account_id and t.topic_id = h.topic_id
     join channels c on c.account_id = h.account_id and c.channel_id = h.channel_id
     where h.account_id = $1::bigint and h.profile_id = any($2::bigint[]) order by h.changed_at, t.discriminator, c.discriminator`,
    [a.accountId, profileIds],
  );
  return rows;
}

export async function consentRowCount(a: Account): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select count(*)::int as n from consents where account_id = $1::bigint',
    [a.accountId],
  );
  return rows[0].n;
}

/**
 * Stores a consent of a type the API cannot set (pending-opt-in, confirmed-opt-in), as an import
 * or the operator would. Test set-up only: no route writes these types.
 */
export async function storeConsentDirectly(
  a: Account,
  ks: string,
  key: string,
  section: string,
  topic: string,
  channel: string,
  type: string,
  address: string,
): Promise<void> {
  const defs = await loadDefinitions(db, a.accountId);
  const s = defs.sections.find((x) => x.discriminator === section)!;
  const t = s.topics.find((x) => x.discriminator === topic)!;
  const c = defs.channels.find((x) => x.discriminator === channel)!;
  await db.query(
    `insert into consents (account_id, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at)
     values ($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint, $6, 'Imported', 'Import', $7, $8)`,
    [
      a.accountId,
      await profileIdOf(a, ks, key),
      t.topic_id,
      c.channel_id,
      s.id,
      type,
      address,
      new Date(server.clock.now),
    ],
  );
}

export function suppress(a: Account, channel: string, address: string, reason = 'Hard bounce'): Promise<Response> {
  return server.admin('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
    channel_discriminator: channel,
    address,
    reason,
  });
}

export async function scopeOf(a: Account): Promise<AccountScope> {
  const pool = server.services.pool;
  return {
    accountId: a.accountId,
    defs: await loadDefinitions(pool, a.accountId),
    limits: (await server.services.accounts.get(a.accountId))!.limits,
    secret: server.services.serverSecret,
    now: new Date(server.clock.now),
  };
}

export async function may(a: Account, ks: string, key: string, topic: string, channel: string): Promise<boolean> {
  const pool = server.services.pool;
  const scope = await scopeOf(a);
  const { canonicalId } = await locate(pool, scope, { keyspace_discriminator: ks, profile_key: key });
  return maySend(pool, scope, canonicalId, { topic_discriminator: topic, channel_discriminator: channel });
}

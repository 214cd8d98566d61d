import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { serverWithPool, SHOP, TestServer, type Response, expectProblem } from '../../test/app.ts';
import {
  type Account,
  CLUB,
  CLUB_NEWS,
  CRM,
  EMAIL,
  EMAIL_ATTR,
  EMAIL_CH,
  EXPORT,
  MOBILE,
  MOBILE_ATTR,
  NO_LIMITS,
  NS,
  OFFERS,
  S,
  SMS_CH,
  SMS_OFFERS,
  WEB,
  WEB_CH,
  WEEKLY,
} from '../../test/consents.ts';
import { loadDefinitions } from '../definitions/definitions.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { locate } from '../profiles/profiles.ts';
import { maySend } from './consents.ts';
import type { AccountScope } from '../core/scope.ts';

/**
 * Consents and suppressions through real HTTP against a real database (CHECKLIST "Consents and
 * suppression", CONS-01..25, with ERR-07, COMP-12 for consent_types and PROF-11 for consents).
 */

let server: TestServer;
/** A connection of its own to this file's database, to read the history and for the few set-ups the API cannot make. */
let db: pg.Pool;
serverWithPool({}, (s, d) => {
  server = s;
  db = d;
});

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);

/** SHOP with a third topic, and a second section with a topic of its own. */
const MANIFEST: Manifest = {
  sections: [
    { ...SHOP.sections![0], topics: [...SHOP.sections![0].topics!, { name: 'Offers' }] },
    { name: 'Club', ecommerce_connected: false, topics: [{ name: 'Club news' }] },
  ],
};

async function account(manifest: Manifest = MANIFEST): Promise<Account> {
  const { accountId, token } = await server.login(manifest, NO_LIMITS);
  return { accountId, token };
}

const enc = encodeURIComponent;
const consentsPath = (ks: string, key: string, section = S) =>
  `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/consents`;

function expectEmpty(r: Response, status: 201 | 204): void {
  expect(r.status, r.text).toBe(status);
  expect(r.text).toBe('');
}

async function createProfile(a: Account, ks: string, key: string, section = S): Promise<void> {
  const r = await server.request('POST', `/audience/keyspaces/${ks}/sections/${section}/profiles`, {
    token: a.token,
    body: { profile_key: key },
  });
  expect(r.status, r.text).toBe(201);
}

async function setAttributes(
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

function postConsent(
  a: Account,
  ks: string,
  key: string,
  body: Record<string, unknown>,
  section = S,
): Promise<Response> {
  return server.request('POST', consentsPath(ks, key, section), { token: a.token, body });
}

function getConsents(a: Account, ks: string, key: string, query = '', section = S): Promise<Response> {
  return server.request('GET', consentsPath(ks, key, section) + query, { token: a.token });
}

function optOutAll(a: Account, ks: string, key: string): Promise<Response> {
  return server.request('DELETE', `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/consents/opt-out-all`, {
    token: a.token,
  });
}

const consent = (topic: string, channel: string, type: string, extra: Record<string, unknown> = {}) => ({
  topic_discriminator: topic,
  channel_discriminator: channel,
  type,
  reason: 'Asked on the phone',
  ...extra,
});

/** The consents a profile shows in a section, as `topic channel` → type. */
async function typesOf(a: Account, ks: string, key: string, section = S): Promise<Record<string, string>> {
  const r = await getConsents(a, ks, key, '', section);
  expect(r.status, r.text).toBe(200);
  return Object.fromEntries(
    r.body.items.map((c: any) => [`${c.topic_discriminator} ${c.channel_discriminator}`, c.type]),
  );
}

async function profileIdOf(a: Account, ks: string, key: string): Promise<string> {
  const { rows } = await db.query<{ profile_id: string }>(
    `select i.profile_id from profile_identifiers i join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
     where i.account_id = $1::bigint and k.discriminator = $2 and i.profile_key = $3`,
    [a.accountId, ks, key],
  );
  expect(rows).toHaveLength(1);
  return rows[0].profile_id;
}

async function historyOf(a: Account, profileIds: string[]) {
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

async function consentRowCount(a: Account): Promise<number> {
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
async function storeConsentDirectly(
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

function suppress(a: Account, channel: string, address: string, reason = 'Hard bounce'): Promise<Response> {
  return server.admin('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
    channel_discriminator: channel,
    address,
    reason,
  });
}

async function scopeOf(a: Account): Promise<AccountScope> {
  const pool = server.services.pool;
  return {
    accountId: a.accountId,
    defs: await loadDefinitions(pool, a.accountId),
    limits: (await server.services.accounts.get(a.accountId))!.limits,
    secret: server.services.serverSecret,
    now: new Date(server.clock.now),
  };
}

async function may(a: Account, ks: string, key: string, topic: string, channel: string): Promise<boolean> {
  const pool = server.services.pool;
  const scope = await scopeOf(a);
  const { canonicalId } = await locate(pool, scope, { keyspace_discriminator: ks, profile_key: key });
  return maySend(pool, scope, canonicalId, { topic_discriminator: topic, channel_discriminator: channel });
}

describe('create consent', () => {
  it('CONS-01: a new consent answers 201 with an empty body and exists with the requested type', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });

    await createProfile(a, EMAIL, 'bob@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'bob@example.com', consent(OFFERS, EMAIL_CH, 'opt-out')), 201);
    expect(await typesOf(a, EMAIL, 'bob@example.com')).toEqual({ [`${OFFERS} ${EMAIL_CH}`]: 'opt-out' });
  });

  it('CONS-02: a supported move answers 204 and changes the type (opt-in ↔ opt-out)', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    server.clock.advance(1000);
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-out', { reason: 'Unsubscribed' })),
      204,
    );
    let r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.body.items).toEqual([
      expect.objectContaining({
        type: 'opt-out',
        reason: 'Unsubscribed',
        modified_at: new Date(server.clock.now).toISOString(),
      }),
    ]);
    server.clock.advance(1000);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 204);
    r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.body.items).toEqual([expect.objectContaining({ type: 'opt-in' })]);
  });

  it('CONS-03: requesting the type the consent already has answers 409 and changes nothing', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Signed up', source: 'Web form' }),
      ),
      201,
    );
    const before = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    server.clock.advance(1000);
    const r = await postConsent(
      a,
      EMAIL,
      'ann@example.com',
      consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Again', source: 'Other form' }),
    );
    expectProblem(r, 409, 'AUD-1605');
    expect(r.body.status).toBe(409);
    expect((await getConsents(a, EMAIL, 'ann@example.com')).body.items).toEqual(before);
    expect(await historyOf(a, [await profileIdOf(a, EMAIL, 'ann@example.com')])).toHaveLength(1);

    // The same for opt-out → opt-out.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-out')), 201);
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-out')),
      409,
      'AUD-1605',
    );
  });

  it('CONS-04: pending-opt-in over a stored pending-opt-in answers 409 "already pending"; a stored pending consent can move to opt-in', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    // Set-up through the database: the API cannot store pending-opt-in (an import or the operator does).
    await storeConsentDirectly(a, EMAIL, 'ann@example.com', S, WEEKLY, EMAIL_CH, 'pending-opt-in', 'ann@example.com');
    const before = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    expect(before).toEqual([
      expect.objectContaining({
        topic_discriminator: WEEKLY,
        channel_discriminator: EMAIL_CH,
        type: 'pending-opt-in',
        reason: 'Imported',
        source: 'Import',
      }),
    ]);
    server.clock.advance(1000);

    const r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'pending-opt-in'));
    expectProblem(r, 409, 'AUD-1604');
    expect(r.body.title).toBe('Current consent state already pending');
    expect((await getConsents(a, EMAIL, 'ann@example.com')).body.items).toEqual(before);

    // confirmed-opt-in is still not requestable through the API (CONS-06) …
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'confirmed-opt-in')),
      400,
      'AUD-1603',
    );
    expect((await getConsents(a, EMAIL, 'ann@example.com')).body.items).toEqual(before);
    // … but opt-in is a supported move from pending.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 204);
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
  });

  it('CONS-05: topic_discriminator, channel_discriminator, type and reason are required (400)', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    const full = consent(WEEKLY, EMAIL_CH, 'opt-in');
    for (const field of ['topic_discriminator', 'channel_discriminator', 'type', 'reason'] as const) {
      const body: Record<string, unknown> = { ...full };
      delete body[field];
      const r = await postConsent(a, EMAIL, 'ann@example.com', body);
      expectProblem(r, 400);
      expect(r.body.detail).toContain(field);
    }
    expect(await consentRowCount(a)).toBe(0);
  });

  it('CONS-06: an unknown type answers 400 "consent state value unsupported"; pending-opt-in and confirmed-opt-in are not supported yet (400)', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    for (const type of ['opt-maybe', 'OPT-IN', '']) {
      const r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, type));
      expectProblem(r, 400, 'AUD-1602');
      expect(r.body.title).toBe('Consent state value unsupported');
    }
    for (const type of ['pending-opt-in', 'confirmed-opt-in']) {
      const r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, type));
      expectProblem(r, 400, 'AUD-1603');
      expect(r.body.detail).toContain('not supported');
    }
    // Also over an existing opt-in.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'pending-opt-in')),
      400,
      'AUD-1603',
    );
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'confirmed-opt-in')),
      400,
      'AUD-1603',
    );
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
  });

  it('CONS-07: reason must be 3 to 256 characters', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    for (const reason of ['', 'ab', 'x'.repeat(257)]) {
      const r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { reason }));
      expectProblem(r, 400);
      expect(r.body.detail).toContain('reason');
    }
    expect(await consentRowCount(a)).toBe(0);
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'abc' })),
      201,
    );
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-in', { reason: 'r'.repeat(256) })),
      201,
    );
    const items = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    expect(items.map((c: any) => c.reason).sort()).toEqual(['abc', 'r'.repeat(256)]);
  });

  it('CONS-08: a given source must be 3 to 256 characters', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    for (const source of ['', 'ab', 's'.repeat(257)]) {
      const r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { source }));
      expectProblem(r, 400);
      expect(r.body.detail).toContain('source');
    }
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { source: null })),
      400,
    );
    expect(await consentRowCount(a)).toBe(0);
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { source: 'CRM' })),
      201,
    );
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-in', { source: 's'.repeat(256) })),
      201,
    );
    const items = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    expect(items.map((c: any) => c.source).sort()).toEqual(['CRM', 's'.repeat(256)]);
  });

  it('CONS-09: an omitted source is stored and returned as "One API"', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect((await getConsents(a, EMAIL, 'ann@example.com')).body.items[0].source).toBe('One API');
    const history = await historyOf(a, [await profileIdOf(a, EMAIL, 'ann@example.com')]);
    expect(history.map((h) => h.source)).toEqual(['One API']);
  });

  it('CONS-10: consents are kept per topic and channel: changing one leaves the others', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', S, { [MOBILE_ATTR]: '+4741234567' });
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, SMS_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(SMS_OFFERS, SMS_CH, 'opt-in')), 201);
    const before = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    server.clock.advance(1000);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, SMS_CH, 'opt-out')), 204);
    const after = (await getConsents(a, EMAIL, 'ann@example.com')).body.items;
    const key = (c: any) => `${c.topic_discriminator} ${c.channel_discriminator}`;
    expect(after).toHaveLength(4);
    for (const c of after) {
      if (key(c) === `${WEEKLY} ${SMS_CH}`) expect(c.type).toBe('opt-out');
      else expect(c).toEqual(before.find((b: any) => key(b) === key(c)));
    }
  });

  it('CONS-11 / ERR-07: no address for the channel in the topic\'s section answers 400 "No address to consent" AUD-1601', async () => {
    const a = await account();
    // Keyed by CRM id: no email and no mobile anywhere.
    await createProfile(a, CRM, 'crm-1');
    for (const [topic, channel] of [
      [WEEKLY, EMAIL_CH],
      [SMS_OFFERS, SMS_CH],
    ]) {
      const r = await postConsent(a, CRM, 'crm-1', consent(topic, channel, 'opt-in'));
      expectProblem(r, 400, 'AUD-1601');
      expect(r.body.title).toBe('No address to consent');
      expect(r.body.type).toMatch(/AUD-1601$/);
    }
    // An email in the shop section is no address for a topic of the club section.
    await createProfile(a, EMAIL, 'ann@example.com');
    const r = await postConsent(a, EMAIL, 'ann@example.com', consent(CLUB_NEWS, EMAIL_CH, 'opt-in'), CLUB);
    expectProblem(r, 400, 'AUD-1601');
    expect(r.body.title).toBe('No address to consent');
    // An email profile has no mobile to consent on SMS with.
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(SMS_OFFERS, SMS_CH, 'opt-in')),
      400,
      'AUD-1601',
    );
    expect(await consentRowCount(a)).toBe(0);
    // Once the address is there, the consent is taken.
    await setAttributes(a, EMAIL, 'ann@example.com', CLUB, { [EMAIL_ATTR]: 'ann@example.com' });
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(CLUB_NEWS, EMAIL_CH, 'opt-in'), CLUB), 201);
    await setAttributes(a, CRM, 'crm-1', S, { [MOBILE_ATTR]: '+4741234567' });
    expectEmpty(await postConsent(a, CRM, 'crm-1', consent(SMS_OFFERS, SMS_CH, 'opt-in')), 201);
  });

  it('CONS-12: a channel-specific topic with another channel answers 400 "topic channel differs"', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    const r = await postConsent(a, EMAIL, 'ann@example.com', consent(SMS_OFFERS, EMAIL_CH, 'opt-in'));
    expectProblem(r, 400, 'AUD-1606');
    expect(r.body.title).toBe('Topic channel differs from the channel in the request');
    expect(await consentRowCount(a)).toBe(0);
  });

  it('CONS-13: an unknown channel answers 400 "channel ID not found"; a channel without addresses 400 "communication type invalid"', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    let r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, `${NS}.channels.fax`, 'opt-in'));
    expectProblem(r, 400, 'AUD-1607');
    expect(r.body.title).toBe('Channel ID not found');
    r = await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, WEB_CH, 'opt-in'));
    expectProblem(r, 400, 'AUD-1608');
    expect(r.body.title).toBe('Communication type invalid for channel');
    expect(await consentRowCount(a)).toBe(0);
  });

  it('answers 400 for an unknown topic or a topic of another section, 404 for an unknown section or keyspace', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(`${NS}.topics.user-created.nothing`, EMAIL_CH, 'opt-in')),
      400,
      'AUD-1610',
    );
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(CLUB_NEWS, EMAIL_CH, 'opt-in')),
      400,
      'AUD-1610',
    );
    expectProblem(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-in'),
        `${NS}.sections.user-created.nothing`,
      ),
      404,
      'AUD-1102',
    );
    expectProblem(
      await postConsent(a, `${NS}.keyspaces.nothing`, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')),
      404,
      'AUD-1101',
    );
    expect(await consentRowCount(a)).toBe(0);
  });

  it('CONS-14: consents cannot be managed through a keyspace without manage_subscriptions (403)', async () => {
    const a = await account();
    const keyspaces = (await server.request('GET', '/audience/keyspaces', { token: a.token })).body.items;
    expect(keyspaces.find((k: any) => k.discriminator === WEB).manage_subscriptions).toBe(false);
    await createProfile(a, EMAIL, 'ann@example.com');
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token: a.token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
          { keyspace_discriminator: WEB, profile_key: 'cookie-1' },
        ],
      },
    });
    expect(merged.status, merged.text).toBe(204);
    const r = await postConsent(a, WEB, 'cookie-1', consent(WEEKLY, EMAIL_CH, 'opt-in'));
    expectProblem(r, 403, 'AUD-1609');
    expect(await consentRowCount(a)).toBe(0);
    // The same profile through its email key can.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectProblem(await optOutAll(a, WEB, 'cookie-1'), 403, 'AUD-1609');
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });

    // An integration keyspace of the account's own, without manage_subscriptions.
    const b = await account({
      ...MANIFEST,
      keyspaces: [
        {
          discriminator: 'com.{vendor}1.integrations.keyspaces.5f2b9c1e.shop',
          name: 'Shop id',
          manage_subscriptions: false,
          mapped_attribute: 'com.{vendor}1.attributes.email',
        },
      ],
    });
    const own = `${NS}.integrations.keyspaces.5f2b9c1e.shop`;
    await createProfile(b, own, 'shop-1');
    expectProblem(await postConsent(b, own, 'shop-1', consent(WEEKLY, EMAIL_CH, 'opt-in')), 403, 'AUD-1609');
  });

  it('CONS-15: a consent for an unknown profile answers 404 and creates nothing', async () => {
    const a = await account();
    const r = await postConsent(a, EMAIL, 'nobody@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in'));
    expectProblem(r, 404, 'AUD-1201');
    expect(await consentRowCount(a)).toBe(0);
    expectProblem(
      await server.request(
        'GET',
        `/audience/keyspaces/${EMAIL}/profiles/nobody%40example.com/sections/${S}/attributes`,
        { token: a.token },
      ),
      404,
      'AUD-1201',
    );
    expectProblem(await getConsents(a, EMAIL, 'nobody@example.com'), 404, 'AUD-1201');
  });

  it("CONS-16: a consent for a locked profile's identifier is refused with 410 AUD-1202", async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', S, { [MOBILE_ATTR]: '+4741234567' });
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token: a.token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
          { keyspace_discriminator: MOBILE, profile_key: '+4741234567' },
        ],
      },
    });
    expect(merged.status, merged.text).toBe(204);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    const locked = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/locks`, {
      token: a.token,
    });
    expect(locked.status, locked.text).toBe(204);
    for (const [ks, key] of [
      [EMAIL, 'ann@example.com'],
      [MOBILE, '+4741234567'],
    ]) {
      const r = await postConsent(a, ks, key, consent(WEEKLY, EMAIL_CH, 'opt-in'));
      expectProblem(r, 410, 'AUD-1202');
      expect(r.body.title).toBe('Profile locked');
      expectProblem(await optOutAll(a, ks, key), 410, 'AUD-1202');
    }
    // The lock deleted the profile's consents, and the refused opt-in made none.
    expect(await consentRowCount(a)).toBe(0);
  });

  it('CONS-16: an opt-in for an address that is a locked identity is refused (410), even on another profile', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    const locked = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/locks`, {
      token: a.token,
    });
    expect(locked.status, locked.text).toBe(204);
    // A profile keyed otherwise that carries the locked address in its email attribute.
    await createProfile(a, CRM, 'crm-1');
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: 'Ann@Example.com' });
    const r = await postConsent(a, CRM, 'crm-1', consent(WEEKLY, EMAIL_CH, 'opt-in'));
    expectProblem(r, 410, 'AUD-1202');
    expect(await consentRowCount(a)).toBe(0);
    // Opting out is not refused, and another address is fine.
    expectEmpty(await postConsent(a, CRM, 'crm-1', consent(OFFERS, EMAIL_CH, 'opt-out')), 201);
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: 'carl@example.com' });
    expectEmpty(await postConsent(a, CRM, 'crm-1', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
  });

  it('PROF-11: through the export keyspace consents can be read but not written (403 AUD-1203)', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    const { rows } = await db.query<{ export_key: string }>(
      'select export_key from profiles where account_id = $1::bigint and profile_id = $2::bigint',
      [a.accountId, await profileIdOf(a, EMAIL, 'ann@example.com')],
    );
    const exportKey = rows[0].export_key;
    expect(await typesOf(a, EXPORT, exportKey)).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
    expectProblem(await postConsent(a, EXPORT, exportKey, consent(WEEKLY, EMAIL_CH, 'opt-out')), 403, 'AUD-1203');
    expectProblem(await optOutAll(a, EXPORT, exportKey), 403, 'AUD-1203');
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
  });
});

describe('get consents', () => {
  it("CONS-17: answers 200 {items, suppression}; items are the consents on the section's topics, with every field", async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', CLUB, { [EMAIL_ATTR]: 'ann@example.com' });
    let r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ items: [], suppression: [] });

    const created = new Date(server.clock.now).toISOString();
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Signed up', source: 'Web form' }),
      ),
      201,
    );
    server.clock.advance(60_000);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(CLUB_NEWS, EMAIL_CH, 'opt-in'), CLUB), 201);
    r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toEqual({
      items: [
        {
          topic_discriminator: WEEKLY,
          channel_discriminator: EMAIL_CH,
          type: 'opt-in',
          reason: 'Signed up',
          source: 'Web form',
          modified_at: created,
        },
      ],
      suppression: [],
    });
    expect(r.body.items[0].modified_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    // The club section shows only its own topic's consent.
    r = await getConsents(a, EMAIL, 'ann@example.com', '', CLUB);
    expect(r.body.items).toEqual([
      expect.objectContaining({
        topic_discriminator: CLUB_NEWS,
        modified_at: new Date(server.clock.now).toISOString(),
      }),
    ]);
    expectProblem(
      await getConsents(a, EMAIL, 'ann@example.com', '', `${NS}.sections.user-created.nothing`),
      404,
      'AUD-1102',
    );
    expectProblem(await getConsents(a, `${NS}.keyspaces.nothing`, 'ann@example.com'), 404, 'AUD-1101');
  });

  it('CONS-18 / COMP-12: consent_types filters, comma-separated or repeated; without it all types; an unknown type is 400', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', S, { [MOBILE_ATTR]: '+4741234567' });
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-out')), 201);
    // Set-up through the database: the API cannot store pending-opt-in.
    await storeConsentDirectly(a, EMAIL, 'ann@example.com', S, SMS_OFFERS, SMS_CH, 'pending-opt-in', '+4741234567');
    const topics = async (query: string) => {
      const r = await getConsents(a, EMAIL, 'ann@example.com', query);
      expect(r.status, r.text).toBe(200);
      return r.body.items.map((c: any) => c.topic_discriminator).sort();
    };
    expect(await topics('')).toEqual([OFFERS, SMS_OFFERS, WEEKLY]);
    expect(await topics('?consent_types=opt-in')).toEqual([WEEKLY]);
    expect(await topics('?consent_types=pending-opt-in')).toEqual([SMS_OFFERS]);
    expect(await topics('?consent_types=confirmed-opt-in')).toEqual([]);
    expect(await topics('?consent_types=opt-in,opt-out')).toEqual([OFFERS, WEEKLY]);
    expect(await topics('?consent_types=opt-in&consent_types=opt-out')).toEqual([OFFERS, WEEKLY]);
    expect(await topics('?consent_types=opt-in%2Copt-out')).toEqual([OFFERS, WEEKLY]);
    expect(await topics('?consent_types=opt-in,pending-opt-in&consent_types=opt-out')).toEqual([
      OFFERS,
      SMS_OFFERS,
      WEEKLY,
    ]);
    expect(await topics('?consent_types=')).toEqual([OFFERS, SMS_OFFERS, WEEKLY]);
    for (const query of [
      '?consent_types=opt-maybe',
      '?consent_types=opt-in,opt-maybe',
      '?consent_types=opt-in&consent_types=nope',
    ]) {
      expectProblem(await getConsents(a, EMAIL, 'ann@example.com', query), 400, 'AUD-1602');
    }
  });

  it('CONS-19 / CONS-21: suppression always holds the suppression of the address used as profile key, as {channel_discriminator, address, reason}', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await createProfile(a, MOBILE, '+4741234567');
    await createProfile(a, CRM, 'crm-1');
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: 'carl@example.com' });
    expect((await suppress(a, EMAIL_CH, 'ann@example.com', 'Hard bounce')).status).toBe(204);
    expect((await suppress(a, SMS_CH, '+4741234567', 'Number recycled')).status).toBe(204);
    expect((await suppress(a, EMAIL_CH, 'carl@example.com', 'Spam complaint')).status).toBe(204);

    let r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.status, r.text).toBe(200);
    expect(r.body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
    ]);
    // Also with a consent_types filter and when the key is written differently.
    r = await getConsents(a, EMAIL, 'Ann@Example.COM', '?consent_types=opt-in');
    expect(r.body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
    ]);
    r = await getConsents(a, MOBILE, '+4741234567');
    expect(r.body.suppression).toEqual([
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    expect(Object.keys(r.body.suppression[0]).sort()).toEqual(['address', 'channel_discriminator', 'reason']);
    // A CRM id is no address: nothing is reported without asking for another address.
    r = await getConsents(a, CRM, 'crm-1');
    expect(r.body.suppression).toEqual([]);
    // Lifted: gone.
    expect(
      (await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ann%40example.com`))
        .status,
    ).toBe(204);
    r = await getConsents(a, EMAIL, 'ann@example.com');
    expect(r.body.suppression).toEqual([]);
  });

  it('CONS-20: suppression_channel_discriminator with suppression_address checks another address; only one of them is 400', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expect((await suppress(a, EMAIL_CH, 'ann@example.com')).status).toBe(204);
    expect((await suppress(a, EMAIL_CH, 'other@example.com', 'Unsubscribed everywhere')).status).toBe(204);
    expect((await suppress(a, SMS_CH, '+4741234567', 'Number recycled')).status).toBe(204);

    let r = await getConsents(
      a,
      EMAIL,
      'ann@example.com',
      `?suppression_channel_discriminator=${EMAIL_CH}&suppression_address=Other%40Example.com`,
    );
    expect(r.status, r.text).toBe(200);
    expect(r.body.suppression).toEqual(
      expect.arrayContaining([
        { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
        { channel_discriminator: EMAIL_CH, address: 'other@example.com', reason: 'Unsubscribed everywhere' },
      ]),
    );
    expect(r.body.suppression).toHaveLength(2);
    r = await getConsents(
      a,
      EMAIL,
      'ann@example.com',
      `?suppression_channel_discriminator=${SMS_CH}&suppression_address=${enc('+4741234567')}`,
    );
    expect(r.body.suppression).toHaveLength(2);
    expect(r.body.suppression).toContainEqual({
      channel_discriminator: SMS_CH,
      address: '+4741234567',
      reason: 'Number recycled',
    });
    // An address that is not suppressed adds nothing.
    r = await getConsents(
      a,
      EMAIL,
      'ann@example.com',
      `?suppression_channel_discriminator=${EMAIL_CH}&suppression_address=free%40example.com`,
    );
    expect(r.body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
    ]);
    // The address on another channel is another suppression.
    r = await getConsents(
      a,
      EMAIL,
      'ann@example.com',
      `?suppression_channel_discriminator=${SMS_CH}&suppression_address=${enc('+4799999999')}`,
    );
    expect(r.body.suppression).toHaveLength(1);

    for (const query of [
      `?suppression_channel_discriminator=${EMAIL_CH}`,
      '?suppression_address=other%40example.com',
    ]) {
      const bad = await getConsents(a, EMAIL, 'ann@example.com', query);
      expectProblem(bad, 400, 'AUD-1611');
    }
    expectProblem(
      await getConsents(
        a,
        EMAIL,
        'ann@example.com',
        `?suppression_channel_discriminator=${NS}.channels.fax&suppression_address=x%40example.com`,
      ),
      400,
      'AUD-1607',
    );
    expectProblem(
      await getConsents(
        a,
        EMAIL,
        'ann@example.com',
        `?suppression_channel_discriminator=${EMAIL_CH}&suppression_address=not-an-address`,
      ),
      400,
    );
  });

  it('CONS-22: suppression is per address: every profile carrying the address on the channel is suppressed', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'shared@example.com');
    await createProfile(a, CRM, 'crm-1');
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: 'shared@example.com' });
    for (const [ks, key] of [
      [EMAIL, 'shared@example.com'],
      [CRM, 'crm-1'],
    ]) {
      expectEmpty(await postConsent(a, ks, key, consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
      expect(await may(a, ks, key, WEEKLY, EMAIL_CH)).toBe(true);
    }
    expect((await suppress(a, EMAIL_CH, 'shared@example.com')).status).toBe(204);
    for (const [ks, key] of [
      [EMAIL, 'shared@example.com'],
      [CRM, 'crm-1'],
    ]) {
      expect(await may(a, ks, key, WEEKLY, EMAIL_CH)).toBe(false);
      // The consent itself is kept: suppression is not a consent change.
      expect(await typesOf(a, ks, key)).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
    }
    // The address as the profile holds it need not be written as the suppression is.
    await createProfile(a, CRM, 'crm-2');
    await setAttributes(a, CRM, 'crm-2', S, { [EMAIL_ATTR]: 'Shared@Example.COM' });
    expectEmpty(await postConsent(a, CRM, 'crm-2', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect(await may(a, CRM, 'crm-2', WEEKLY, EMAIL_CH)).toBe(false);
    const r = await getConsents(
      a,
      CRM,
      'crm-1',
      `?suppression_channel_discriminator=${EMAIL_CH}&suppression_address=shared%40example.com`,
    );
    expect(r.body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'shared@example.com', reason: 'Hard bounce' },
    ]);
    // Suppressed on email is not suppressed on SMS.
    await setAttributes(a, CRM, 'crm-1', S, { [MOBILE_ATTR]: '+4741234567' });
    expectEmpty(await postConsent(a, CRM, 'crm-1', consent(SMS_OFFERS, SMS_CH, 'opt-in')), 201);
    expect(await may(a, CRM, 'crm-1', SMS_OFFERS, SMS_CH)).toBe(true);
  });
});

describe('may send (SPEC §2.11)', () => {
  it('CONS-23: subscribed only with an opt-in or confirmed-opt-in and an address that is not suppressed; suppression wins', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', S, { [MOBILE_ATTR]: '+4741234567' });
    // No consent.
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(false);
    // Opt-in.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(true);
    // The opt-in is for one topic and one channel.
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, SMS_CH)).toBe(false);
    expect(await may(a, EMAIL, 'ann@example.com', OFFERS, EMAIL_CH)).toBe(false);
    // Opt-in, but the address is suppressed.
    expect((await suppress(a, EMAIL_CH, 'ANN@example.com')).status).toBe(204);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(false);
    expect(
      (await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ann%40example.com`))
        .status,
    ).toBe(204);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(true);
    // Opt-out.
    server.clock.advance(1000);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-out')), 204);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(false);
    // Set-up through the database: the API cannot store confirmed-opt-in or pending-opt-in.
    await storeConsentDirectly(a, EMAIL, 'ann@example.com', S, OFFERS, EMAIL_CH, 'confirmed-opt-in', 'ann@example.com');
    await storeConsentDirectly(a, EMAIL, 'ann@example.com', S, SMS_OFFERS, SMS_CH, 'pending-opt-in', '+4741234567');
    expect(await may(a, EMAIL, 'ann@example.com', OFFERS, EMAIL_CH)).toBe(true);
    expect(await may(a, EMAIL, 'ann@example.com', SMS_OFFERS, SMS_CH)).toBe(false);
    expect((await suppress(a, EMAIL_CH, 'ann@example.com')).status).toBe(204);
    expect(await may(a, EMAIL, 'ann@example.com', OFFERS, EMAIL_CH)).toBe(false);
    // SMS: opt-in on the mobile address, then that number suppressed.
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, SMS_CH, 'opt-in')), 201);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, SMS_CH)).toBe(true);
    expect((await suppress(a, SMS_CH, '+47 412 34 567')).status).toBe(204);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, SMS_CH)).toBe(false);
    // Unknown topic or channel: never.
    expect(await may(a, EMAIL, 'ann@example.com', `${NS}.topics.user-created.nothing`, EMAIL_CH)).toBe(false);
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, `${NS}.channels.fax`)).toBe(false);
  });

  it('CONS-23: a topic discriminator used in two sections is decided in the section asked for', async () => {
    const a = await account({
      sections: [
        { name: 'Shop', ecommerce_connected: false, topics: [{ name: 'News' }] },
        { name: 'Club', ecommerce_connected: false, topics: [{ name: 'News' }] },
      ],
    });
    const NEWS = `${NS}.topics.user-created.news`;
    await createProfile(a, EMAIL, 'ann@example.com', CLUB);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(NEWS, EMAIL_CH, 'opt-in'), CLUB), 201);
    expect(await typesOf(a, EMAIL, 'ann@example.com', S)).toEqual({});
    const pool = server.services.pool;
    const scope = await scopeOf(a);
    const { canonicalId } = await locate(pool, scope, {
      keyspace_discriminator: EMAIL,
      profile_key: 'ann@example.com',
    });
    const newsByEmail = { topic_discriminator: NEWS, channel_discriminator: EMAIL_CH };
    expect(await maySend(pool, scope, canonicalId, { ...newsByEmail, section_discriminator: CLUB })).toBe(true);
    expect(await maySend(pool, scope, canonicalId, { ...newsByEmail, section_discriminator: S })).toBe(false);
    // Without a section: any section's topic of that discriminator.
    expect(await maySend(pool, scope, canonicalId, newsByEmail)).toBe(true);
    expect(
      await maySend(pool, scope, canonicalId, {
        ...newsByEmail,
        section_discriminator: `${NS}.sections.user-created.nothing`,
      }),
    ).toBe(false);
  });

  it('CONS-23: an opt-in whose address was removed from the profile no longer permits sending', async () => {
    const a = await account();
    await createProfile(a, CRM, 'crm-1');
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: 'carl@example.com' });
    expectEmpty(await postConsent(a, CRM, 'crm-1', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect(await may(a, CRM, 'crm-1', WEEKLY, EMAIL_CH)).toBe(true);
    await setAttributes(a, CRM, 'crm-1', S, { [EMAIL_ATTR]: null });
    expect(await may(a, CRM, 'crm-1', WEEKLY, EMAIL_CH)).toBe(false);
  });
});

describe('opt-out-all', () => {
  it('CONS-24: every opt-in and confirmed-opt-in, in every topic, channel and section, becomes opt-out; the rest is unchanged', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', S, { [MOBILE_ATTR]: '+4741234567' });
    await setAttributes(a, EMAIL, 'ann@example.com', CLUB, { [EMAIL_ATTR]: 'ann@example.com' });
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, SMS_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(CLUB_NEWS, EMAIL_CH, 'opt-in'), CLUB), 201);
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(OFFERS, EMAIL_CH, 'opt-out', { reason: 'Too many' })),
      201,
    );
    // Set-up through the database: the API cannot store confirmed-opt-in or pending-opt-in.
    await storeConsentDirectly(a, EMAIL, 'ann@example.com', S, SMS_OFFERS, SMS_CH, 'confirmed-opt-in', '+4741234567');
    await createProfile(a, EMAIL, 'bob@example.com');
    await storeConsentDirectly(a, EMAIL, 'bob@example.com', S, WEEKLY, EMAIL_CH, 'pending-opt-in', 'bob@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'bob@example.com', consent(OFFERS, EMAIL_CH, 'opt-in')), 201);
    const offersBefore = (await getConsents(a, EMAIL, 'ann@example.com')).body.items.find(
      (c: any) => c.topic_discriminator === OFFERS,
    );

    server.clock.advance(60_000);
    const r = await optOutAll(a, EMAIL, 'ann@example.com');
    expectEmpty(r, 204);
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({
      [`${WEEKLY} ${EMAIL_CH}`]: 'opt-out',
      [`${WEEKLY} ${SMS_CH}`]: 'opt-out',
      [`${OFFERS} ${EMAIL_CH}`]: 'opt-out',
      [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-out',
    });
    expect(await typesOf(a, EMAIL, 'ann@example.com', CLUB)).toEqual({ [`${CLUB_NEWS} ${EMAIL_CH}`]: 'opt-out' });
    // The opt-out that was there is untouched (same reason and time).
    expect(
      (await getConsents(a, EMAIL, 'ann@example.com')).body.items.find((c: any) => c.topic_discriminator === OFFERS),
    ).toEqual(offersBefore);
    const changed = (await getConsents(a, EMAIL, 'ann@example.com')).body.items.find(
      (c: any) => c.topic_discriminator === WEEKLY,
    );
    expect(changed.modified_at).toBe(new Date(server.clock.now).toISOString());
    // Another profile is untouched, pending-opt-in included.
    expect(await typesOf(a, EMAIL, 'bob@example.com')).toEqual({
      [`${WEEKLY} ${EMAIL_CH}`]: 'pending-opt-in',
      [`${OFFERS} ${EMAIL_CH}`]: 'opt-in',
    });
    // A profile's own pending-opt-in stays pending.
    server.clock.advance(1000);
    expectEmpty(await optOutAll(a, EMAIL, 'bob@example.com'), 204);
    expect(await typesOf(a, EMAIL, 'bob@example.com')).toEqual({
      [`${WEEKLY} ${EMAIL_CH}`]: 'pending-opt-in',
      [`${OFFERS} ${EMAIL_CH}`]: 'opt-out',
    });
    // Nothing left to opt out of: still 204, nothing changes.
    expectEmpty(await optOutAll(a, EMAIL, 'bob@example.com'), 204);
    // A profile without consents: 204.
    await createProfile(a, EMAIL, 'carl@example.com');
    expectEmpty(await optOutAll(a, EMAIL, 'carl@example.com'), 204);
    expect(await typesOf(a, EMAIL, 'carl@example.com')).toEqual({});
  });

  it('CONS-25: opt-out-all for an unknown keyspace or profile answers 404', async () => {
    const a = await account();
    expectProblem(await optOutAll(a, EMAIL, 'nobody@example.com'), 404, 'AUD-1201');
    expectProblem(await optOutAll(a, `${NS}.keyspaces.nothing`, 'nobody@example.com'), 404, 'AUD-1101');
    expect(await consentRowCount(a)).toBe(0);
  });
});

describe('history, merge and delete', () => {
  it('keeps every consent change with its time, reason, source and address', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await setAttributes(a, EMAIL, 'ann@example.com', CLUB, { [EMAIL_ATTR]: 'ann@example.com' });
    const profileId = await profileIdOf(a, EMAIL, 'ann@example.com');
    const t0 = new Date(server.clock.now);
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Signed up', source: 'Web form' }),
      ),
      201,
    );
    server.clock.advance(1000);
    const t1 = new Date(server.clock.now);
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-out', { reason: 'Clicked unsubscribe' }),
      ),
      204,
    );
    server.clock.advance(1000);
    // Refused requests leave no trace.
    expectProblem(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-out')), 409);
    expectProblem(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'pending-opt-in')), 400);
    const t2 = new Date(server.clock.now);
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Signed up again', source: 'Shop checkout' }),
      ),
      204,
    );
    expectEmpty(
      await postConsent(
        a,
        EMAIL,
        'ann@example.com',
        consent(CLUB_NEWS, EMAIL_CH, 'opt-in', { reason: 'Joined the club' }),
        CLUB,
      ),
      201,
    );
    server.clock.advance(1000);
    const t3 = new Date(server.clock.now);
    expectEmpty(await optOutAll(a, EMAIL, 'ann@example.com'), 204);

    const history = await historyOf(a, [profileId]);
    expect(history.map(({ profile_id, ...h }) => h)).toEqual([
      {
        topic: WEEKLY,
        channel: EMAIL_CH,
        type: 'opt-in',
        reason: 'Signed up',
        source: 'Web form',
        address: 'ann@example.com',
        changed_at: t0,
      },
      {
        topic: WEEKLY,
        channel: EMAIL_CH,
        type: 'opt-out',
        reason: 'Clicked unsubscribe',
        source: 'One API',
        address: 'ann@example.com',
        changed_at: t1,
      },
      {
        topic: CLUB_NEWS,
        channel: EMAIL_CH,
        type: 'opt-in',
        reason: 'Joined the club',
        source: 'One API',
        address: 'ann@example.com',
        changed_at: t2,
      },
      {
        topic: WEEKLY,
        channel: EMAIL_CH,
        type: 'opt-in',
        reason: 'Signed up again',
        source: 'Shop checkout',
        address: 'ann@example.com',
        changed_at: t2,
      },
      {
        topic: CLUB_NEWS,
        channel: EMAIL_CH,
        type: 'opt-out',
        reason: expect.any(String),
        source: 'One API',
        address: 'ann@example.com',
        changed_at: t3,
      },
      {
        topic: WEEKLY,
        channel: EMAIL_CH,
        type: 'opt-out',
        reason: expect.any(String),
        source: 'One API',
        address: 'ann@example.com',
        changed_at: t3,
      },
    ]);
    for (const h of history.slice(4)) expect(h.reason.length).toBeGreaterThanOrEqual(3);
    // The consent shown is the latest change.
    const shown = (await getConsents(a, EMAIL, 'ann@example.com')).body.items[0];
    expect(shown).toEqual({
      topic_discriminator: WEEKLY,
      channel_discriminator: EMAIL_CH,
      type: 'opt-out',
      reason: history[5].reason,
      source: 'One API',
      modified_at: t3.toISOString(),
    });
  });

  it('consents survive a merge: the other key shows them, and changes through either key are seen through both', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await createProfile(a, MOBILE, '+4741234567');
    expectEmpty(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in', { reason: 'Signed up' })),
      201,
    );
    server.clock.advance(1000);
    expectEmpty(
      await postConsent(a, MOBILE, '+4741234567', consent(SMS_OFFERS, SMS_CH, 'opt-in', { reason: 'Texted YES' })),
      201,
    );
    server.clock.advance(1000);
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token: a.token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
          { keyspace_discriminator: MOBILE, profile_key: '+4741234567' },
        ],
      },
    });
    expect(merged.status, merged.text).toBe(204);
    const both = { [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in', [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-in' };
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual(both);
    expect(await typesOf(a, MOBILE, '+4741234567')).toEqual(both);
    const viaMobile = (await getConsents(a, MOBILE, '+4741234567')).body.items.find(
      (c: any) => c.topic_discriminator === WEEKLY,
    );
    expect(viaMobile.reason).toBe('Signed up');
    // Merged with an anonymous visitor too: the web key reads them.
    const web = await server.request('PUT', '/audience/profiles/merges', {
      token: a.token,
      body: {
        profiles: [
          { keyspace_discriminator: WEB, profile_key: 'cookie-9' },
          { keyspace_discriminator: MOBILE, profile_key: '+4741234567' },
        ],
      },
    });
    expect(web.status, web.text).toBe(204);
    expect(await typesOf(a, WEB, 'cookie-9')).toEqual(both);
    // A change through one key: a supported move (204) seen through the others.
    expectEmpty(await postConsent(a, MOBILE, '+4741234567', consent(WEEKLY, EMAIL_CH, 'opt-out')), 204);
    expectProblem(
      await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-out')),
      409,
      'AUD-1605',
    );
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({ ...both, [`${WEEKLY} ${EMAIL_CH}`]: 'opt-out' });
    expect(await may(a, EMAIL, 'ann@example.com', SMS_OFFERS, SMS_CH)).toBe(true);
    // Opt-out-all through one key covers the consents of every member.
    server.clock.advance(1000);
    expectEmpty(await optOutAll(a, EMAIL, 'ann@example.com'), 204);
    expect(await typesOf(a, MOBILE, '+4741234567')).toEqual({
      [`${WEEKLY} ${EMAIL_CH}`]: 'opt-out',
      [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-out',
    });
    expect(await may(a, MOBILE, '+4741234567', SMS_OFFERS, SMS_CH)).toBe(false);
  });

  it('deleting a profile removes its consents and their history; a profile made again with the key has none', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await createProfile(a, MOBILE, '+4741234567');
    await createProfile(a, EMAIL, 'bob@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'ann@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, MOBILE, '+4741234567', consent(SMS_OFFERS, SMS_CH, 'opt-in')), 201);
    expectEmpty(await postConsent(a, EMAIL, 'bob@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token: a.token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
          { keyspace_discriminator: MOBILE, profile_key: '+4741234567' },
        ],
      },
    });
    expect(merged.status, merged.text).toBe(204);
    const ids = [await profileIdOf(a, EMAIL, 'ann@example.com'), await profileIdOf(a, MOBILE, '+4741234567')];
    expect(await historyOf(a, ids)).toHaveLength(2);

    const deleted = await server.request('DELETE', `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com`, {
      token: a.token,
    });
    expect(deleted.status, deleted.text).toBe(204);
    const { rows } = await db.query<{ n: number }>(
      'select count(*)::int as n from consents where account_id = $1::bigint and profile_id = any($2::bigint[])',
      [a.accountId, ids],
    );
    expect(rows[0].n).toBe(0);
    expect(await historyOf(a, ids)).toHaveLength(0);
    expectProblem(await getConsents(a, EMAIL, 'ann@example.com'), 404, 'AUD-1201');
    expectProblem(await getConsents(a, MOBILE, '+4741234567'), 404, 'AUD-1201');
    // Another profile keeps its consents.
    expect(await typesOf(a, EMAIL, 'bob@example.com')).toEqual({ [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in' });
    // Made again: no consents.
    await createProfile(a, EMAIL, 'ann@example.com');
    expect(await typesOf(a, EMAIL, 'ann@example.com')).toEqual({});
    expect(await may(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH)).toBe(false);
  });
});

describe('suppressions: operator API, manifest and CLI', () => {
  it('PUT, GET and DELETE /admin/accounts/{id}/suppressions manage suppressions with a reason; addresses are normalised', async () => {
    const a = await account();
    const list = async () => {
      const r = await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`);
      expect(r.status, r.text).toBe(200);
      return r.body.items;
    };
    expect(await list()).toEqual([]);
    expectEmpty(await suppress(a, EMAIL_CH, ' Ann@Example.COM ', 'Hard bounce'), 204);
    expectEmpty(await suppress(a, SMS_CH, '0047 412 34 567', 'Number recycled'), 204);
    expect(await list()).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    // Again: the reason changes, no second record.
    expectEmpty(await suppress(a, EMAIL_CH, 'ann@example.com', 'Spam complaint'), 204);
    expect(await list()).toContainEqual({
      channel_discriminator: EMAIL_CH,
      address: 'ann@example.com',
      reason: 'Spam complaint',
    });
    expect(await list()).toHaveLength(2);

    expectProblem(await suppress(a, `${NS}.channels.fax`, 'x@example.com'), 400, 'AUD-1607');
    expectProblem(await suppress(a, EMAIL_CH, 'not-an-address'), 400);
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
        channel_discriminator: EMAIL_CH,
        address: 'x@example.com',
      }),
      400,
    );
    expectProblem(
      await server.admin('PUT', '/admin/accounts/999999999/suppressions', {
        channel_discriminator: EMAIL_CH,
        address: 'x@example.com',
        reason: 'Why',
      }),
      404,
    );
    expectProblem(await server.admin('GET', '/admin/accounts/999999999/suppressions'), 404);
    // The operator API wants the operator token.
    expectProblem(
      await server.request('GET', `/admin/accounts/${a.accountId}/suppressions`, { token: a.token }),
      401,
      'AUD-8',
    );
    expectProblem(
      await server.request('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
        token: a.token,
        body: { channel_discriminator: EMAIL_CH, address: 'x@example.com', reason: 'Why' },
      }),
      401,
      'AUD-8',
    );
    expect(await list()).toHaveLength(2);

    expectEmpty(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ANN%40example.com`),
      204,
    );
    expect(await list()).toEqual([
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    expectProblem(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ann%40example.com`),
      404,
    );
    expectEmpty(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${SMS_CH}/${enc('+4741234567')}`),
      204,
    );
    expect(await list()).toEqual([]);
  });

  it("a manifest's suppressions are applied, with {vendor} replaced, and take priority over consents", async () => {
    const manifest: Manifest = {
      ...MANIFEST,
      suppressions: [
        { channel_discriminator: 'com.{vendor}1.channels.email', address: 'Blocked@Example.com', reason: 'Legal hold' },
        { channel_discriminator: 'com.{vendor}1.channels.sms', address: '+4741234567', reason: 'Number recycled' },
      ],
    };
    const a = await account(manifest);
    const r = await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`);
    expect(r.body.items).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'blocked@example.com', reason: 'Legal hold' },
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    // Applying it again changes nothing, and says so.
    const again = await server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, manifest);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ created: [], changed: [] });
    expect(again.body.unchanged).toEqual(
      expect.arrayContaining([
        `suppression of blocked@example.com on ${EMAIL_CH}`,
        `suppression of +4741234567 on ${SMS_CH}`,
      ]),
    );
    expect((await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`)).body.items).toEqual(r.body.items);

    await createProfile(a, EMAIL, 'blocked@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'blocked@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect((await getConsents(a, EMAIL, 'blocked@example.com')).body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'blocked@example.com', reason: 'Legal hold' },
    ]);
    expect(await may(a, EMAIL, 'blocked@example.com', WEEKLY, EMAIL_CH)).toBe(false);

    // An unknown channel in a manifest refuses the whole apply.
    const bad = await server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, {
      suppressions: [{ channel_discriminator: 'com.{vendor}1.channels.fax', address: 'x@example.com', reason: 'Why' }],
    });
    expectProblem(bad, 400, 'AUD-1607');
  });

  it('the CLI applies a manifest with suppressions and adds, lists and removes suppressions', async () => {
    const a = await account();
    const env = { ...process.env, AUDIENCE_URL: server.url, ADMIN_TOKEN: server.services.adminToken };
    const cli = async (...args: string[]) =>
      JSON.parse((await run(path.join(ROOT, 'bin', 'audience'), args, { env })).stdout);
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-consents-'));
    try {
      const file = path.join(dir, 'manifest.json');
      await fs.writeFile(
        file,
        JSON.stringify({
          suppressions: [
            {
              channel_discriminator: 'com.{vendor}1.channels.email',
              address: 'cli@example.com',
              reason: 'From the CLI',
            },
          ],
        }),
      );
      await cli('apply', file, '--account', a.accountId);
      const listed = await cli('suppression', 'list', '--account', a.accountId);
      expect(listed.items).toEqual([
        { channel_discriminator: EMAIL_CH, address: 'cli@example.com', reason: 'From the CLI' },
      ]);
      const added = await cli(
        'suppression',
        'add',
        '--account',
        a.accountId,
        '--channel',
        SMS_CH,
        '--address',
        '+4741234567',
        '--reason',
        'Number recycled',
      );
      expect(added.items).toHaveLength(2);
      const removed = await cli(
        'suppression',
        'remove',
        '--account',
        a.accountId,
        '--channel',
        EMAIL_CH,
        '--address',
        'cli@example.com',
      );
      expect(removed.items).toEqual([
        { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
      ]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    await createProfile(a, MOBILE, '+4741234567');
    expect((await getConsents(a, MOBILE, '+4741234567')).body.suppression).toEqual([
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
  }, 120_000);
});

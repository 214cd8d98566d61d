import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CLUB,
  CLUB_NEWS,
  CRM,
  EMAIL,
  EMAIL_ATTR,
  EMAIL_CH,
  EXPORT,
  MOBILE,
  MOBILE_ATTR,
  NS,
  OFFERS,
  S,
  SMS_CH,
  SMS_OFFERS,
  WEB,
  WEB_CH,
  WEEKLY,
} from '../../test/consents.ts';
import {
  MANIFEST,
  account,
  consent,
  consentRowCount,
  consentsServer,
  createProfile,
  db,
  expectEmpty,
  getConsents,
  historyOf,
  optOutAll,
  postConsent,
  profileIdOf,
  server,
  setAttributes,
  storeConsentDirectly,
  typesOf,
} from '../../test/consents-http.ts';

/**
 * Creating consents through real HTTP against a real database (CHECKLIST "Consents and
 * suppression", CONS-01..16, with ERR-07 and PROF-11 for consents).
 */

consentsServer();

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

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CLUB,
  CLUB_NEWS,
  CRM,
  EMAIL,
  EMAIL_ATTR,
  EMAIL_CH,
  MOBILE,
  MOBILE_ATTR,
  NS,
  OFFERS,
  S,
  SMS_CH,
  SMS_OFFERS,
  WEEKLY,
} from '../../test/consents.ts';
import { locate } from '../profiles/locate.ts';
import { maySend } from './consents.ts';
import {
  account,
  consent,
  consentsServer,
  createProfile,
  enc,
  expectEmpty,
  getConsents,
  may,
  postConsent,
  scopeOf,
  server,
  setAttributes,
  storeConsentDirectly,
  suppress,
  typesOf,
} from '../../test/consents-http.ts';

/**
 * Reading consents, and whether a profile may be sent to, through real HTTP against a real
 * database (CHECKLIST "Consents and suppression", CONS-17..23, COMP-12 for consent_types).
 */

consentsServer();

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

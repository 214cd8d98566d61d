import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CLUB,
  CLUB_NEWS,
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
  WEB,
  WEEKLY,
} from '../../test/consents.ts';
import {
  account,
  consent,
  consentRowCount,
  consentsServer,
  createProfile,
  db,
  expectEmpty,
  getConsents,
  historyOf,
  may,
  optOutAll,
  postConsent,
  profileIdOf,
  server,
  setAttributes,
  storeConsentDirectly,
  typesOf,
} from '../../test/consents-http.ts';

/**
 * Opt-out-all, and consents through history, merges and deletes, through real HTTP against a real
 * database (CHECKLIST "Consents and suppression", CONS-24, CONS-25).
 */

consentsServer();

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

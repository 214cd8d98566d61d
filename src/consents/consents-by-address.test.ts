import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CLUB,
  CLUB_NEWS,
  EMAIL,
  EMAIL_CH,
  MOBILE,
  NS,
  OFFERS,
  S,
  SMS_CH,
  SMS_OFFERS,
  WEB_CH,
  WEEKLY,
} from '../../test/consents.ts';
import { LEGACY_REASON } from './consent-lists.ts';
import {
  DAILY,
  MANIFEST,
  NEWS_LIST,
  PRESS,
  ROOT,
  account,
  clubOnlyToken,
  consentAt,
  consentListsServer,
  createProfile,
  db,
  enc,
  evaluationsPath,
  expectNoContent,
  postV2,
  rowCounts,
  server,
  v2Path,
  v2Types,
  withMobile,
} from '../../test/consent-lists-http.ts';

/**
 * The legacy consent routes (docs/consents.md) through real HTTP against a real database: consents by address, each checked against the v2 routes on the same consents, with
 * the v2 rules (CONS-xx), COMP-09 for addresses and AUTH-19 for restricted keys.
 */

consentListsServer();

describe('consents by address', () => {
  it('CONS-01 / CONS-02: an opt-in and then an opt-out answer 204 with an empty body, and the v2 route shows them (source One API)', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    // Raw address (COMP-09).
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        consent_list_discriminator: NEWS_LIST,
        topic_discriminator: DAILY,
        type: 'opt-in',
      }),
    );
    const r = await server.request('GET', v2Path(EMAIL, 'ann@example.com'), { token: a.token });
    expect(r.body.items).toEqual([
      {
        topic_discriminator: DAILY,
        channel_discriminator: EMAIL_CH,
        type: 'opt-in',
        reason: LEGACY_REASON,
        source: 'One API',
        modified_at: expect.any(String),
      },
    ]);
    // Percent-encoded, in another case: the same profile key (COMP-09).
    expectNoContent(
      await consentAt(a, EMAIL_CH, enc('Ann@Example.com'), {
        section_discriminator: S,
        consent_list_discriminator: NEWS_LIST,
        topic_discriminator: DAILY,
        type: 'opt-out',
      }),
    );
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({ [`${DAILY} ${EMAIL_CH}`]: 'opt-out' });
    // The list may be absent when the topic is named.
    expectNoContent(
      await consentAt(a, EMAIL_CH, enc('ann@example.com'), {
        section_discriminator: S,
        topic_discriminator: WEEKLY,
        type: 'opt-in',
      }),
    );
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({
      [`${DAILY} ${EMAIL_CH}`]: 'opt-out',
      [`${WEEKLY} ${EMAIL_CH}`]: 'opt-in',
    });
    expect((await rowCounts(a)).profiles).toBe(1);
  });

  it('CONS-03: the type a consent already has changes nothing and succeeds here (shops send it again), while v2 answers 409 AUD-1605', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expect((await postV2(a, EMAIL, 'ann@example.com', OFFERS, EMAIL_CH, 'opt-in')).status).toBe(201);
    const before = (await server.request('GET', v2Path(EMAIL, 'ann@example.com'), { token: a.token })).body.items;
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
    );
    expect((await server.request('GET', v2Path(EMAIL, 'ann@example.com'), { token: a.token })).body.items).toEqual(
      before,
    );
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-out',
      }),
    );
    expectProblem(await postV2(a, EMAIL, 'ann@example.com', OFFERS, EMAIL_CH, 'opt-out'), 409, 'AUD-1605');
  });

  it('an address no profile has gets a profile with the address in the section, so the consent is kept (email and mobile)', async () => {
    const a = await account();
    expectNoContent(
      await consentAt(a, EMAIL_CH, enc('New@Example.com'), {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
    );
    expect(await v2Types(a, EMAIL, 'new@example.com')).toEqual({ [`${OFFERS} ${EMAIL_CH}`]: 'opt-in' });
    const attributes = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/new%40example.com/sections/${S}/attributes`,
      { token: a.token },
    );
    expect(Object.values(attributes.body)).toEqual(['new@example.com']);
    const { rows } = await db.query<{ address: string }>('select address from consents where account_id = $1::bigint', [
      a.accountId,
    ]);
    expect(rows).toEqual([{ address: 'new@example.com' }]);

    // A mobile number in another spelling is the mobile keyspace's key in E.164; an opt-out is kept too.
    expectNoContent(
      await consentAt(a, SMS_CH, enc('0047 41234567'), {
        section_discriminator: S,
        topic_discriminator: SMS_OFFERS,
        type: 'opt-out',
      }),
    );
    expect(await v2Types(a, MOBILE, '+4741234567')).toEqual({ [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-out' });
    expect(await rowCounts(a)).toEqual({ profiles: 2, consents: 2 });
  });

  it('without a topic, consents to every topic of the list for the channel, or of the section without a list', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await withMobile(a, 'ann@example.com', '+4741234567');
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        consent_list_discriminator: NEWS_LIST,
        type: 'opt-in',
      }),
    );
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({
      [`${DAILY} ${EMAIL_CH}`]: 'opt-in',
      [`${PRESS} ${EMAIL_CH}`]: 'opt-in',
    });
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        consent_list_discriminator: NEWS_LIST,
        type: 'opt-in',
      }),
    );
    // One topic changed through v2: the list-wide opt-in changes it back and leaves the other.
    expect((await postV2(a, EMAIL, 'ann@example.com', PRESS, EMAIL_CH, 'opt-out')).status).toBe(204);
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        consent_list_discriminator: NEWS_LIST,
        type: 'opt-in',
      }),
    );
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({
      [`${DAILY} ${EMAIL_CH}`]: 'opt-in',
      [`${PRESS} ${EMAIL_CH}`]: 'opt-in',
    });

    // The root list on email holds Offers only: SMS offers is for SMS.
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: S,
        consent_list_discriminator: ROOT,
        type: 'opt-out',
      }),
    );
    // No list: every topic of the section for SMS (or for every channel).
    expectNoContent(await consentAt(a, SMS_CH, '+4741234567', { section_discriminator: S, type: 'opt-in' }));
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({
      [`${DAILY} ${EMAIL_CH}`]: 'opt-in',
      [`${PRESS} ${EMAIL_CH}`]: 'opt-in',
      [`${OFFERS} ${EMAIL_CH}`]: 'opt-out',
      [`${DAILY} ${SMS_CH}`]: 'opt-in',
      [`${PRESS} ${SMS_CH}`]: 'opt-in',
      [`${WEEKLY} ${SMS_CH}`]: 'opt-in',
      [`${OFFERS} ${SMS_CH}`]: 'opt-in',
      [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-in',
    });
    // A list with no topic for the channel.
    const b = await account({
      sections: [
        {
          name: 'Shop',
          ecommerce_connected: false,
          topic_folders: [{ name: 'Empty' }],
          topics: [{ name: 'SMS offers', channel: SMS_CH }],
        },
      ],
    });
    await createProfile(b, EMAIL, 'bob@example.com');
    expectProblem(
      await consentAt(b, EMAIL_CH, 'bob@example.com', {
        section_discriminator: S,
        consent_list_discriminator: `${NS}.topic-folders.user-created.empty`,
        type: 'opt-in',
      }),
      400,
      'AUD-1610',
    );
    expectProblem(
      await consentAt(b, EMAIL_CH, 'bob@example.com', { section_discriminator: S, type: 'opt-in' }),
      400,
      'AUD-1610',
    );
  });

  it('refuses with the v2 rules and creates nothing: CONS-05, CONS-06, CONS-12, CONS-13, unknown section, list or topic, an invalid address', async () => {
    const a = await account();
    const body = {
      section_discriminator: S,
      consent_list_discriminator: NEWS_LIST,
      topic_discriminator: DAILY,
      type: 'opt-in',
    };
    const refusals: [Record<string, unknown>, number, string | undefined, string][] = [
      [{ ...body, type: undefined }, 400, undefined, 'type'],
      [{ ...body, section_discriminator: undefined }, 400, undefined, 'section_discriminator'],
      [{ ...body, type: 'maybe' }, 400, 'AUD-1602', 'type'],
      [{ ...body, type: 'pending-opt-in' }, 400, 'AUD-1603', 'pending-opt-in'],
      [{ ...body, type: 'confirmed-opt-in' }, 400, 'AUD-1603', 'confirmed-opt-in'],
      [{ ...body, section_discriminator: `${NS}.sections.user-created.nothing` }, 404, 'AUD-1102', 'nothing'],
      [
        { ...body, consent_list_discriminator: `${NS}.topic-folders.user-created.nothing` },
        404,
        'AUD-1612',
        'consent_list_discriminator',
      ],
      [{ ...body, topic_discriminator: WEEKLY }, 400, 'AUD-1610', 'topic_discriminator'],
      [
        { ...body, consent_list_discriminator: undefined, topic_discriminator: CLUB_NEWS },
        400,
        'AUD-1610',
        'topic_discriminator',
      ],
      [{ ...body, consent_list_discriminator: ROOT, topic_discriminator: SMS_OFFERS }, 400, 'AUD-1606', SMS_CH],
    ];
    for (const [b, status, code, named] of refusals) {
      const detail = expectProblem(await consentAt(a, EMAIL_CH, 'new@example.com', b), status, code);
      expect(detail, JSON.stringify(b)).toContain(named);
    }
    expect(
      expectProblem(await consentAt(a, `${NS}.channels.nothing`, 'new@example.com', body), 400, 'AUD-1607'),
    ).toContain('channel_discriminator');
    expectProblem(await consentAt(a, WEB_CH, 'new@example.com', body), 400, 'AUD-1608');
    expect(expectProblem(await consentAt(a, EMAIL_CH, 'not-an-address', body), 400, 'AUD-1205')).toContain('address');
    expect(expectProblem(await consentAt(a, SMS_CH, '12', body), 400, 'AUD-1205')).toContain('address');
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
  });

  it('CONS-11: a known profile without the address attribute in the section answers 400 AUD-1601', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com', CLUB);
    const r = await consentAt(a, EMAIL_CH, 'ann@example.com', {
      section_discriminator: S,
      topic_discriminator: OFFERS,
      type: 'opt-in',
    });
    expectProblem(r, 400, 'AUD-1601');
    expect(r.body.title).toBe('No address to consent');
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'ann@example.com', {
        section_discriminator: CLUB,
        topic_discriminator: CLUB_NEWS,
        type: 'opt-in',
      }),
    );
    expect(await v2Types(a, EMAIL, 'ann@example.com', CLUB)).toEqual({ [`${CLUB_NEWS} ${EMAIL_CH}`]: 'opt-in' });
  });

  it('CONS-14: through a keyspace without manage_subscriptions → 403 AUD-1609, and no profile is created', async () => {
    const a = await account({
      ...MANIFEST,
      keyspaces: [{ discriminator: 'com.{vendor}1.keyspaces.email', manage_subscriptions: false }],
    });
    expectProblem(
      await consentAt(a, EMAIL_CH, 'new@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
      403,
      'AUD-1609',
    );
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
  });

  it('CONS-16: an opt-in for a locked address is refused with 410 AUD-1202, and no profile is made for it', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expect(
      (await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/locks`, { token: a.token }))
        .status,
    ).toBe(204);
    expectProblem(
      await consentAt(a, EMAIL_CH, 'Ann@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
      410,
      'AUD-1202',
    );
    expectProblem(
      await server.request('GET', evaluationsPath(EMAIL_CH, 'ann@example.com', ROOT), { token: a.token }),
      410,
      'AUD-1202',
    );
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
  });

  it('AUTH-19: a key restricted to another section → 403 AUD-1107 and nothing is created; its own section is fine', async () => {
    const a = await account();
    const token = await clubOnlyToken(a);
    expectProblem(
      await consentAt(
        a,
        EMAIL_CH,
        'new@example.com',
        { section_discriminator: S, topic_discriminator: OFFERS, type: 'opt-in' },
        token,
      ),
      403,
      'AUD-1107',
    );
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
    expectProblem(
      await server.request('GET', evaluationsPath(EMAIL_CH, 'new@example.com', ROOT), { token }),
      403,
      'AUD-1107',
    );
    expectNoContent(
      await consentAt(
        a,
        EMAIL_CH,
        'new@example.com',
        { section_discriminator: CLUB, topic_discriminator: CLUB_NEWS, type: 'opt-in' },
        token,
      ),
    );
    expect(await v2Types(a, EMAIL, 'new@example.com', CLUB)).toEqual({ [`${CLUB_NEWS} ${EMAIL_CH}`]: 'opt-in' });
  });
});

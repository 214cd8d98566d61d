import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { serverWithPool, TestServer, type Response, expectProblem } from '../../test/app.ts';
import {
  type Account,
  CLUB,
  CLUB_NEWS,
  CRM,
  EMAIL,
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
  topic,
  WEB,
  WEB_CH,
  WEEKLY,
} from '../../test/consents.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { LEGACY_REASON } from './consent-lists.ts';

/**
 * The legacy consent routes (ENDPOINTS.md "Legacy consent routes", docs/consents.md) through real
 * HTTP against a real database: consent lists, consents by address, list evaluations and
 * subscriptions, each checked against the v2 routes on the same consents, with the v2 rules
 * (CONS-xx), COMP-09 for addresses, AUTH-19 for restricted keys and LIM-07.
 */

let server: TestServer;
/** This file's database, for counting rows and the one set-up the API cannot make (confirmed-opt-in). */
let db: pg.Pool;
serverWithPool({}, (s, d) => {
  server = s;
  db = d;
});

const ROOT = `${NS}.topic-folders.root`;
const NEWS_LIST = `${NS}.topic-folders.user-created.news`;
const WEEKLY_LIST = `${NS}.topic-folders.user-created.weekly`;
const DAILY = topic('daily-news');
const PRESS = topic('press');

/** A section with nested folders, topics in and out of them, one for SMS only; and a second section. */
const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      ecommerce_connected: false,
      topic_folders: [{ name: 'News' }, { name: 'Weekly', parent: NEWS_LIST }],
      topics: [
        { name: 'Daily news', folder: NEWS_LIST },
        { name: 'Press', folder: NEWS_LIST },
        { name: 'Weekly news', folder: WEEKLY_LIST },
        { name: 'Offers' },
        { name: 'SMS offers', channel: SMS_CH },
      ],
    },
    {
      name: 'Club',
      ecommerce_connected: false,
      topic_folders: [{ name: 'Club folder' }],
      topics: [{ name: 'Club news' }],
    },
  ],
};

async function account(
  manifest: Manifest = MANIFEST,
  limits: Record<string, number | null> = NO_LIMITS,
): Promise<Account> {
  const { accountId, token } = await server.login(manifest, limits);
  return { accountId, token };
}

/** A token of a key of the account restricted to the Club section. */
async function clubOnlyToken(a: Account): Promise<string> {
  return server.token(await server.createKey(a.accountId, { section_discriminators: [CLUB] }));
}

const enc = encodeURIComponent;
const addressPath = (channel: string, address: string) => `/audience/channels/${channel}/addresses/${address}/consents`;
const evaluationsPath = (channel: string, address: string, list: string, section = S) =>
  `${addressPath(channel, address)}/sections/${section}/consent-lists/${list}/evaluations`;
const subscriptionsPath = (ks: string, key: string, section = S) =>
  `/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/subscriptions`;
const v2Path = (ks: string, key: string, section = S) =>
  `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/consents`;

function consentAt(
  a: Account,
  channel: string,
  address: string,
  body: Record<string, unknown>,
  token = a.token,
): Promise<Response> {
  return server.request('POST', addressPath(channel, address), {
    token,
    body,
    headers: { accept: 'application/json' },
  });
}

async function evaluated(a: Account, channel: string, address: string, list: string): Promise<string[]> {
  const r = await server.request('GET', evaluationsPath(channel, address, list), { token: a.token });
  expect(r.status, r.text).toBe(200);
  return r.body.items.map((i: { topic_discriminator: string }) => i.topic_discriminator);
}

function subscribe(
  a: Account,
  ks: string,
  key: string,
  body: Record<string, unknown>,
  section = S,
  token = a.token,
): Promise<Response> {
  return server.request('POST', subscriptionsPath(ks, key, section), { token, body });
}

function postV2(
  a: Account,
  ks: string,
  key: string,
  topicDiscriminator: string,
  channel: string,
  type: string,
): Promise<Response> {
  return server.request('POST', v2Path(ks, key), {
    token: a.token,
    body: {
      topic_discriminator: topicDiscriminator,
      channel_discriminator: channel,
      type,
      reason: 'Asked on the phone',
    },
  });
}

/** The consents a profile shows through the v2 route in a section, as `topic channel` → type. */
async function v2Types(a: Account, ks: string, key: string, section = S): Promise<Record<string, string>> {
  const r = await server.request('GET', v2Path(ks, key, section), { token: a.token });
  expect(r.status, r.text).toBe(200);
  return Object.fromEntries(
    r.body.items.map((c: any) => [`${c.topic_discriminator} ${c.channel_discriminator}`, c.type]),
  );
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
  values: Record<string, unknown>,
  section = S,
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

async function rowCounts(a: Account): Promise<{ profiles: number; consents: number }> {
  const { rows } = await db.query<{ profiles: number; consents: number }>(
    `select (select count(*)::int from profiles where account_id = $1::bigint) as profiles,
            (select count(*)::int from consents where account_id = $1::bigint) as consents`,
    [a.accountId],
  );
  return rows[0];
}

/** Gives a profile known by its email a mobile number in the section, as its attribute and as a key of the mobile keyspace. */
async function withMobile(a: Account, email: string, mobile: string): Promise<void> {
  await setAttributes(a, EMAIL, email, { [MOBILE_ATTR]: mobile });
  const merged = await server.request('PUT', '/audience/profiles/merges', {
    token: a.token,
    body: {
      profiles: [
        { keyspace_discriminator: EMAIL, profile_key: email },
        { keyspace_discriminator: MOBILE, profile_key: mobile },
      ],
    },
  });
  expect(merged.status, merged.text).toBe(204);
}

function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
  expect(r.text).toBe('');
}

describe('consent lists', () => {
  it('GET consent-lists answers the root folder (named after the section) and every topic folder; GET topics the topics directly in each', async () => {
    const a = await account();
    const lists = await server.request('GET', `/audience/sections/${S}/consent-lists`, { token: a.token });
    expect(lists.status, lists.text).toBe(200);
    expect(lists.body).toEqual({
      items: [
        { discriminator: ROOT, name: 'Shop' },
        { discriminator: NEWS_LIST, name: 'News' },
        { discriminator: WEEKLY_LIST, name: 'Weekly' },
      ],
    });
    const topicsOf = async (list: string) => {
      const r = await server.request('GET', `/audience/sections/${S}/consent-lists/${list}/topics`, { token: a.token });
      expect(r.status, r.text).toBe(200);
      return r.body.items;
    };
    expect(await topicsOf(ROOT)).toEqual([
      { discriminator: OFFERS, name: 'Offers' },
      { discriminator: SMS_OFFERS, name: 'SMS offers' },
    ]);
    expect(await topicsOf(NEWS_LIST)).toEqual([
      { discriminator: DAILY, name: 'Daily news' },
      { discriminator: PRESS, name: 'Press' },
    ]);
    expect(await topicsOf(WEEKLY_LIST)).toEqual([{ discriminator: WEEKLY, name: 'Weekly news' }]);

    // The same model as the v2 topics: each topic is in the list of its folder_discriminator, and in no other.
    const v2 = await server.request('GET', `/v2/audience/sections/${S}/topics`, { token: a.token });
    expect(v2.status, v2.text).toBe(200);
    for (const t of v2.body.items) {
      for (const list of lists.body.items) {
        expect(
          (await topicsOf(list.discriminator)).some(
            (x: { discriminator: string }) => x.discriminator === t.discriminator,
          ),
        ).toBe(list.discriminator === t.folder_discriminator);
      }
    }
  });

  it('answers 404 for an unknown section (AUD-1102) or list (AUD-1612, also a folder of another section); 403 to a key restricted to another section (AUTH-19)', async () => {
    const a = await account();
    expectProblem(
      await server.request('GET', `/audience/sections/${NS}.sections.user-created.nothing/consent-lists`, {
        token: a.token,
      }),
      404,
      'AUD-1102',
    );
    const detail = expectProblem(
      await server.request(
        'GET',
        `/audience/sections/${S}/consent-lists/${NS}.topic-folders.user-created.nothing/topics`,
        { token: a.token },
      ),
      404,
      'AUD-1612',
    );
    expect(detail).toContain('consent_list_discriminator');
    expectProblem(
      await server.request(
        'GET',
        `/audience/sections/${S}/consent-lists/${NS}.topic-folders.user-created.club-folder/topics`,
        { token: a.token },
      ),
      404,
      'AUD-1612',
    );

    const token = await clubOnlyToken(a);
    expectProblem(await server.request('GET', `/audience/sections/${S}/consent-lists`, { token }), 403, 'AUD-1107');
    expectProblem(
      await server.request('GET', `/audience/sections/${S}/consent-lists/${ROOT}/topics`, { token }),
      403,
      'AUD-1107',
    );
    const club = await server.request('GET', `/audience/sections/${CLUB}/consent-lists/${ROOT}/topics`, { token });
    expect(club.body).toEqual({ items: [{ discriminator: CLUB_NEWS, name: 'Club news' }] });
  });
});

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

describe('consent list evaluations', () => {
  it('answers the topics of the list opted in to on the channel, as the v2 route wrote them (opt-in or confirmed-opt-in), raw or percent-encoded', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    await withMobile(a, 'ann@example.com', '+4741234567');
    expect(await evaluated(a, EMAIL_CH, 'ann@example.com', NEWS_LIST)).toEqual([]);
    expect((await postV2(a, EMAIL, 'ann@example.com', DAILY, EMAIL_CH, 'opt-in')).status).toBe(201);
    expect((await postV2(a, EMAIL, 'ann@example.com', PRESS, EMAIL_CH, 'opt-out')).status).toBe(201);
    expect((await postV2(a, EMAIL, 'ann@example.com', PRESS, SMS_CH, 'opt-in')).status).toBe(201);
    expect((await postV2(a, EMAIL, 'ann@example.com', WEEKLY, EMAIL_CH, 'opt-in')).status).toBe(201);
    // Only this list's topics (not the subfolder's), only this channel, only opt-ins.
    expect(await evaluated(a, EMAIL_CH, 'ann@example.com', NEWS_LIST)).toEqual([DAILY]);
    expect(await evaluated(a, EMAIL_CH, enc('ANN@example.com'), NEWS_LIST)).toEqual([DAILY]);
    expect(await evaluated(a, EMAIL_CH, 'ann@example.com', WEEKLY_LIST)).toEqual([WEEKLY]);
    expect(await evaluated(a, SMS_CH, enc('+4741234567'), NEWS_LIST)).toEqual([PRESS]);
    // `+` stays `+` in a raw path segment (COMP-10).
    expect(await evaluated(a, SMS_CH, '+4741234567', NEWS_LIST)).toEqual([PRESS]);

    // confirmed-opt-in permits too; the API cannot store it, an import or the operator does.
    await db.query(`update consents set type = 'confirmed-opt-in' where account_id = $1::bigint and type = 'opt-out'`, [
      a.accountId,
    ]);
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toMatchObject({ [`${PRESS} ${EMAIL_CH}`]: 'confirmed-opt-in' });
    expect((await evaluated(a, EMAIL_CH, 'ann@example.com', NEWS_LIST)).sort()).toEqual([DAILY, PRESS].sort());

    // Opt-out-all (v2) empties it.
    expect(
      (
        await server.request(
          'DELETE',
          `/v2/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/consents/opt-out-all`,
          { token: a.token },
        )
      ).status,
    ).toBe(204);
    expect(await evaluated(a, EMAIL_CH, 'ann@example.com', NEWS_LIST)).toEqual([]);
  });

  it('an address no profile has opted in to nothing: 200 with no items, and nothing is created', async () => {
    const a = await account();
    const res = await server.request('GET', evaluationsPath(EMAIL_CH, 'nobody@example.com', ROOT), { token: a.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ items: [] });
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
  });

  it('an unknown channel, section or list is refused as elsewhere', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    expectProblem(
      await server.request('GET', evaluationsPath(`${NS}.channels.nothing`, 'ann@example.com', ROOT), {
        token: a.token,
      }),
      400,
      'AUD-1607',
    );
    expectProblem(
      await server.request(
        'GET',
        evaluationsPath(EMAIL_CH, 'ann@example.com', ROOT, `${NS}.sections.user-created.nothing`),
        { token: a.token },
      ),
      404,
      'AUD-1102',
    );
    expectProblem(
      await server.request(
        'GET',
        evaluationsPath(EMAIL_CH, 'ann@example.com', `${NS}.topic-folders.user-created.nothing`),
        { token: a.token },
      ),
      404,
      'AUD-1612',
    );
  });
});

describe('subscriptions', () => {
  it('opts the profile in and answers 201 with a non-empty id, the same for the same consent; the v2 route shows the opt-in', async () => {
    const a = await account();
    await createProfile(a, EMAIL, 'ann@example.com');
    const first = await subscribe(a, EMAIL, 'ann@example.com', {
      consent_list_discriminator: NEWS_LIST,
      topic_discriminator: DAILY,
    });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('content-type')).toMatch(/^application\/json/);
    expect(first.body.id).toEqual(expect.stringMatching(/\S/));
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
    expect(await evaluated(a, EMAIL_CH, 'ann@example.com', NEWS_LIST)).toEqual([DAILY]);

    // CONS-03: already opted in: nothing changes, and the client gets the id it needs.
    const repeated = await subscribe(a, EMAIL, 'ann@example.com', {
      consent_list_discriminator: NEWS_LIST,
      topic_discriminator: DAILY,
    });
    expect(repeated.status, repeated.text).toBe(201);
    expect(repeated.body.id).toBe(first.body.id);
    // Opted out through v2, subscribed again (without a list): the same consent, the same id.
    expect((await postV2(a, EMAIL, 'ann@example.com', DAILY, EMAIL_CH, 'opt-out')).status).toBe(204);
    const again = await subscribe(a, EMAIL, 'Ann@Example.com', { topic_discriminator: DAILY });
    expect(again.status, again.text).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    const other = await subscribe(a, EMAIL, 'ann@example.com', {
      consent_list_discriminator: NEWS_LIST,
      topic_discriminator: PRESS,
    });
    expect(other.status, other.text).toBe(201);
    expect(other.body.id).not.toBe(first.body.id);
    expect(await v2Types(a, EMAIL, 'ann@example.com')).toEqual({
      [`${DAILY} ${EMAIL_CH}`]: 'opt-in',
      [`${PRESS} ${EMAIL_CH}`]: 'opt-in',
    });
  });

  it("a channel-specific topic is subscribed on its channel; a topic of every channel on the channel of the keyspace's addresses", async () => {
    const a = await account();
    await createProfile(a, MOBILE, '+4741234567');
    expect(
      (await subscribe(a, MOBILE, '+4741234567', { consent_list_discriminator: ROOT, topic_discriminator: SMS_OFFERS }))
        .status,
    ).toBe(201);
    expect(
      (await subscribe(a, MOBILE, '+4741234567', { consent_list_discriminator: ROOT, topic_discriminator: OFFERS }))
        .status,
    ).toBe(201);
    expect(await v2Types(a, MOBILE, '+4741234567')).toEqual({
      [`${SMS_OFFERS} ${SMS_CH}`]: 'opt-in',
      [`${OFFERS} ${SMS_CH}`]: 'opt-in',
    });
    // Through the CRM keyspace no channel is implied for a topic of every channel.
    await createProfile(a, CRM, 'crm-1');
    await setAttributes(a, CRM, 'crm-1', { [MOBILE_ATTR]: '+4749876543' });
    expect(expectProblem(await subscribe(a, CRM, 'crm-1', { topic_discriminator: OFFERS }), 400, 'AUD-1611')).toContain(
      'topic_discriminator',
    );
    expect((await subscribe(a, CRM, 'crm-1', { topic_discriminator: SMS_OFFERS })).status).toBe(201);
  });

  it('refuses with the v2 rules: CONS-15 unknown profile, CONS-14, PROF-11, CONS-11, unknown list or topic, AUTH-19, CONS-16', async () => {
    const a = await account();
    expectProblem(await subscribe(a, EMAIL, 'nobody@example.com', { topic_discriminator: OFFERS }), 404, 'AUD-1201');
    expect(await rowCounts(a)).toEqual({ profiles: 0, consents: 0 });
    await createProfile(a, EMAIL, 'ann@example.com');
    const { rows } = await db.query<{ export_key: string }>(
      'select export_key from profiles where account_id = $1::bigint',
      [a.accountId],
    );
    expectProblem(await subscribe(a, EXPORT, rows[0].export_key, { topic_discriminator: OFFERS }), 403, 'AUD-1203');
    expect(
      (
        await server.request('PUT', '/audience/profiles/merges', {
          token: a.token,
          body: {
            profiles: [
              { keyspace_discriminator: EMAIL, profile_key: 'ann@example.com' },
              { keyspace_discriminator: WEB, profile_key: 'cookie-1' },
            ],
          },
        })
      ).status,
    ).toBe(204);
    expectProblem(await subscribe(a, WEB, 'cookie-1', { topic_discriminator: OFFERS }), 403, 'AUD-1609');
    expectProblem(
      await subscribe(a, EMAIL, 'ann@example.com', { topic_discriminator: CLUB_NEWS }, CLUB),
      400,
      'AUD-1601',
    );
    expect(
      expectProblem(
        await subscribe(a, EMAIL, 'ann@example.com', {
          consent_list_discriminator: `${NS}.topic-folders.user-created.nothing`,
          topic_discriminator: OFFERS,
        }),
        404,
        'AUD-1612',
      ),
    ).toContain('consent_list_discriminator');
    expect(
      expectProblem(
        await subscribe(a, EMAIL, 'ann@example.com', {
          consent_list_discriminator: NEWS_LIST,
          topic_discriminator: OFFERS,
        }),
        400,
        'AUD-1610',
      ),
    ).toContain('topic_discriminator');
    expect(
      expectProblem(await subscribe(a, EMAIL, 'ann@example.com', { consent_list_discriminator: ROOT }), 400),
    ).toContain('topic_discriminator');
    expectProblem(
      await subscribe(a, EMAIL, 'ann@example.com', { topic_discriminator: OFFERS }, S, await clubOnlyToken(a)),
      403,
      'AUD-1107',
    );
    expect((await rowCounts(a)).consents).toBe(0);
    expect(
      (await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/locks`, { token: a.token }))
        .status,
    ).toBe(204);
    expectProblem(await subscribe(a, EMAIL, 'ann@example.com', { topic_discriminator: OFFERS }), 410, 'AUD-1202');
  });
});

describe('the legacy routes in the interface', () => {
  it('LIM-07: the address routes count against the profile key of the address, whatever its spelling, with the v2 routes', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_key_operations_per_second: 10,
    });
    await createProfile(a, EMAIL, 'busy@example.com');
    await createProfile(a, EMAIL, 'other@example.com');
    for (let i = 0; i < 5; i++) {
      expect(
        (
          await server.request(
            'GET',
            evaluationsPath(EMAIL_CH, i % 2 ? 'busy@example.com' : enc('BUSY@example.com'), ROOT),
            { token: a.token },
          )
        ).status,
      ).toBe(200);
      expect((await server.request('GET', v2Path(EMAIL, 'busy@example.com'), { token: a.token })).status).toBe(200);
    }
    expectProblem(
      await consentAt(a, EMAIL_CH, 'busy@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
      429,
      'AUD-1002',
    );
    expectProblem(await server.request('GET', v2Path(EMAIL, 'busy@example.com'), { token: a.token }), 429, 'AUD-1002');
    expect(
      (await server.request('GET', evaluationsPath(EMAIL_CH, 'other@example.com', ROOT), { token: a.token })).status,
    ).toBe(200);
    server.clock.advance(1000);
    expectNoContent(
      await consentAt(a, EMAIL_CH, 'busy@example.com', {
        section_discriminator: S,
        topic_discriminator: OFFERS,
        type: 'opt-in',
      }),
    );
  });

  it('the OpenAPI document marks every legacy operation deprecated, and the v2 consent operations not', async () => {
    const doc = (await server.request('GET', '/openapi.json')).body;
    const legacy: [string, string][] = [
      ['/audience/sections/{section_discriminator}/consent-lists', 'get'],
      ['/audience/sections/{section_discriminator}/consent-lists/{consent_list_discriminator}/topics', 'get'],
      ['/audience/channels/{channel_discriminator}/addresses/{address}/consents', 'post'],
      [
        '/audience/channels/{channel_discriminator}/addresses/{address}/consents/sections/{section_discriminator}/consent-lists/{consent_list_discriminator}/evaluations',
        'get',
      ],
      [
        '/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/subscriptions',
        'post',
      ],
    ];
    for (const [path, method] of legacy) expect(doc.paths[path]?.[method]?.deprecated, path).toBe(true);
    expect(
      doc.paths[
        '/v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/consents'
      ].post.deprecated,
    ).toBeUndefined();
  });

  it('answers 401 without a token', async () => {
    expect((await server.request('GET', `/audience/sections/${S}/consent-lists`)).status).toBe(401);
    expect(
      (
        await server.request('POST', addressPath(EMAIL_CH, 'ann@example.com'), {
          body: { section_discriminator: S, type: 'opt-in' },
        })
      ).status,
    ).toBe(401);
  });
});

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CLUB,
  CLUB_NEWS,
  CRM,
  EMAIL,
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
  WEEKLY,
} from '../../test/consents.ts';
import { LEGACY_REASON } from './consent-lists.ts';
import {
  DAILY,
  NEWS_LIST,
  PRESS,
  ROOT,
  WEEKLY_LIST,
  account,
  clubOnlyToken,
  consentListsServer,
  createProfile,
  db,
  enc,
  evaluated,
  evaluationsPath,
  postV2,
  rowCounts,
  server,
  setAttributes,
  subscribe,
  v2Path,
  v2Types,
  withMobile,
} from '../../test/consent-lists-http.ts';

/**
 * The legacy consent routes (docs/consents.md) through real HTTP against a real database: list evaluations and subscriptions, checked against the v2 routes on the same
 * consents, with the v2 rules (CONS-xx), COMP-10 for addresses and AUTH-19 for restricted keys.
 */

consentListsServer();

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

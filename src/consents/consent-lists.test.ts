import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { CLUB, CLUB_NEWS, EMAIL, EMAIL_CH, NS, OFFERS, S, SMS_OFFERS, WEEKLY } from '../../test/consents.ts';
import {
  DAILY,
  MANIFEST,
  NEWS_LIST,
  PRESS,
  ROOT,
  WEEKLY_LIST,
  account,
  addressPath,
  clubOnlyToken,
  consentAt,
  consentListsServer,
  createProfile,
  enc,
  evaluationsPath,
  expectNoContent,
  server,
  v2Path,
} from '../../test/consent-lists-http.ts';

/**
 * The legacy consent routes (docs/consents.md) through real HTTP against a real database: the consent lists (AUTH-19 for restricted keys), and the legacy routes in the interface
 * (LIM-07).
 */

consentListsServer();

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

import { describe, expect, it } from 'vitest';
import { SHOP } from '../../test/app.ts';
import type { Manifest } from './schemas.ts';
import {
  NS,
  NUMERIC_ID,
  SHOP_SECTION,
  bare,
  definitionsServer,
  expectProblem,
  get,
  server,
} from '../../test/definitions-http.ts';

// Topics, topic folders and segment definitions through real HTTP.

definitionsServer();

describe('topics and topic folders', () => {
  it('lists topics with folder_discriminator, the root folder for topics without one (DEF-17, COMP-06)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, `/v2/audience/sections/${SHOP_SECTION}/topics`);
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items).toEqual([
      {
        discriminator: `${NS}.topics.user-created.weekly-news`,
        id: expect.stringMatching(NUMERIC_ID),
        name: 'Weekly news',
        description: '',
        folder_discriminator: `${NS}.topic-folders.user-created.weekly`,
      },
      {
        discriminator: `${NS}.topics.user-created.sms-offers`,
        id: expect.stringMatching(NUMERIC_ID),
        name: 'SMS offers',
        description: '',
        folder_discriminator: `${NS}.topic-folders.root`,
      },
    ]);
    for (const t of body.items) for (const value of Object.values(t)) expect(typeof value).toBe('string');
  });

  it('answers the folder tree from the root (DEF-18)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, `/folders/topic/sections/${SHOP_SECTION}/folders`);
    expect(body).toEqual({
      discriminator: `${NS}.topic-folders.root`,
      subfolders: [
        {
          discriminator: `${NS}.topic-folders.user-created.news`,
          name: 'News',
          subfolders: [{ discriminator: `${NS}.topic-folders.user-created.weekly`, name: 'Weekly', subfolders: [] }],
        },
      ],
    });
  });

  it('answers an empty tree and no topics for a section without any (DEF-17, DEF-18)', async () => {
    const { token } = await bare('Empty');
    const section = `${NS}.sections.user-created.empty`;
    expect(await get(token, `/v2/audience/sections/${section}/topics`)).toEqual({ items: [] });
    expect(await get(token, `/folders/topic/sections/${section}/folders`)).toEqual({
      discriminator: `${NS}.topic-folders.root`,
      subfolders: [],
    });
  });
});

describe('segments', () => {
  const TWO_SEGMENTS: Manifest = {
    ...SHOP,
    segments: [
      ...SHOP.segments!,
      {
        name: 'Everyone',
        description: 'All of the shop',
        section: SHOP_SECTION,
        versions: [
          { query: 'section({section}).attribute({attribute:com.vendor1.attributes.email}).neq("")' },
          {
            query:
              'section({section:com.vendor1.sections.user-created.shop}).attribute({attribute:com.vendor1.attributes.email@1}).neq("")',
          },
        ],
      },
    ],
  };

  it('lists segments with string version ids and AQL queries (DEF-19, DEF-23, COMP-06)', async () => {
    const { token } = await server.login(TWO_SEGMENTS);
    const body = await get(token, '/audience/segments');
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      `${NS}.segments.user-created.big-spenders`,
      `${NS}.segments.user-created.everyone`,
    ]);
    for (const s of body.items) {
      expect(Object.keys(s).sort()).toEqual(['description', 'discriminator', 'name', 'versions']);
      for (const v of s.versions) {
        expect(Object.keys(v).sort()).toEqual(['id', 'query']);
        expect(v.id).toEqual(expect.stringMatching(NUMERIC_ID));
        expect(typeof v.query).toBe('string');
      }
    }
    expect(body.items[1]).toMatchObject({ name: 'Everyone', description: 'All of the shop' });
    expect(body.items[1].versions).toHaveLength(2);
  });

  it('resolves {section} and {attribute:DISC@N} of manifest queries to numeric ids (DEF-19, DEF-23)', async () => {
    const { token } = await server.login(TWO_SEGMENTS);
    const [section] = (await get(token, '/audience/sections')).items;
    const points = (await get(token, `/audience/sections/${SHOP_SECTION}/attributes`)).items.find(
      (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.points`,
    );
    const segments = (await get(token, '/audience/segments')).items;
    expect(segments[0].versions.map((v: { query: string }) => v.query)).toEqual([
      `section(${section.id}).attribute(${points.versions[1].id}).gt(100)`,
    ]);
    const email = (await get(token, `/audience/sections/${SHOP_SECTION}/attributes`)).items.find(
      (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.email`,
    );
    const everyone = `section(${section.id}).attribute(${email.versions[0].id}).neq("")`;
    expect(segments[1].versions.map((v: { query: string }) => v.query)).toEqual([everyone, everyone]);
  });

  it('gets one segment, and 404 for an unknown one (DEF-20)', async () => {
    const { token } = await server.login(TWO_SEGMENTS);
    const list = (await get(token, '/audience/segments')).items;
    expect(await get(token, `/audience/segments/${NS}.segments.user-created.everyone`)).toEqual(list[1]);
    expectProblem(await server.request('GET', `/audience/segments/${NS}.segments.user-created.nobody`, { token }), 404);
  });

  it('gets one version; a version of another segment or an unknown version is 404 (DEF-21)', async () => {
    const { token } = await server.login(TWO_SEGMENTS);
    const [big, everyone] = (await get(token, '/audience/segments')).items;
    const path = (segment: string, id: string) => `/audience/segments/${segment}/versions/${id}`;
    expect(await get(token, path(everyone.discriminator, everyone.versions[1].id))).toEqual(everyone.versions[1]);
    expect(await get(token, path(big.discriminator, big.versions[0].id))).toEqual(big.versions[0]);
    expectProblem(await server.request('GET', path(big.discriminator, everyone.versions[0].id), { token }), 404);
    expectProblem(await server.request('GET', path(everyone.discriminator, big.versions[0].id), { token }), 404);
    expectProblem(await server.request('GET', path(big.discriminator, '999999999'), { token }), 404);
    expectProblem(await server.request('GET', path(big.discriminator, 'not-a-number'), { token }), 404);
    expectProblem(
      await server.request('GET', path(`${NS}.segments.user-created.nobody`, big.versions[0].id), { token }),
      404,
    );
  });

  it('lists no segments for an account without any (DEF-19)', async () => {
    const { token } = await bare('Shop');
    expect(await get(token, '/audience/segments')).toEqual({ items: [] });
  });
});

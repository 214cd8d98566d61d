import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem as expectProblemDocument, SHOP, TestServer, type Response } from '../../test/app.ts';
import type { Manifest } from './schemas.ts';

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

const NS = 'com.vendor1';
const SHOP_SECTION = `${NS}.sections.user-created.shop`;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const NUMERIC_ID = /^\d+$/;

/** Every error is a problem document whose `status` is the HTTP status (ERR-01, ERR-02, ERR-03, ERR-04, ERR-09; test/app.ts), and its detail names what is at fault. */
function expectProblem(res: Response, status: number, detailMentions?: string): void {
  const detail = expectProblemDocument(res, status);
  if (detailMentions !== undefined) expect(detail).toContain(detailMentions);
}

/** A copy of a manifest, to change without touching the shared constant. */
function copy<T>(value: T): T {
  return structuredClone(value);
}

/** A fresh account with a manifest whose one section has no tags, and a token for it. */
const bare = (name: string, limits?: Record<string, number | null>) =>
  server.login({ sections: [{ name }] }, limits ?? { requests_per_second: null, token_requests_per_minute: null });

async function get(token: string, path: string) {
  const res = await server.request('GET', path, { token });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res.body;
}

describe('GET /audience/sections', () => {
  it('lists the sections of the manifest (DEF-04)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('GET', '/audience/sections', { token });
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([
      {
        discriminator: 'com.vendor1.sections.user-created.shop',
        name: 'Shop',
        description: '',
        id: expect.stringMatching(/^\d+$/),
      },
    ]);
  });

  it('lists every section of an account with several, as {items} (DEF-04, COMP-06)', async () => {
    const { token } = await server.login({
      sections: [{ name: 'Shop', description: 'The shop' }, { name: 'Online Magazine' }],
    });
    const body = await get(token, '/audience/sections');
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items).toEqual([
      {
        discriminator: `${NS}.sections.user-created.shop`,
        name: 'Shop',
        description: 'The shop',
        id: expect.stringMatching(NUMERIC_ID),
      },
      {
        discriminator: `${NS}.sections.user-created.online-magazine`,
        name: 'Online Magazine',
        description: '',
        id: expect.stringMatching(NUMERIC_ID),
      },
    ]);
    expect(body.items[0].id).not.toBe(body.items[1].id);
  });
});

describe('GET /audience/keyspaces', () => {
  it('lists the built-in keyspaces with their fields (DEF-01, DEF-02, COMP-06)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, '/audience/keyspaces');
    expect(Object.keys(body)).toEqual(['items']);
    const discriminators = body.items.map((k: { discriminator: string }) => k.discriminator);
    for (const name of ['email', 'mobile', 'crm-id', 'export', 'transactional-email', 'web', 'sms']) {
      expect(discriminators).toContain(`${NS}.keyspaces.${name}`);
    }
    expect(new Set(discriminators).size).toBe(discriminators.length);
    for (const k of body.items) {
      expect(Object.keys(k).sort()).toEqual(['description', 'discriminator', 'manage_subscriptions', 'name']);
      expect(typeof k.name).toBe('string');
      expect(typeof k.description).toBe('string');
      expect(typeof k.manage_subscriptions).toBe('boolean');
    }
    const email = body.items.find((k: { discriminator: string }) => k.discriminator === `${NS}.keyspaces.email`);
    expect(email.manage_subscriptions).toBe(true);
  });

  it('lists an integration keyspace created through the manifest (DEF-02, COMP-17)', async () => {
    const integration = `${NS}.integrations.keyspaces.0a1b2c3d.crm`;
    const { token } = await server.login({
      keyspaces: [
        {
          discriminator: integration,
          name: 'CRM customer id',
          description: 'Ids of the CRM integration',
          manage_subscriptions: false,
        },
      ],
      sections: [{ name: 'Shop' }],
    });
    const body = await get(token, '/audience/keyspaces');
    expect(body.items).toContainEqual({
      discriminator: integration,
      name: 'CRM customer id',
      description: 'Ids of the CRM integration',
      manage_subscriptions: false,
    });
    expect(body.items.map((k: { discriminator: string }) => k.discriminator)).toContain(`${NS}.keyspaces.email`);
    // The integration keyspace is one of the keyspaces permissions are given for.
    const attributes = await get(
      token,
      `/audience/sections/${SHOP_SECTION}/attributes?include_keyspace_permissions=true`,
    );
    expect(attributes.items[0].keyspace_permissions[integration]).toEqual(['read', 'write']);
  });
});

describe('GET /audience/channels', () => {
  it('lists the email, sms and web channels (DEF-03, COMP-06)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, '/audience/channels');
    expect(Object.keys(body)).toEqual(['items']);
    const discriminators = body.items.map((c: { discriminator: string }) => c.discriminator);
    expect(discriminators).toEqual(
      expect.arrayContaining([`${NS}.channels.email`, `${NS}.channels.sms`, `${NS}.channels.web`]),
    );
    for (const c of body.items) {
      expect(Object.keys(c).sort()).toEqual(['description', 'discriminator', 'name']);
      expect(typeof c.name).toBe('string');
      expect(typeof c.description).toBe('string');
    }
  });
});

describe('GET /audience/sections/{s}/attributes', () => {
  it('lists attributes with string version ids, type arrays and date-times (DEF-05, DEF-23)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, `/audience/sections/${SHOP_SECTION}/attributes`);
    expect(Object.keys(body)).toEqual(['items']);
    for (const a of body.items) {
      expect(Object.keys(a).sort()).toEqual(['description', 'discriminator', 'name', 'versions']);
      expect(a.versions.length).toBeGreaterThan(0);
      for (const v of a.versions) {
        expect(Object.keys(v).sort()).toEqual(['deprecated_at', 'id', 'type', 'valid_from']);
        expect(v.id).toEqual(expect.stringMatching(NUMERIC_ID));
        expect(Array.isArray(v.type)).toBe(true);
        for (const t of v.type) expect(typeof t).toBe('string');
        expect(v.valid_from).toMatch(DATE_TIME);
        if (v.deprecated_at !== null) expect(v.deprecated_at).toMatch(DATE_TIME);
      }
    }
    const points = body.items.find(
      (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.points`,
    );
    expect(points).toMatchObject({ name: 'Points', description: '' });
    expect(points.versions).toHaveLength(2);
    expect(points.versions[0].type).toEqual(['Number']);
    expect(new Date(points.versions[0].deprecated_at).toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(points.versions[1].type).toEqual(['Number with decimal']);
    expect(points.versions[1].deprecated_at).toBeNull();
    expect(points.versions[0].id).not.toBe(points.versions[1].id);
  });

  it('adds keyspace_permissions only when include_keyspace_permissions=true (DEF-06)', async () => {
    const { token } = await server.login(SHOP);
    const path = `/audience/sections/${SHOP_SECTION}/attributes`;
    for (const query of ['', '?include_keyspace_permissions=false']) {
      const body = await get(token, path + query);
      expect(body.items.length).toBeGreaterThan(0);
      for (const a of body.items) expect(a).not.toHaveProperty('keyspace_permissions');
    }
    const body = await get(token, `${path}?include_keyspace_permissions=true`);
    expect(body.items.length).toBeGreaterThan(0);
    for (const a of body.items) {
      expect(typeof a.keyspace_permissions).toBe('object');
      expect(Object.keys(a.keyspace_permissions).length).toBeGreaterThan(0);
      for (const [keyspace, operations] of Object.entries(a.keyspace_permissions)) {
        expect(keyspace).toMatch(/^com\.vendor1\./);
        expect(Array.isArray(operations)).toBe(true);
        for (const op of operations as string[]) expect(['read', 'write']).toContain(op);
      }
    }
  });

  it('gives the keyspace_permissions of the manifest as they were declared (DEF-06)', async () => {
    const permissions = {
      [`${NS}.keyspaces.email`]: ['read' as const],
      [`${NS}.keyspaces.crm-id`]: ['read' as const, 'write' as const],
    };
    const { token } = await server.login({
      sections: [
        {
          name: 'Shop',
          attributes: [{ name: 'Score', keyspace_permissions: permissions, versions: [{ type: ['Number'] }] }],
        },
      ],
    });
    const body = await get(token, `/audience/sections/${SHOP_SECTION}/attributes?include_keyspace_permissions=true`);
    const score = body.items.find(
      (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.score`,
    );
    expect(score.keyspace_permissions).toEqual(permissions);
  });

  it('refuses an include_keyspace_permissions that is not a boolean (DEF-06, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request(
      'GET',
      `/audience/sections/${SHOP_SECTION}/attributes?include_keyspace_permissions=maybe`,
      { token },
    );
    expectProblem(res, 400, 'include_keyspace_permissions');
  });

  it('leaves hidden attributes out (DEF-07)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, `/audience/sections/${SHOP_SECTION}/attributes?include_keyspace_permissions=true`);
    const discriminators = body.items.map((a: { discriminator: string }) => a.discriminator);
    expect(discriminators).toContain(`${NS}.attributes.user-created.points`);
    expect(discriminators).not.toContain(`${NS}.attributes.user-created.secret`);
  });

  it('lists e-commerce attributes only while an e-commerce integration is connected (DEF-08)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const path = `/audience/sections/${SHOP_SECTION}/attributes`;
    const basket = `${NS}.attributes.user-created.basket-value`;
    const before = (await get(token, path)).items.map((a: { discriminator: string }) => a.discriminator);
    expect(before).not.toContain(basket);
    // Default and custom attributes are there all along.
    expect(before).toEqual(
      expect.arrayContaining([
        `${NS}.attributes.email`,
        `${NS}.attributes.firstname`,
        `${NS}.attributes.user-created.points`,
      ]),
    );

    const connected = copy(SHOP);
    connected.sections![0].ecommerce_connected = true;
    expect((await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, connected)).body.changed).toEqual([
      `section ${SHOP_SECTION}`,
    ]);
    const during = (await get(token, path)).items.map((a: { discriminator: string }) => a.discriminator);
    expect(during).toContain(basket);
    expect(during).not.toContain(`${NS}.attributes.user-created.secret`);
    expect(during.length).toBe(before.length + 1);

    expect((await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, SHOP)).status).toBe(200);
    expect((await get(token, path)).items.map((a: { discriminator: string }) => a.discriminator)).not.toContain(basket);
  });

  it('defines email, mobile and crmid with the same discriminators in every section (DEF-09)', async () => {
    const { token } = await server.login({
      sections: [
        { name: 'Shop', attributes: [{ name: 'Points', versions: [{ type: ['Number'] }] }] },
        { name: 'Magazine' },
      ],
    });
    const sections = (await get(token, '/audience/sections')).items;
    expect(sections).toHaveLength(2);
    const defaultsOf = async (section: string) =>
      (await get(token, `/audience/sections/${section}/attributes`)).items
        .filter((a: { discriminator: string }) => !a.discriminator.includes('.user-created.'))
        .map((a: { discriminator: string; name: string }) => ({ discriminator: a.discriminator, name: a.name }));
    const shop = await defaultsOf(sections[0].discriminator);
    const magazine = await defaultsOf(sections[1].discriminator);
    const discriminators = shop.map((a: { discriminator: string }) => a.discriminator);
    expect(discriminators).toEqual(
      expect.arrayContaining([`${NS}.attributes.email`, `${NS}.attributes.mobile`, `${NS}.attributes.crmid`]),
    );
    expect(magazine).toEqual(shop);
    // Same discriminator, but a definition of each section: version ids differ.
    const versionId = async (section: string) =>
      (await get(token, `/audience/sections/${section}/attributes`)).items.find(
        (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.email`,
      ).versions[0].id;
    expect(await versionId(sections[0].discriminator)).not.toBe(await versionId(sections[1].discriminator));
  });
});

describe('tags', () => {
  const tagsPath = `/audience/sections/${SHOP_SECTION}/tags`;

  it('lists tags with discriminator, name and id, leaving hidden tags out (DEF-10, DEF-07, COMP-06)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, tagsPath);
    expect(body).toEqual({
      items: [{ discriminator: `${NS}.tags.user-created.vip`, name: 'VIP', id: expect.stringMatching(NUMERIC_ID) }],
    });
  });

  it('adds keyspace_permissions to tags only when asked (DEF-06)', async () => {
    const { token } = await server.login(SHOP);
    for (const query of ['', '?include_keyspace_permissions=false']) {
      const list = await get(token, tagsPath + query);
      expect(list.items[0]).not.toHaveProperty('keyspace_permissions');
      const one = await get(token, `${tagsPath}/${NS}.tags.user-created.vip${query}`);
      expect(one).not.toHaveProperty('keyspace_permissions');
    }
    const list = await get(token, `${tagsPath}?include_keyspace_permissions=true`);
    expect(list.items[0].keyspace_permissions[`${NS}.keyspaces.email`]).toEqual(['read', 'write']);
    expect(list.items[0].keyspace_permissions[`${NS}.keyspaces.export`]).toEqual(['read']);
    const one = await get(token, `${tagsPath}/${NS}.tags.user-created.vip?include_keyspace_permissions=true`);
    expect(one).toEqual({ ...list.items[0] });
  });

  it('creates a tag: 201, then in the list and the single GET (DEF-11)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', tagsPath, { token, body: { name: 'Summer sale' } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      discriminator: `${NS}.tags.user-created.summer-sale`,
      name: 'Summer sale',
      id: expect.stringMatching(NUMERIC_ID),
    });
    const list = await get(token, tagsPath);
    expect(list.items).toContainEqual(res.body);
    expect(await get(token, `${tagsPath}/${res.body.discriminator}`)).toEqual(res.body);
    const withPermissions = await get(token, `${tagsPath}/${res.body.discriminator}?include_keyspace_permissions=true`);
    expect(withPermissions).toMatchObject(res.body);
    expect(withPermissions.keyspace_permissions[`${NS}.keyspaces.email`]).toEqual(['read', 'write']);
  });

  it('gives a second tag of the same name its own discriminator (DEF-11)', async () => {
    const { token } = await server.login(SHOP);
    const first = await server.request('POST', tagsPath, { token, body: { name: 'Repeat' } });
    const second = await server.request('POST', tagsPath, { token, body: { name: 'Repeat' } });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body.discriminator).not.toBe(first.body.discriminator);
    expect(second.body.id).not.toBe(first.body.id);
    const names = (await get(token, tagsPath)).items.filter((t: { name: string }) => t.name === 'Repeat');
    expect(names).toHaveLength(2);
  });

  it('accepts names of 1 and 255 characters (DEF-12)', async () => {
    const { token } = await server.login(SHOP);
    for (const name of ['x', 'y'.repeat(255)]) {
      const res = await server.request('POST', tagsPath, { token, body: { name } });
      expect(res.status, res.text).toBe(201);
      expect(res.body.name).toBe(name);
    }
  });

  it('refuses a missing, empty, too long or non-text name with 400 naming "name" (DEF-12, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    for (const body of [{}, { name: '' }, { name: 'z'.repeat(256) }, { name: 42 }, { name: null }]) {
      expectProblem(await server.request('POST', tagsPath, { token, body }), 400, '"name"');
    }
    // Nothing was created.
    expect((await get(token, tagsPath)).items).toHaveLength(1);
  });

  it('ignores unknown body fields, as the platform does: the tag is created from its name alone (DEF-11)', async () => {
    const { token } = await server.login(SHOP);
    const created = await server.request('POST', tagsPath, { token, body: { name: 'Fine', colour: 'red' } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      discriminator: `${NS}.tags.user-created.fine`,
      name: 'Fine',
      id: expect.any(String),
    });
    expect((await get(token, tagsPath)).items).toHaveLength(2);
  });

  it('refuses a tag body that is not a JSON object (DEF-11, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    expectProblem(
      await server.request('POST', tagsPath, {
        token,
        raw: '{"name":',
        headers: { 'content-type': 'application/json' },
      }),
      400,
    );
    expectProblem(await server.request('POST', tagsPath, { token, body: ['VIP'] }), 400);
  });

  it('refuses the tag beyond the per-section limit with 400 (DEF-13)', async () => {
    const { token } = await bare('Shop', {
      tags_per_section: 2,
      requests_per_second: null,
      token_requests_per_minute: null,
    });
    for (const name of ['One', 'Two'])
      expect((await server.request('POST', tagsPath, { token, body: { name } })).status).toBe(201);
    expectProblem(await server.request('POST', tagsPath, { token, body: { name: 'Three' } }), 400);
    expect((await get(token, tagsPath)).items.map((t: { name: string }) => t.name)).toEqual(['One', 'Two']);
  });

  it('counts the limit per section (DEF-13)', async () => {
    const { token } = await server.login(
      { sections: [{ name: 'Shop' }, { name: 'Magazine' }] },
      { tags_per_section: 1, requests_per_second: null, token_requests_per_minute: null },
    );
    expect((await server.request('POST', tagsPath, { token, body: { name: 'One' } })).status).toBe(201);
    expect(
      (
        await server.request('POST', `/audience/sections/${NS}.sections.user-created.magazine/tags`, {
          token,
          body: { name: 'One' },
        })
      ).status,
    ).toBe(201);
    expectProblem(await server.request('POST', tagsPath, { token, body: { name: 'Two' } }), 400);
  });

  it('has a default limit of 200 tags per section (DEF-13)', async () => {
    const { token } = await bare('Shop');
    for (let i = 1; i <= 200; i++) {
      const res = await server.request('POST', tagsPath, { token, body: { name: `Tag ${i}` } });
      expect(res.status, `tag ${i}: ${res.text}`).toBe(201);
    }
    expectProblem(await server.request('POST', tagsPath, { token, body: { name: 'Tag 201' } }), 400);
    expect((await get(token, tagsPath)).items).toHaveLength(200);
  });

  it('answers 404 for an unknown tag (DEF-14)', async () => {
    const { token } = await server.login(SHOP);
    expectProblem(await server.request('GET', `${tagsPath}/${NS}.tags.user-created.nope`, { token }), 404);
    expectProblem(
      await server.request('GET', `${tagsPath}/${NS}.tags.user-created.nope?include_keyspace_permissions=true`, {
        token,
      }),
      404,
    );
  });

  it('renames a tag: 200 with the new name and the same discriminator and id (DEF-15)', async () => {
    const { token } = await server.login(SHOP);
    const vip = `${tagsPath}/${NS}.tags.user-created.vip`;
    const before = await get(token, vip);
    const res = await server.request('PUT', vip, { token, body: { name: 'Very important' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ discriminator: `${NS}.tags.user-created.vip`, name: 'Very important', id: before.id });
    expect(await get(token, vip)).toEqual(res.body);
    expect((await get(token, tagsPath)).items).toEqual([res.body]);
  });

  it('refuses a rename without a valid name, and of an unknown tag (DEF-15)', async () => {
    const { token } = await server.login(SHOP);
    const vip = `${tagsPath}/${NS}.tags.user-created.vip`;
    for (const body of [{}, { name: '' }, { name: 'w'.repeat(256) }])
      expectProblem(await server.request('PUT', vip, { token, body }), 400, '"name"');
    expectProblem(
      await server.request('PUT', `${tagsPath}/${NS}.tags.user-created.nope`, { token, body: { name: 'New' } }),
      404,
    );
    expect((await get(token, vip)).name).toBe('VIP');
  });
});

describe('GET /audience/sections/{s}/events', () => {
  it('lists events whose version type describes the data fields (DEF-16, DEF-23, COMP-06)', async () => {
    const { token } = await server.login(SHOP);
    const body = await get(token, `/audience/sections/${SHOP_SECTION}/events`);
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items).toHaveLength(1);
    const [event] = body.items;
    expect(Object.keys(event).sort()).toEqual(['description', 'discriminator', 'name', 'versions']);
    expect(event).toMatchObject({ discriminator: `${NS}.events.page-view`, name: 'Page view', description: '' });
    expect(event.versions).toHaveLength(1);
    const [version] = event.versions;
    expect(version.id).toEqual(expect.stringMatching(NUMERIC_ID));
    expect(version.deprecated_at).toBeNull();
    expect(version.valid_from).toMatch(DATE_TIME);
    for (const field of version.type) expect(typeof field).toBe('object');
  });

  it('describes the page-view event with the string fields of the SPEC sample (DEF-24)', async () => {
    const { token } = await server.login(SHOP);
    const [event] = (await get(token, `/audience/sections/${SHOP_SECTION}/events`)).items;
    const fields = event.versions[0].type as { name: string; type: string }[];
    expect(fields.map((f) => f.name).sort()).toEqual(['activityId', 'device', 'id', 'location', 'title', 'url']);
    for (const f of fields) expect(f.type).toBe('Text');
  });

  it('adds keyspace_permissions to events only when asked, and leaves hidden events out (DEF-06, DEF-07)', async () => {
    const manifest = copy(SHOP);
    manifest.sections![0].events!.push({
      name: 'Internal',
      hidden: true,
      versions: [{ type: [{ name: 'x', type: 'Text' }] }],
    });
    const { token } = await server.login(manifest);
    const path = `/audience/sections/${SHOP_SECTION}/events`;
    for (const query of ['', '?include_keyspace_permissions=false']) {
      const body = await get(token, path + query);
      expect(body.items.map((e: { discriminator: string }) => e.discriminator)).toEqual([`${NS}.events.page-view`]);
      expect(body.items[0]).not.toHaveProperty('keyspace_permissions');
    }
    const body = await get(token, `${path}?include_keyspace_permissions=true`);
    expect(body.items.map((e: { discriminator: string }) => e.discriminator)).toEqual([`${NS}.events.page-view`]);
    expect(body.items[0].keyspace_permissions[`${NS}.keyspaces.email`]).toEqual(['read', 'write']);
  });
});

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

describe('unknown sections', () => {
  it('answer 404 on every section-scoped definition route (DEF-22, ERR-11)', async () => {
    const { token } = await server.login(SHOP);
    const s = `${NS}.sections.user-created.nowhere`;
    const tag = `${NS}.tags.user-created.vip`;
    const calls: [string, string, unknown?][] = [
      ['GET', `/audience/sections/${s}/attributes`],
      ['GET', `/audience/sections/${s}/attributes?include_keyspace_permissions=true`],
      ['GET', `/audience/sections/${s}/tags`],
      ['POST', `/audience/sections/${s}/tags`, { name: 'New' }],
      ['GET', `/audience/sections/${s}/tags/${tag}`],
      ['PUT', `/audience/sections/${s}/tags/${tag}`, { name: 'New' }],
      ['GET', `/audience/sections/${s}/events`],
      ['GET', `/v2/audience/sections/${s}/topics`],
      ['GET', `/folders/topic/sections/${s}/folders`],
    ];
    for (const [method, path, body] of calls) {
      const res = await server.request(method, path, { token, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expectProblem(res, 404, s);
    }
  });
});

describe('discriminators in paths', () => {
  it('keeps dots as part of the identifier, never a file extension (COMP-11)', async () => {
    const feed = `${NS}.sections.user-created.feed.json`;
    const report = `${NS}.tags.user-created.report.xml`;
    const { token } = await server.login({
      sections: [
        { name: 'Feed', discriminator: feed, tags: [{ name: 'Report', discriminator: report }] },
        { name: 'Feed plain', discriminator: `${NS}.sections.user-created.feed` },
      ],
    });
    const tags = await get(token, `/audience/sections/${feed}/tags`);
    expect(tags.items).toEqual([{ discriminator: report, name: 'Report', id: expect.stringMatching(NUMERIC_ID) }]);
    expect((await get(token, `/audience/sections/${feed}/tags/${report}`)).discriminator).toBe(report);
    expect((await get(token, `/audience/sections/${NS}.sections.user-created.feed/tags`)).items).toEqual([]);
    expect((await get(token, `/audience/sections/${feed}/attributes`)).items.length).toBeGreaterThan(0);
    expectProblem(
      await server.request('GET', `/audience/sections/${feed}/tags/${NS}.tags.user-created.report`, { token }),
      404,
    );
  });

  it('reaches the same section and tag through a percent-encoded path segment (COMP-11)', async () => {
    const { token } = await server.login(SHOP);
    const encode = (d: string) => d.replaceAll('.', '%2E').replaceAll('-', '%2D');
    const plain = await get(token, `/audience/sections/${SHOP_SECTION}/tags`);
    expect(await get(token, `/audience/sections/${encode(SHOP_SECTION)}/tags`)).toEqual(plain);
    expect(await get(token, `/audience/sections/${encodeURIComponent(SHOP_SECTION)}/attributes`)).toEqual(
      await get(token, `/audience/sections/${SHOP_SECTION}/attributes`),
    );
    expect(
      await get(token, `/audience/sections/${encode(SHOP_SECTION)}/tags/${encode(`${NS}.tags.user-created.vip`)}`),
    ).toEqual(plain.items[0]);
    const created = await server.request('POST', `/audience/sections/${encode(SHOP_SECTION)}/tags`, {
      token,
      body: { name: 'Encoded' },
    });
    expect(created.status).toBe(201);
    expect((await get(token, `/audience/sections/${SHOP_SECTION}/tags`)).items).toContainEqual(created.body);
    expect(await get(token, `/audience/segments/${encode(`${NS}.segments.user-created.big-spenders`)}`)).toEqual(
      await get(token, `/audience/segments/${NS}.segments.user-created.big-spenders`),
    );
  });

  it('keeps "+" as "+" in a discriminator, raw or encoded (COMP-11)', async () => {
    const plus = `${NS}.tags.user-created.a+b`;
    const { token } = await server.login({
      sections: [{ name: 'Shop', tags: [{ name: 'A+B', discriminator: plus }] }],
    });
    expect((await get(token, `/audience/sections/${SHOP_SECTION}/tags/${plus}`)).discriminator).toBe(plus);
    expect(
      (await get(token, `/audience/sections/${SHOP_SECTION}/tags/${encodeURIComponent(plus)}`)).discriminator,
    ).toBe(plus);
  });
});

describe('tenant isolation', () => {
  it('never shows one account the sections, tags or segments of another (DEF-04, DEF-14, DEF-20, DEF-21, DEF-22, AUTH-17)', async () => {
    const a = await server.login({
      ...SHOP,
      sections: [{ ...SHOP.sections![0], name: 'Alpha', discriminator: `${NS}.sections.user-created.alpha` }],
      segments: [
        {
          name: 'Alpha people',
          section: `${NS}.sections.user-created.alpha`,
          versions: [{ query: 'section({section}).attribute({attribute:com.vendor1.attributes.email}).neq("")' }],
        },
      ],
    });
    const b = await server.login({ sections: [{ name: 'Beta', tags: [{ name: 'Beta tag' }] }] });
    const aSections = (await get(a.token, '/audience/sections')).items;
    const bSections = (await get(b.token, '/audience/sections')).items;
    expect(aSections.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      `${NS}.sections.user-created.alpha`,
    ]);
    expect(bSections.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      `${NS}.sections.user-created.beta`,
    ]);
    expect(aSections[0].id).not.toBe(bSections[0].id);

    const alpha = `${NS}.sections.user-created.alpha`;
    for (const path of [
      `/audience/sections/${alpha}/attributes`,
      `/audience/sections/${alpha}/tags`,
      `/audience/sections/${alpha}/events`,
      `/v2/audience/sections/${alpha}/topics`,
      `/folders/topic/sections/${alpha}/folders`,
      `/audience/sections/${alpha}/tags/${NS}.tags.user-created.vip`,
    ]) {
      expectProblem(await server.request('GET', path, { token: b.token }), 404);
    }
    expectProblem(
      await server.request('POST', `/audience/sections/${alpha}/tags`, { token: b.token, body: { name: 'Intruder' } }),
      404,
    );
    expectProblem(
      await server.request('PUT', `/audience/sections/${alpha}/tags/${NS}.tags.user-created.vip`, {
        token: b.token,
        body: { name: 'Intruder' },
      }),
      404,
    );
    expect((await get(a.token, `/audience/sections/${alpha}/tags/${NS}.tags.user-created.vip`)).name).toBe('VIP');

    const segments = (await get(a.token, '/audience/segments')).items;
    expect(segments).toHaveLength(1);
    expect(await get(b.token, '/audience/segments')).toEqual({ items: [] });
    expectProblem(
      await server.request('GET', `/audience/segments/${segments[0].discriminator}`, { token: b.token }),
      404,
    );
    expectProblem(
      await server.request(
        'GET',
        `/audience/segments/${segments[0].discriminator}/versions/${segments[0].versions[0].id}`,
        { token: b.token },
      ),
      404,
    );
  });

  it('keeps a tag created in one account invisible to another with the same section (DEF-11, DEF-14, DEF-15, AUTH-17)', async () => {
    const a = await server.login(SHOP);
    const b = await server.login(SHOP);
    const created = await server.request('POST', `/audience/sections/${SHOP_SECTION}/tags`, {
      token: a.token,
      body: { name: 'Only A' },
    });
    expect(created.status).toBe(201);
    expect((await get(a.token, `/audience/sections/${SHOP_SECTION}/tags`)).items).toContainEqual(created.body);
    const bTags = (await get(b.token, `/audience/sections/${SHOP_SECTION}/tags`)).items;
    expect(bTags.map((t: { name: string }) => t.name)).toEqual(['VIP']);
    expectProblem(
      await server.request('GET', `/audience/sections/${SHOP_SECTION}/tags/${created.body.discriminator}`, {
        token: b.token,
      }),
      404,
    );
    // The same name in B gets the same discriminator, but B's own tag.
    const inB = await server.request('POST', `/audience/sections/${SHOP_SECTION}/tags`, {
      token: b.token,
      body: { name: 'Only A' },
    });
    expect(inB.status).toBe(201);
    expect(inB.body.discriminator).toBe(created.body.discriminator);
    expect(inB.body.id).not.toBe(created.body.id);
    // Renaming in B leaves A's tag as it was.
    expect(
      (
        await server.request('PUT', `/audience/sections/${SHOP_SECTION}/tags/${inB.body.discriminator}`, {
          token: b.token,
          body: { name: 'Renamed in B' },
        })
      ).status,
    ).toBe(200);
    expect((await get(a.token, `/audience/sections/${SHOP_SECTION}/tags/${created.body.discriminator}`)).name).toBe(
      'Only A',
    );
  });
});

describe('PUT /admin/accounts/{id}/manifest', () => {
  /** Everything the public API shows of the shop section, with ids. */
  async function snapshot(token: string) {
    const s = SHOP_SECTION;
    return {
      keyspaces: await get(token, '/audience/keyspaces'),
      channels: await get(token, '/audience/channels'),
      sections: await get(token, '/audience/sections'),
      attributes: await get(token, `/audience/sections/${s}/attributes?include_keyspace_permissions=true`),
      tags: await get(token, `/audience/sections/${s}/tags?include_keyspace_permissions=true`),
      events: await get(token, `/audience/sections/${s}/events?include_keyspace_permissions=true`),
      topics: await get(token, `/v2/audience/sections/${s}/topics`),
      folders: await get(token, `/folders/topic/sections/${s}/folders`),
      segments: await get(token, '/audience/segments'),
    };
  }

  it('is idempotent: re-applying the same manifest keeps ids and adds nothing (DEF-01, DEF-05, DEF-10, DEF-16, DEF-17, DEF-19, DEF-23)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const before = await snapshot(token);
    for (let i = 0; i < 2; i++) {
      const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, SHOP);
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ created: [], changed: [] });
    }
    expect(await snapshot(token)).toEqual(before);
  });

  it('is idempotent whatever the key order of event fields, which the database does not keep (DEF-16)', async () => {
    const manifest: Manifest = {
      sections: [
        {
          name: 'Shop',
          events: [
            {
              name: 'Purchase',
              versions: [
                {
                  type: [
                    { type: 'Text', name: 'orderId' },
                    { name: 'total', description: 'Sum paid', type: 'Number with decimal' } as {
                      name: string;
                      type: string;
                    },
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    const { token, accountId } = await server.login(manifest);
    const before = await snapshot(token);
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest);
    expect(res.body, res.text).toMatchObject({ created: [], changed: [] });
    expect(await snapshot(token)).toEqual(before);
    const [purchase] = before.events.items;
    expect(purchase.versions[0].type).toEqual([
      { name: 'orderId', type: 'Text' },
      { name: 'total', description: 'Sum paid', type: 'Number with decimal' },
    ]);
  });

  it('adds new items and versions on re-apply without touching the others (DEF-05, DEF-10)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const before = await snapshot(token);
    const next = copy(SHOP);
    next.sections![0].attributes![0].versions.push({ type: ['Text'] });
    next.sections![0].tags!.push({ name: 'Gold' });
    const applied = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, next);
    expect(applied.status).toBe(200);
    // The summary names what changed: a new tag, and the attribute with a new version.
    expect(applied.body.created).toEqual([`tag ${NS}.tags.user-created.gold in section ${SHOP_SECTION}`]);
    expect(applied.body.changed).toEqual([`attribute ${NS}.attributes.user-created.points in section ${SHOP_SECTION}`]);
    expect(applied.body.unchanged).toEqual(
      expect.arrayContaining([`account ${accountId}`, `section ${SHOP_SECTION}`, `keyspace ${NS}.keyspaces.email`]),
    );
    const after = await snapshot(token);
    const points = (x: typeof before) =>
      x.attributes.items.find(
        (a: { discriminator: string }) => a.discriminator === `${NS}.attributes.user-created.points`,
      );
    expect(points(after).versions.slice(0, 2)).toEqual(points(before).versions);
    expect(points(after).versions[2]).toMatchObject({ type: ['Text'], deprecated_at: null });
    expect(after.tags.items[0]).toEqual(before.tags.items[0]);
    expect(after.tags.items.map((t: { name: string }) => t.name)).toEqual(['VIP', 'Gold']);
  });

  it('refuses to change the type of a stored attribute version with 409, changing nothing (DEF-05)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const before = await snapshot(token);
    const changed = copy(SHOP);
    changed.sections![0].attributes![0].versions[1].type = ['Text'];
    changed.sections![0].tags!.push({ name: 'Should not appear' });
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, changed);
    expectProblem(res, 409, `${NS}.attributes.user-created.points`);
    expect(await snapshot(token)).toEqual(before);
  });

  it('refuses to change the data fields of a stored event version, or a stored segment query, with 409 (DEF-16, DEF-19)', async () => {
    const { accountId } = await server.login(SHOP);
    const event = copy(SHOP);
    event.sections![0].events![0].versions[0].type = [{ name: 'url', type: 'Text' }];
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, event),
      409,
      `${NS}.events.page-view`,
    );
    const segment = copy(SHOP);
    segment.segments![0].versions[0].query =
      'section({section}).attribute({attribute:com.vendor1.attributes.email}).neq("")';
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, segment),
      409,
      `${NS}.segments.user-created.big-spenders`,
    );
  });

  it('refuses keyspace_permissions naming an unknown keyspace with 400 (DEF-06, ERR-12)', async () => {
    const { accountId } = await server.login(SHOP);
    const unknown = `${NS}.keyspaces.nowhere`;
    const manifests: Manifest[] = [
      {
        sections: [
          {
            name: 'Shop',
            attributes: [{ name: 'X', keyspace_permissions: { [unknown]: ['read'] }, versions: [{ type: ['Text'] }] }],
          },
        ],
      },
      { sections: [{ name: 'Shop', tags: [{ name: 'X', keyspace_permissions: { [unknown]: ['read'] } }] }] },
      {
        sections: [
          {
            name: 'Shop',
            events: [
              {
                name: 'X',
                keyspace_permissions: { [unknown]: ['read'] },
                versions: [{ type: [{ name: 'a', type: 'Text' }] }],
              },
            ],
          },
        ],
      },
    ];
    for (const manifest of manifests)
      expectProblem(await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest), 400, unknown);
  });

  it('refuses a topic naming an unknown channel, or an unknown folder, with 400 (DEF-17, ERR-12)', async () => {
    const { accountId } = await server.login(SHOP);
    const channel = `${NS}.channels.pigeon`;
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
        sections: [{ name: 'Shop', topics: [{ name: 'Birds', channel }] }],
      }),
      400,
      channel,
    );
    const folder = `${NS}.topic-folders.user-created.nowhere`;
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
        sections: [{ name: 'Shop', topics: [{ name: 'Lost', folder }] }],
      }),
      400,
      folder,
    );
  });

  it('refuses topic folders whose parents form a cycle with 400, changing nothing (DEF-18)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const f = (name: string) => `${NS}.topic-folders.user-created.${name}`;
    const cycle: Manifest = {
      sections: [
        {
          name: 'Shop',
          topic_folders: [
            { name: 'Ping', parent: f('pong') },
            { name: 'Pong', parent: f('ping') },
          ],
          topics: [{ name: 'Lost', folder: f('ping') }],
        },
      ],
    };
    const refused = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, cycle);
    expectProblem(refused, 400, 'cycle');
    expect(refused.body.type).toBe('/errors/AUD-1113');
    // Through a folder stored before: News is the parent of Weekly, so News cannot move under Weekly.
    const moved = copy(SHOP);
    moved.sections![0].topic_folders = [{ name: 'News', parent: f('weekly') }];
    expectProblem(await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, moved), 400, 'cycle');
    expect(
      (await get(token, `/folders/topic/sections/${SHOP_SECTION}/folders`)).subfolders.map(
        (x: { name: string }) => x.name,
      ),
    ).toEqual(['News']);
  });

  it('refuses a topic folder that is its own parent with 400 AUD-1112, changing nothing (DEF-18)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const ping = `${NS}.topic-folders.user-created.ping`;
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
      sections: [{ name: 'Shop', topic_folders: [{ name: 'Ping', parent: ping }] }],
    });
    expectProblem(res, 400, 'own parent');
    expect(res.body.type).toBe('/errors/AUD-1112');
    expect(
      (await get(token, `/folders/topic/sections/${SHOP_SECTION}/folders`)).subfolders.map(
        (x: { name: string }) => x.name,
      ),
    ).toEqual(['News']);
  });

  it('refuses a segment query that refers to ids without naming its section with 400 AUD-1114 (DEF-19)', async () => {
    const { accountId } = await server.login(SHOP);
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
      segments: [
        {
          name: 'No section',
          versions: [
            { query: `section({section}).attribute({attribute:${NS}.attributes.user-created.points@1}).gt(1)` },
          ],
        },
      ],
    });
    expectProblem(res, 400, 'section');
    expect(res.body.type).toBe('/errors/AUD-1114');
  });

  it('refuses a manifest whose account limits name no limit (AUD-1115) or leave its range (AUD-1116) (LIM-12)', async () => {
    const { accountId } = await server.login(SHOP);
    const put = (limits: Record<string, number>) =>
      server.admin('PUT', `/admin/accounts/${accountId}/manifest`, { account: { limits } });
    const unknown = await put({ widgets_per_second: 1 });
    expectProblem(unknown, 400, 'limits.widgets_per_second');
    expect(unknown.body.type).toBe('/errors/AUD-1115');
    const short = await put({ token_lifetime_seconds: 60 });
    expectProblem(short, 400, 'limits.token_lifetime_seconds');
    expect(short.body.type).toBe('/errors/AUD-1116');
  });

  it('refuses a segment query naming an unknown attribute version with 400 (DEF-19, ERR-12)', async () => {
    const { accountId } = await server.login(SHOP);
    const manifest: Manifest = {
      segments: [
        {
          name: 'Bad',
          section: SHOP_SECTION,
          versions: [
            { query: `section({section}).attribute({attribute:${NS}.attributes.user-created.points@9}).gt(1)` },
          ],
        },
      ],
    };
    expectProblem(await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest), 400, 'points');
  });

  it('refuses a segment whose query is not valid AQL, with the AQL error (AQL-12, AQL-25)', async () => {
    const { accountId, token } = await server.login(SHOP);
    const manifest: Manifest = {
      segments: [{ name: 'Named', versions: [{ query: 'section("shop").attribute(1).eq(1)' }] }],
    };
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest);
    expectProblem(res, 400, 'section specifier');
    expect(res.body.type).toMatch(/AUD-1702$/);
    expect((await get(token, '/audience/segments')).items.map((x: { name: string }) => x.name)).toEqual([
      'Big spenders',
    ]);
  });

  it('refuses an invalid manifest with 400 naming the field at fault (ERR-10)', async () => {
    const { accountId } = await server.login(SHOP);
    const put = (body: unknown) => server.admin('PUT', `/admin/accounts/${accountId}/manifest`, body);
    expectProblem(await put({ sections: [{ name: 'Shop', colour: 'red' }] }), 400, 'sections[0].colour');
    expectProblem(await put({ widgets: [] }), 400, 'widgets');
    expectProblem(
      await put({ sections: [{ name: 'Shop', attributes: [{ name: 'X', versions: [{ type: ['Colour'] }] }] }] }),
      400,
      'sections[0].attributes[0].versions[0].type[0]',
    );
    expectProblem(await put({ sections: [{ description: 'no name' }] }), 400, 'sections[0].name');
    expectProblem(
      await put({ sections: [{ name: 'Shop', tags: [{ name: 'q'.repeat(256) }] }] }),
      400,
      'sections[0].tags[0].name',
    );
  });

  it('answers 404 for an unknown account, and 401 without the operator token (ERR-01, ERR-02)', async () => {
    expectProblem(await server.admin('PUT', '/admin/accounts/999999999/manifest', SHOP), 404);
    const { token, accountId } = await server.login(SHOP);
    expectProblem(await server.request('PUT', `/admin/accounts/${accountId}/manifest`, { token, body: SHOP }), 401);
  });

  it('applies the demo manifest cleanly (DEF-02, DEF-08, DEF-24, COMP-17)', async () => {
    const demo = JSON.parse(await readFile(new URL('../../manifests/demo.json', import.meta.url), 'utf8')) as Manifest;
    const { token, accountId } = await server.login(demo);
    const again = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, demo);
    expect(again.body).toMatchObject({ created: [], changed: [] });
    const keyspaces = (await get(token, '/audience/keyspaces')).items.map(
      (k: { discriminator: string }) => k.discriminator,
    );
    expect(keyspaces).toContain(`${NS}.integrations.keyspaces.5f2b9c1e.shop`);
    const sections = (await get(token, '/audience/sections')).items;
    expect(sections.map((s: { name: string }) => s.name)).toEqual(['Shop', 'Magazine']);
    const attributes = (await get(token, `/audience/sections/${SHOP_SECTION}/attributes`)).items.map(
      (a: { discriminator: string }) => a.discriminator,
    );
    expect(attributes).toContain(`${NS}.attributes.user-created.lifetime-value`);
    expect(attributes).not.toContain(`${NS}.attributes.user-created.internal-score`);
    const pageView = (await get(token, `/audience/sections/${SHOP_SECTION}/events`)).items.find(
      (e: { discriminator: string }) => e.discriminator === `${NS}.events.page-view`,
    );
    expect(pageView.versions[0].type.map((f: { name: string }) => f.name).sort()).toEqual([
      'activityId',
      'device',
      'id',
      'location',
      'title',
      'url',
    ]);
    const segments = (await get(token, '/audience/segments')).items;
    expect(segments).toHaveLength(2);
    for (const s of segments) for (const v of s.versions) expect(v.query).not.toMatch(/[{}]/);
    expect(segments[0].versions[1].query).toMatch(
      new RegExp(`^section\\(${sections[0].id}\\)\\.attribute\\(\\d+\\)\\.gt\\(100\\)$`),
    );
    const account = await server.admin('GET', `/admin/accounts/${accountId}`);
    expect(account.body.name).toBe('Demo');
  });
});

describe('/admin/accounts/{id}/integrations (COMP-17)', () => {
  const MAGENTO = /^com\.vendor1\.integrations\.keyspaces\.[0-9a-f]{8}\.magento$/;
  const integrations = (accountId: string) => `/admin/accounts/${accountId}/integrations`;

  it('creates an integration keyspace once per system, lists it, and /audience/keyspaces shows it (COMP-17, DEF-02)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const first = await server.admin('POST', integrations(accountId), { system: 'magento' });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ system: 'magento', discriminator: expect.stringMatching(MAGENTO) });
    // Connecting it again answers the keyspace it has.
    const again = await server.admin('POST', integrations(accountId), { system: 'magento' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await server.admin('GET', integrations(accountId))).body).toEqual({ items: [first.body] });
    expect((await get(token, '/audience/keyspaces')).items).toContainEqual({
      discriminator: first.body.discriminator,
      name: 'magento customer id',
      description: 'Customer ids of the magento integration',
      manage_subscriptions: false,
    });
  });

  it('locates profiles and writes what the other keyspaces may by default, not what a manifest restricted (COMP-17, PROF-01)', async () => {
    const restricted = `${NS}.attributes.user-created.restricted`;
    const { token, accountId } = await server.login({
      sections: [
        {
          name: 'Shop',
          attributes: [
            {
              name: 'Restricted',
              keyspace_permissions: { [`${NS}.keyspaces.email`]: ['read'] },
              versions: [{ type: ['Text'] }],
            },
          ],
        },
      ],
    });
    const ks = (await server.admin('POST', integrations(accountId), { system: 'magento' })).body.discriminator;
    const attributes = (
      await get(token, `/audience/sections/${SHOP_SECTION}/attributes?include_keyspace_permissions=true`)
    ).items;
    const attribute = (d: string) => attributes.find((a: { discriminator: string }) => a.discriminator === d);
    expect(attribute(`${NS}.attributes.firstname`).keyspace_permissions[ks]).toEqual(['read', 'write']);
    expect(attribute(restricted).keyspace_permissions).toEqual({ [`${NS}.keyspaces.email`]: ['read'] });

    const profile = `/audience/keyspaces/${ks}/profiles/customer-42/sections/${SHOP_SECTION}`;
    expect(
      (
        await server.request('POST', `/audience/keyspaces/${ks}/sections/${SHOP_SECTION}/profiles`, {
          token,
          body: { profile_key: 'customer-42' },
        })
      ).status,
    ).toBe(201);
    const firstname = attribute(`${NS}.attributes.firstname`).versions[0].id;
    const patch = await server.request('PATCH', `${profile}/attributes`, {
      token,
      body: { [firstname]: 'Ann' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(patch.status, patch.text).toBe(204);
    expect(await get(token, `${profile}/attributes`)).toEqual({ [firstname]: 'Ann' });
  });

  it('connects the integrations a manifest lists, keeping the keyspace of one connected before (COMP-17)', async () => {
    const { accountId } = await server.login(SHOP);
    const magento = (await server.admin('POST', integrations(accountId), { system: 'magento' })).body;
    const applied = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
      integrations: [{ system: 'magento' }, { system: 'shopware' }],
    });
    expect(applied.status).toBe(200);
    expect(applied.body.created).toEqual([
      expect.stringMatching(/^keyspace com\.vendor1\.integrations\.keyspaces\.[0-9a-f]{8}\.shopware$/),
    ]);
    expect(applied.body.unchanged).toContain(`keyspace ${magento.discriminator}`);
    // The new keyspace joins the default permissions of the attributes there.
    expect(applied.body.changed).toContain(`attribute ${NS}.attributes.email in section ${SHOP_SECTION}`);
    const listed = (await server.admin('GET', integrations(accountId))).body.items;
    expect(listed.map((i: { system: string }) => i.system)).toEqual(['magento', 'shopware']);
  });

  it('refuses a system that is not a lower-case word, naming the field, and answers 404 for an unknown account (ERR-01)', async () => {
    const { accountId } = await server.login(SHOP);
    expectProblem(await server.admin('POST', integrations(accountId), { system: 'Magento 2' }), 400, 'system');
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, { integrations: [{ system: '' }] }),
      400,
      'integrations[0].system',
    );
    expectProblem(await server.admin('POST', integrations('999999999'), { system: 'magento' }), 404);
    expectProblem(await server.admin('GET', integrations('999999999')), 404);
  });
});

describe('VENDOR configuration (COMP-01)', () => {
  let acme: TestServer;
  beforeAll(async () => {
    acme = await TestServer.start({ VENDOR: 'acme' });
  });
  afterAll(async () => acme?.close());

  it('builds the built-in identifiers from the vendor word (COMP-01, DEF-02, DEF-03, DEF-09)', async () => {
    const { token } = await acme.login({ sections: [{ name: 'Shop' }] });
    const keyspaces = (await acme.request('GET', '/audience/keyspaces', { token })).body.items.map(
      (k: { discriminator: string }) => k.discriminator,
    );
    for (const name of ['email', 'mobile', 'crm-id', 'export', 'transactional-email', 'web', 'sms'])
      expect(keyspaces).toContain(`com.acme1.keyspaces.${name}`);
    const channels = (await acme.request('GET', '/audience/channels', { token })).body.items.map(
      (c: { discriminator: string }) => c.discriminator,
    );
    expect(channels).toEqual(
      expect.arrayContaining(['com.acme1.channels.email', 'com.acme1.channels.sms', 'com.acme1.channels.web']),
    );
    const sections = (await acme.request('GET', '/audience/sections', { token })).body.items;
    expect(sections[0].discriminator).toBe('com.acme1.sections.user-created.shop');
    const attributes = (
      await acme.request(
        'GET',
        '/audience/sections/com.acme1.sections.user-created.shop/attributes?include_keyspace_permissions=true',
        { token },
      )
    ).body.items;
    expect(attributes.map((a: { discriminator: string }) => a.discriminator)).toEqual(
      expect.arrayContaining([
        'com.acme1.attributes.email',
        'com.acme1.attributes.mobile',
        'com.acme1.attributes.crmid',
      ]),
    );
    const folders = (
      await acme.request('GET', '/folders/topic/sections/com.acme1.sections.user-created.shop/folders', { token })
    ).body;
    expect(folders.discriminator).toBe('com.acme1.topic-folders.root');
    // Nothing says "vendor" anywhere.
    for (const body of [keyspaces, channels, sections, attributes, folders])
      expect(JSON.stringify(body)).not.toContain('vendor');
  });

  it('fills {vendor} in manifests, e.g. the demo manifest (COMP-01, COMP-17)', async () => {
    const demo = JSON.parse(await readFile(new URL('../../manifests/demo.json', import.meta.url), 'utf8')) as Manifest;
    const { token } = await acme.login(demo);
    const keyspaces = (await acme.request('GET', '/audience/keyspaces', { token })).body.items.map(
      (k: { discriminator: string }) => k.discriminator,
    );
    expect(keyspaces).toContain('com.acme1.integrations.keyspaces.5f2b9c1e.shop');
    const topics = (
      await acme.request('GET', '/v2/audience/sections/com.acme1.sections.user-created.shop/topics', { token })
    ).body.items;
    expect(topics.map((t: { folder_discriminator: string }) => t.folder_discriminator)).toEqual([
      'com.acme1.topic-folders.user-created.weekly',
      'com.acme1.topic-folders.user-created.offers',
      'com.acme1.topic-folders.user-created.offers',
      'com.acme1.topic-folders.root',
    ]);
    const segments = (await acme.request('GET', '/audience/segments', { token })).body.items;
    expect(segments.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      'com.acme1.segments.user-created.loyal-customers',
      'com.acme1.segments.user-created.recent-visitors',
    ]);
    expect(JSON.stringify({ keyspaces, topics, segments })).not.toContain('vendor');
  });
});

import { describe, expect, it } from 'vitest';
import { SHOP } from '../../test/app.ts';
import {
  DATE_TIME,
  NS,
  NUMERIC_ID,
  SHOP_SECTION,
  bare,
  copy,
  definitionsServer,
  expectProblem,
  get,
  server,
} from '../../test/definitions-http.ts';

// Tag and event definitions through real HTTP.

definitionsServer();

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
    // The first 199 through the account's manifest (one request, not 199), the last two through the route.
    const { token } = await server.login({
      sections: [{ name: 'Shop', tags: Array.from({ length: 199 }, (_, i) => ({ name: `Tag ${i + 1}` })) }],
    });
    const last = await server.request('POST', tagsPath, { token, body: { name: 'Tag 200' } });
    expect(last.status, last.text).toBe(201);
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

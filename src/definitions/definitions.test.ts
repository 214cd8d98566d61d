import { describe, expect, it } from 'vitest';
import { SHOP } from '../../test/app.ts';
import {
  DATE_TIME,
  NS,
  NUMERIC_ID,
  SHOP_SECTION,
  copy,
  definitionsServer,
  expectProblem,
  get,
  server,
} from '../../test/definitions-http.ts';

// Definitions through real HTTP: sections, keyspaces, channels and attributes; unknown sections,
// discriminators in paths, and the isolation of accounts.

definitionsServer();

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

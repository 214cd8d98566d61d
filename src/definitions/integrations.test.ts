import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer } from '../../test/app.ts';
import type { Manifest } from './schemas.ts';
import { NS, SHOP_SECTION, definitionsServer, expectProblem, get, server } from '../../test/definitions-http.ts';

// Integrations connected through the operator API, and the VENDOR word of discriminators.

definitionsServer();

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

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { SHOP } from '../../test/app.ts';
import type { Manifest } from './schemas.ts';
import { NS, SHOP_SECTION, copy, definitionsServer, expectProblem, get, server } from '../../test/definitions-http.ts';

// The manifest of an account's definitions, applied through the operator API.

definitionsServer();

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
    expect(refused.body.type).toBe('/errors/AUD-1114');
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

  it('refuses a topic folder that is its own parent with 400 AUD-1113, changing nothing (DEF-18)', async () => {
    const { token, accountId } = await server.login(SHOP);
    const ping = `${NS}.topic-folders.user-created.ping`;
    const res = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
      sections: [{ name: 'Shop', topic_folders: [{ name: 'Ping', parent: ping }] }],
    });
    expectProblem(res, 400, 'own parent');
    expect(res.body.type).toBe('/errors/AUD-1113');
    expect(
      (await get(token, `/folders/topic/sections/${SHOP_SECTION}/folders`)).subfolders.map(
        (x: { name: string }) => x.name,
      ),
    ).toEqual(['News']);
  });

  it('refuses a segment query that refers to ids without naming its section with 400 AUD-1115 (DEF-19)', async () => {
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
    expect(res.body.type).toBe('/errors/AUD-1115');
  });

  it('refuses a manifest whose account limits name no limit (AUD-1116) or leave its range (AUD-1117) (LIM-12)', async () => {
    const { accountId } = await server.login(SHOP);
    const put = (limits: Record<string, number>) =>
      server.admin('PUT', `/admin/accounts/${accountId}/manifest`, { account: { limits } });
    const unknown = await put({ widgets_per_second: 1 });
    expectProblem(unknown, 400, 'limits.widgets_per_second');
    expect(unknown.body.type).toBe('/errors/AUD-1116');
    const short = await put({ token_lifetime_seconds: 60 });
    expectProblem(short, 400, 'limits.token_lifetime_seconds');
    expect(short.body.type).toBe('/errors/AUD-1117');
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

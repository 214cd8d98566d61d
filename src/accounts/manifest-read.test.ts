import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { expectProblem, SHOP } from '../../test/app.ts';
import { httpServer, server } from '../../test/http-server.ts';
import { DEMO_MANIFEST } from '../server.ts';

// GET /admin/accounts/{id}/manifest: the account as a manifest, which the console's manifest editor
// loads. The round trip is the contract: read it, preview it, apply it, and nothing is created or
// changed.

httpServer();

const NS = 'com.vendor1';
/** A manifest with something of every kind a manifest holds. */
const RICH = {
  ...SHOP,
  account: { limits: { requests_per_second: 40, pending_imports: null } },
  integrations: [{ system: 'shopify' }],
  sections: [
    ...SHOP.sections!,
    {
      name: 'Club',
      description: 'Members',
      attributes: [
        { name: 'Level', versions: [{ type: ['Text'], deprecated_at: '2025-01-01T00:00:00Z' }, { type: ['Number'] }] },
        {
          name: 'Secret',
          hidden: true,
          keyspace_permissions: { [`${NS}.keyspaces.email`]: ['read'] },
          versions: [{ type: ['Text'] }],
        },
      ],
      tags: [{ name: 'Gold', hidden: true }],
      events: [{ name: 'Visit', versions: [{ type: [{ name: 'url', type: 'Text' }] }] }],
      topic_folders: [{ name: 'News' }, { name: 'Local', parent: `${NS}.topic-folders.user-created.news` }],
      topics: [
        { name: 'Weekly', folder: `${NS}.topic-folders.user-created.local`, channel: `${NS}.channels.email` },
        { name: 'Offers' },
      ],
    },
  ],
  segments: [
    {
      name: 'Gold members',
      section: `${NS}.sections.user-created.club`,
      versions: [{ query: `section({section}).attribute({attribute:${NS}.attributes.user-created.level@2}).gt(2)` }],
    },
  ],
  suppressions: [{ channel_discriminator: `${NS}.channels.email`, address: 'gone@example.com', reason: 'asked' }],
  activities: [
    {
      id: 'welcome',
      kind: 'email',
      section_discriminator: `${NS}.sections.user-created.club`,
      name: 'Welcome',
      email_subject: 'Hello',
      html: '<p>Hello</p>',
    },
    {
      id: 'old-sms',
      kind: 'sms',
      section_discriminator: `${NS}.sections.user-created.club`,
      name: 'Old',
      text: 'Hi',
      archived: true,
    },
  ],
};

async function roundTrip(accountId: string): Promise<void> {
  const read = await server.admin('GET', `/admin/accounts/${accountId}/manifest`);
  expect(read.status, read.text).toBe(200);
  const manifest = read.body;
  const preview = await server.admin('POST', `/admin/accounts/${accountId}/manifest/preview`, manifest);
  expect(preview.status, preview.text).toBe(200);
  expect(preview.body.created).toEqual([]);
  expect(preview.body.changed).toEqual([]);
  const applied = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest);
  expect(applied.status, applied.text).toBe(200);
  expect(applied.body.created).toEqual([]);
  expect(applied.body.changed).toEqual([]);
  expect(applied.body.unchanged.length).toBeGreaterThan(10);
  // And the account reads the same afterwards.
  expect((await server.admin('GET', `/admin/accounts/${accountId}/manifest`)).body).toEqual(manifest);
}

describe('GET /admin/accounts/{id}/manifest', () => {
  it('answers a manifest that, previewed and applied back, creates and changes nothing', async () => {
    const { accountId } = await server.createAccount(RICH as never);
    const manifest = (await server.admin('GET', `/admin/accounts/${accountId}/manifest`)).body;
    expect(manifest.account.limits).toEqual({ requests_per_second: 40, pending_imports: null });
    const club = manifest.sections.find((s: { name: string }) => s.name === 'Club');
    expect(club.topic_folders).toEqual([
      { discriminator: `${NS}.topic-folders.user-created.news`, name: 'News' },
      {
        discriminator: `${NS}.topic-folders.user-created.local`,
        name: 'Local',
        parent: `${NS}.topic-folders.user-created.news`,
      },
    ]);
    expect(manifest.suppressions).toEqual(RICH.suppressions);
    expect(manifest.activities.map((a: { id: string; archived: boolean }) => [a.id, a.archived])).toEqual(
      expect.arrayContaining([
        ['welcome', false],
        ['old-sms', true],
      ]),
    );
    await roundTrip(accountId);
  });

  it('round-trips the demo account’s manifest', async () => {
    const demo = JSON.parse(await fs.readFile(DEMO_MANIFEST, 'utf8'));
    const { accountId } = await server.createAccount({ ...demo, account: {} });
    await roundTrip(accountId);
  });

  it('round-trips an activity created as sent at a time before its creation (AUD-2006 no more)', async () => {
    const { accountId } = await server.createAccount(SHOP);
    const sent = await server.admin('POST', `/admin/accounts/${accountId}/activities`, {
      kind: 'email',
      section_discriminator: `${NS}.sections.user-created.shop`,
      name: 'Spring sale',
      email_subject: 'Spring',
      html: '<p>Spring</p>',
      status: 'sent',
      sent_at: '2025-03-01T10:00:00Z',
    });
    expect(sent.status, sent.text).toBe(201);
    expect(sent.body.created_at).toBe('2025-03-01T10:00:00.000Z');
    await roundTrip(accountId);
  });

  it('takes account names of 1 to 255 characters, naming the field beyond, in create, change and manifest', async () => {
    const long = 'x'.repeat(256);
    const fits = `${'y'.repeat(215)} ${crypto.randomUUID()}`;
    expect(fits.length).toBe(252);
    const created = await server.admin('POST', '/admin/accounts', { name: fits });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id;
    expect(expectProblem(await server.admin('POST', '/admin/accounts', { name: long }), 400)).toContain('name');
    expect(expectProblem(await server.admin('PATCH', `/admin/accounts/${id}`, { name: long }), 400)).toContain('name');
    expect(
      expectProblem(await server.admin('PUT', `/admin/accounts/${id}/manifest`, { account: { name: long } }), 400),
    ).toContain('name');
    expect(expectProblem(await server.admin('PUT', '/admin/manifest', { account: { name: long } }), 400)).toContain(
      'name',
    );
    // Nothing changed, and no account of that name was made.
    expect((await server.admin('GET', `/admin/accounts/${id}`)).body.name).toBe(fits);
    const names = (await server.admin('GET', '/admin/accounts')).body.items.map((a: { name: string }) => a.name);
    expect(names).not.toContain(long);
  });

  it('answers 404 AUD-1110 for an unknown account and 400 naming the field for a bad id; needs the operator token', async () => {
    expectProblem(await server.admin('GET', '/admin/accounts/999999/manifest'), 404, 'AUD-1110');
    expect(expectProblem(await server.admin('GET', '/admin/accounts/abc/manifest'), 400)).toContain('account_id');
    const { accountId, clientId, clientSecret } = await server.createAccount();
    const token = await server.token({ clientId, clientSecret });
    expect((await server.request('GET', `/admin/accounts/${accountId}/manifest`, { token })).status).toBe(401);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, TestServer } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { accountScope } from '../services.ts';
import { getActivity } from './activities.ts';

// Activities (SPEC §2.14, §4.8; docs/activities.md) through the operator API and the public reads.

const NS = 'com.vendor1';
const EMAIL = `${NS}.keyspaces.email`;
const SHOP = `${NS}.sections.user-created.shop`;
const BLOG = `${NS}.sections.user-created.blog`;
const NEWS = `${NS}.topics.user-created.news`;
const MANIFEST: Manifest = {
  sections: [
    { name: 'Shop', topics: [{ name: 'News', channel: `${NS}.channels.email` }] },
    { name: 'Blog' },
  ],
};

let server: TestServer;
let accountId: string;
let token: string;

const admin = (method: string, path: string, body?: unknown) => server.admin(method, `/admin/accounts/${accountId}${path}`, body);
const get = (path: string) => server.request('GET', path, { token });
const ingest = (items: unknown) => admin('POST', '/activity-events', items);

const email = (over: Record<string, unknown> = {}) => ({
  kind: 'email', section_discriminator: SHOP, name: 'Spring sale', status: 'sent', created_at: '2026-03-01T10:00:00.000Z', sent_at: '2026-03-02T08:00:00.000Z',
  email_subject: 'Spring is here', sender_name: 'Shop', sender_email_address: 'news@shop.example', ...over,
});
const event = (activity: string, type: string, key: string, correlation: string, over: Record<string, unknown> = {}) => ({
  activity_id: activity, type, keyspace_discriminator: EMAIL, profile_key: key, correlation_id: correlation, event_time: '2026-03-02T09:00:00.000Z', ...over,
});

beforeAll(async () => {
  server = await TestServer.start();
  const login = await server.login(MANIFEST);
  accountId = login.accountId;
  token = login.token;
});
afterAll(async () => server?.close());

describe('the operator writes activities', () => {
  it('creates an email activity with a generated id, and answers every field, transactional ones included', async () => {
    const created = await admin('POST', '/activities', email({ transactional: true, preheader: 'Pre', reply_to: 'reply@shop.example', html: '<p>Hi {{ name }}</p>', text: 'Hi {{ name }}' }));
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ kind: 'email', name: 'Spring sale', status: 'sent', transactional: true, preheader: 'Pre', reply_to: 'reply@shop.example', html: '<p>Hi {{ name }}</p>', text: 'Hi {{ name }}', archived_at: null });
    expect(created.body.id).toMatch(/^\d+$/);
    expect((await admin('GET', `/activities/${created.body.id}`)).body).toEqual(created.body);
  });

  it('getActivity gives another area the whole activity of a section; 404 in another section', async () => {
    const created = (await admin('PUT', '/activities/tx-welcome', email({ transactional: true, html: '<b>Welcome</b>' }))).body;
    const scope = await accountScope(server.services, accountId);
    const shop = scope.defs.sections.find((s) => s.discriminator === SHOP)!;
    const blog = scope.defs.sections.find((s) => s.discriminator === BLOG)!;
    expect(await getActivity(server.services.pool, scope, shop.id, 'tx-welcome')).toEqual(created);
    await expect(getActivity(server.services.pool, scope, blog.id, 'tx-welcome')).rejects.toMatchObject({ code: 'AUD-2001' });
  });

  it('PUT creates (201) then changes (200) an activity with a chosen id; kind and section cannot change (409)', async () => {
    expect((await admin('PUT', '/activities/auto-1', { kind: 'marketing-automation', section_discriminator: SHOP, name: 'Welcome flow', trigger_type: 'api', status: 'active' })).status).toBe(201);
    const changed = await admin('PUT', '/activities/auto-1', { kind: 'marketing-automation', section_discriminator: SHOP, name: 'Welcome flow 2', trigger_type: 'api', status: 'finished' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ name: 'Welcome flow 2', status: 'finished', description: '', trigger_type: 'api' });
    expectProblem(await admin('PUT', '/activities/auto-1', { kind: 'website', section_discriminator: SHOP, name: 'x' }), 409, 'AUD-2002');
    expectProblem(await admin('PUT', '/activities/auto-1', { kind: 'marketing-automation', section_discriminator: BLOG, name: 'x' }), 409, 'AUD-2002');
  });

  it('refuses a field of another kind, naming it', async () => {
    const detail = expectProblem(await admin('POST', '/activities', { kind: 'website', section_discriminator: SHOP, name: 'Site', email_subject: 'x' }), 400, 'AUD-0');
    expect(detail).toContain('email_subject');
  });

  it('archives an activity: it leaves the public routes', async () => {
    const id = (await admin('POST', '/activities', { kind: 'website', section_discriminator: SHOP, name: 'Old site' })).body.id;
    expect((await get(`/website/sections/${SHOP}/activities/${id}`)).status).toBe(200);
    expect((await admin('DELETE', `/activities/${id}`)).status).toBe(204);
    expectProblem(await get(`/website/sections/${SHOP}/activities/${id}`), 404, 'AUD-2001');
    expect((await get(`/website/sections/${SHOP}/activities`)).body.items.map((a: { id: string }) => a.id)).not.toContain(id);
    expect((await admin('GET', `/activities/${id}`)).body.archived_at).not.toBeNull();
  });
});

describe('events of activities', () => {
  it('records a batch once, as profile events of the built-in type, counted in the statistics (ACT-04, ACT-05)', async () => {
    const id = (await admin('PUT', '/activities/mail-1', email())).body.id;
    const before = (await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body;
    expect(before.statistics).toBeUndefined();
    const batch = [
      event(id, 'SENT', 'a@example.com', 's1'), event(id, 'SENT', 'b@example.com', 's2'),
      event(id, 'DELIVERED', 'a@example.com', 'd1'), event(id, 'DELIVERED', 'b@example.com', 'd2'),
      event(id, 'OPENED', 'a@example.com', 'o1', { device: 'MOBILE', location: 'NO' }), event(id, 'OPENED', 'a@example.com', 'o2'),
      event(id, 'CLICKED', 'a@example.com', 'c1', { link_id: 'l1', link_url: 'https://shop.example/sale', link_title: 'Sale' }),
      event(id, 'UNSUBSCRIBED', 'b@example.com', 'u1', { unsubscribe_topic: NEWS }),
    ];
    const first = await ingest(batch);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ received: 8, recorded: 8, duplicates: 0, skipped: [] });
    expect((await ingest(batch)).body).toEqual({ received: 8, recorded: 0, duplicates: 8, skipped: [] });
    const statistics = (await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body.statistics;
    expect(statistics).toEqual({
      sent: 2, delivered: 2, delivery_rate: 1, opens: 2, unique_opens: 1, open_rate: 0.5, clicks: 1, unique_clicks: 1, click_rate: 0.5,
      click_to_open_rate: 1, bounces: 0, bounce_rate: 0, unsubscribes: 1, unsubscribe_rate: 0.5, spam_complaints: 0, spam_complaint_rate: 0,
    });
    // The profile events of the built-in type carry the activity's id (ACT-21).
    const events = (await get(`/audience/keyspaces/${EMAIL}/profiles/a@example.com/sections/${SHOP}/events`)).body.items;
    expect(events).toHaveLength(5);
    expect(events.find((e: { correlation_id: string }) => e.correlation_id === 'c1').data).toEqual({ activityId: id, type: 'CLICKED', linkId: 'l1', linkUrl: 'https://shop.example/sale', linkTitle: 'Sale' });
    // The UNSUBSCRIBED event with a topic opted b out of it.
    const consents = (await get(`/v2/audience/keyspaces/${EMAIL}/profiles/b@example.com/sections/${SHOP}/consents`)).body.items;
    expect(consents).toEqual([expect.objectContaining({ topic_discriminator: NEWS, type: 'opt-out' })]);
  });

  it('takes JSON lines', async () => {
    const id = (await admin('PUT', '/activities/mail-lines', email())).body.id;
    const lines = [event(id, 'SENT', 'c@example.com', 'x1'), event(id, 'SENT', 'd@example.com', 'x2')].map((e) => JSON.stringify(e)).join('\n');
    const res = await server.request('POST', `/admin/accounts/${accountId}/activity-events`, { token: server.services.adminToken, raw: `${lines}\n`, headers: { 'content-type': 'application/x-ndjson' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.recorded).toBe(2);
  });

  it('refuses a bad event naming the item and field, and records nothing of the batch', async () => {
    const id = (await admin('PUT', '/activities/mail-bad', email())).body.id;
    const bad = [
      [event(id, 'SENT', 'e@example.com', 'b1'), event(id, 'OPENED', 'e@example.com', 'b2', { bounce_code: 2001 })],
      [event(id, 'SENT', 'e@example.com', 'b1'), event(id, 'VIEWED', 'e@example.com', 'b2')],
      [event(id, 'SENT', 'e@example.com', 'b1'), event('nope', 'SENT', 'e@example.com', 'b2')],
      [event(id, 'SENT', 'e@example.com', 'b1'), event(id, 'SENT', 'not an address', 'b2')],
      [event(id, 'SENT', 'e@example.com', 'b1'), event(id, 'UNSUBSCRIBED', 'e@example.com', 'b2', { unsubscribe_topic: 'nope' })],
    ];
    const fields = ['items[1].bounce_code', 'items[1].type', 'items[1].activity_id', 'items[1].profile_key', 'items[1].unsubscribe_topic'];
    for (const [i, batch] of bad.entries()) expect(expectProblem(await ingest(batch), 400)).toContain(fields[i]);
    expect(expectProblem(await ingest([event(id, 'SENT', 'e@example.com', 'b1'), { ...event(id, 'SENT', 'e@example.com', 'b2'), type: 'SHOUTED' }]), 400)).toContain('items[1].type');
    expect((await admin('GET', `/activities/${id}`)).status).toBe(200);
    expect((await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body.statistics).toBeUndefined();
  });
});

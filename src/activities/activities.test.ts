import { describe, expect, it } from 'vitest';
import { activityEvent, EMAIL, NS, serverWithAccount, SHOP, type AccountAdmin } from '../../test/activities.ts';
import { expectProblem, TestServer } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { countSegment } from '../segments/segments.ts';
import { accountScope } from '../services.ts';
import { getActivity } from './activities.ts';

// Activities (SPEC §2.14, §4.8; docs/activities.md) through the operator API and the public reads.

const BLOG = `${NS}.sections.user-created.blog`;
const NEWS = `${NS}.topics.user-created.news`;
const MANIFEST: Manifest = {
  sections: [{ name: 'Shop', topics: [{ name: 'News', channel: `${NS}.channels.email` }] }, { name: 'Blog' }],
};

let server: TestServer;
let accountId: string;
let token: string;
let admin: AccountAdmin;
serverWithAccount(MANIFEST, (a) => {
  ({ server, accountId, token, admin } = a);
});

const get = (path: string) => server.request('GET', path, { token });
const ingest = (items: unknown) => admin('POST', '/activity-events', items);

const email = (over: Record<string, unknown> = {}) => ({
  kind: 'email',
  section_discriminator: SHOP,
  name: 'Spring sale',
  status: 'sent',
  created_at: '2026-03-01T10:00:00.000Z',
  sent_at: '2026-03-02T08:00:00.000Z',
  email_subject: 'Spring is here',
  sender_name: 'Shop',
  sender_email_address: 'news@shop.example',
  ...over,
});
const event = (activity: string, type: string, key: string, correlation: string, over: Record<string, unknown> = {}) =>
  activityEvent(activity, type, key, correlation, { event_time: '2026-03-02T09:00:00.000Z', ...over });

describe('the operator writes activities', () => {
  it('creates an email activity with a generated id, and answers every field, transactional ones included', async () => {
    const created = await admin(
      'POST',
      '/activities',
      email({
        transactional: true,
        preheader: 'Pre',
        reply_to: 'reply@shop.example',
        html: '<p>Hi {{ name }}</p>',
        text: 'Hi {{ name }}',
      }),
    );
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({
      kind: 'email',
      name: 'Spring sale',
      status: 'sent',
      transactional: true,
      preheader: 'Pre',
      reply_to: 'reply@shop.example',
      html: '<p>Hi {{ name }}</p>',
      text: 'Hi {{ name }}',
      archived_at: null,
    });
    expect(created.body.id).toMatch(/^\d+$/);
    expect((await admin('GET', `/activities/${created.body.id}`)).body).toEqual(created.body);
  });

  it('getActivity gives another area the whole activity of a section; 404 in another section', async () => {
    const created = (
      await admin('PUT', '/activities/tx-welcome', email({ transactional: true, html: '<b>Welcome</b>' }))
    ).body;
    const scope = await accountScope(server.services, accountId);
    const shop = scope.defs.sections.find((s) => s.discriminator === SHOP)!;
    const blog = scope.defs.sections.find((s) => s.discriminator === BLOG)!;
    expect(await getActivity(server.services.pool, scope, shop.id, 'tx-welcome')).toEqual(created);
    await expect(getActivity(server.services.pool, scope, blog.id, 'tx-welcome')).rejects.toMatchObject({
      code: 'AUD-2001',
    });
  });

  it('PUT creates (201) then changes (200) an activity with a chosen id; kind and section cannot change (409)', async () => {
    expect(
      (
        await admin('PUT', '/activities/auto-1', {
          kind: 'marketing-automation',
          section_discriminator: SHOP,
          name: 'Welcome flow',
          trigger_type: 'api',
          status: 'active',
        })
      ).status,
    ).toBe(201);
    const changed = await admin('PUT', '/activities/auto-1', {
      kind: 'marketing-automation',
      section_discriminator: SHOP,
      name: 'Welcome flow 2',
      trigger_type: 'api',
      status: 'finished',
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({
      name: 'Welcome flow 2',
      status: 'finished',
      description: '',
      trigger_type: 'api',
    });
    expectProblem(
      await admin('PUT', '/activities/auto-1', { kind: 'website', section_discriminator: SHOP, name: 'x' }),
      409,
      'AUD-2002',
    );
    expectProblem(
      await admin('PUT', '/activities/auto-1', {
        kind: 'marketing-automation',
        section_discriminator: BLOG,
        name: 'x',
      }),
      409,
      'AUD-2002',
    );
  });

  it('refuses a field of another kind, naming it', async () => {
    const detail = expectProblem(
      await admin('POST', '/activities', {
        kind: 'website',
        section_discriminator: SHOP,
        name: 'Site',
        email_subject: 'x',
      }),
      400,
      'AUD-2005',
    );
    expect(detail).toContain('email_subject');
  });

  it('refuses an activity sent before it was created, naming sent_at (AUD-2006)', async () => {
    const detail = expectProblem(
      await admin('POST', '/activities', {
        ...email(),
        created_at: '2026-01-02T00:00:00Z',
        sent_at: '2026-01-01T00:00:00Z',
      }),
      400,
      'AUD-2006',
    );
    expect(detail).toContain('sent_at');
  });

  it('archives an activity: it leaves the public routes', async () => {
    const id = (await admin('POST', '/activities', { kind: 'website', section_discriminator: SHOP, name: 'Old site' }))
      .body.id;
    expect((await get(`/website/sections/${SHOP}/activities/${id}`)).status).toBe(200);
    expect((await admin('DELETE', `/activities/${id}`)).status).toBe(204);
    expectProblem(await get(`/website/sections/${SHOP}/activities/${id}`), 404, 'AUD-2001');
    expect(
      (await get(`/website/sections/${SHOP}/activities`)).body.items.map((a: { id: string }) => a.id),
    ).not.toContain(id);
    expect((await admin('GET', `/activities/${id}`)).body.archived_at).not.toBeNull();
  });
});

describe('events of activities', () => {
  it('records a batch once, as profile events of the built-in type, counted in the statistics (ACT-04, ACT-05)', async () => {
    const id = (await admin('PUT', '/activities/mail-1', email())).body.id;
    const before = (await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body;
    expect(before.statistics).toBeUndefined();
    const batch = [
      event(id, 'SENT', 'a@example.com', 's1'),
      event(id, 'SENT', 'b@example.com', 's2'),
      event(id, 'DELIVERED', 'a@example.com', 'd1'),
      event(id, 'DELIVERED', 'b@example.com', 'd2'),
      event(id, 'OPENED', 'a@example.com', 'o1', { device: 'MOBILE', location: 'NO' }),
      event(id, 'OPENED', 'a@example.com', 'o2'),
      event(id, 'CLICKED', 'a@example.com', 'c1', {
        link_id: 'l1',
        link_url: 'https://shop.example/sale',
        link_title: 'Sale',
      }),
      event(id, 'UNSUBSCRIBED', 'b@example.com', 'u1', { unsubscribe_topic: NEWS }),
    ];
    const first = await ingest(batch);
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ received: 8, recorded: 8, duplicates: 0, skipped: [] });
    expect((await ingest(batch)).body).toEqual({ received: 8, recorded: 0, duplicates: 8, skipped: [] });
    const statistics = (await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body.statistics;
    expect(statistics).toEqual({
      sent: 2,
      delivered: 2,
      delivery_rate: 1,
      opens: 2,
      unique_opens: 1,
      open_rate: 0.5,
      clicks: 1,
      unique_clicks: 1,
      click_rate: 0.5,
      click_to_open_rate: 1,
      bounces: 0,
      bounce_rate: 0,
      unsubscribes: 1,
      unsubscribe_rate: 0.5,
      spam_complaints: 0,
      spam_complaint_rate: 0,
    });
    // The profile events of the built-in type carry the activity's id (ACT-21).
    const events = (await get(`/audience/keyspaces/${EMAIL}/profiles/a@example.com/sections/${SHOP}/events`)).body
      .items;
    expect(events).toHaveLength(5);
    expect(events.find((e: { correlation_id: string }) => e.correlation_id === 'c1').data).toEqual({
      activityId: id,
      type: 'CLICKED',
      linkId: 'l1',
      linkUrl: 'https://shop.example/sale',
      linkTitle: 'Sale',
    });
    // The UNSUBSCRIBED event with a topic opted b out of it.
    const consents = (await get(`/v2/audience/keyspaces/${EMAIL}/profiles/b@example.com/sections/${SHOP}/consents`))
      .body.items;
    expect(consents).toEqual([expect.objectContaining({ topic_discriminator: NEWS, type: 'opt-out' })]);
  });

  it('takes JSON lines', async () => {
    const id = (await admin('PUT', '/activities/mail-lines', email())).body.id;
    const lines = [event(id, 'SENT', 'c@example.com', 'x1'), event(id, 'SENT', 'd@example.com', 'x2')]
      .map((e) => JSON.stringify(e))
      .join('\n');
    const res = await server.request('POST', `/admin/accounts/${accountId}/activity-events`, {
      token: server.services.adminToken,
      raw: `${lines}\n`,
      headers: { 'content-type': 'application/x-ndjson' },
    });
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
      [
        event(id, 'SENT', 'e@example.com', 'b1'),
        event(id, 'UNSUBSCRIBED', 'e@example.com', 'b2', { unsubscribe_topic: 'nope' }),
      ],
    ];
    const fields = [
      'items[1].bounce_code',
      'items[1].type',
      'items[1].activity_id',
      'items[1].profile_key',
      'items[1].unsubscribe_topic',
    ];
    for (const [i, batch] of bad.entries()) expect(expectProblem(await ingest(batch), 400)).toContain(fields[i]);
    expect(
      expectProblem(
        await ingest([
          event(id, 'SENT', 'e@example.com', 'b1'),
          { ...event(id, 'SENT', 'e@example.com', 'b2'), type: 'SHOUTED' },
        ]),
        400,
      ),
    ).toContain('items[1].type');
    expect((await admin('GET', `/activities/${id}`)).status).toBe(200);
    expect(
      (await get(`/emails/sections/${SHOP}/activities/${id}?include_statistics=true`)).body.statistics,
    ).toBeUndefined();
  });
});

describe('public reads (SPEC §4.8)', () => {
  it('ACT-01, ACT-02, ACT-03, ACT-07: the email list, newest first, at most 500, without statistics unless asked, without aql_queries', async () => {
    const login = await server.login(MANIFEST);
    const put = (id: string, created: string) =>
      server.admin(
        'PUT',
        `/admin/accounts/${login.accountId}/activities/${id}`,
        email({ created_at: created, sent_at: null, status: 'draft' }),
      );
    for (let i = 0; i < 501; i++) await put(`m${i}`, new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString());
    const list = await server.request('GET', `/emails/sections/${SHOP}/activities`, { token: login.token });
    expect(list.status).toBe(200);
    expect(list.body.items).toHaveLength(500);
    expect(list.body.items[0]).toEqual({
      id: 'm500',
      name: 'Spring sale',
      status: 'draft',
      created_at: '2026-01-01T08:20:00.000Z',
      sent_at: null,
      email_subject: 'Spring is here',
    });
    expect(list.body.items.at(-1).id).toBe('m1');
    const withStatistics = await server.request('GET', `/emails/sections/${SHOP}/activities?include_statistics=true`, {
      token: login.token,
    });
    expect(withStatistics.body.items.every((a: object) => !('statistics' in a) && !('aql_queries' in a))).toBe(true);
  });

  it('ACT-06, ACT-10, ACT-17: single email and SMS activities with aql_queries that pass AQL validation', async () => {
    const mail = (await admin('PUT', '/activities/single-mail', email())).body;
    const sms = (
      await admin('PUT', '/activities/single-sms', {
        kind: 'sms',
        section_discriminator: SHOP,
        name: 'SMS sale',
        status: 'sent',
        text: 'Sale!',
      })
    ).body;
    const readMail = (await get(`/emails/sections/${SHOP}/activities/${mail.id}`)).body;
    expect(Object.keys(readMail.aql_queries).sort()).toEqual([
      'bounces',
      'clicks',
      'delivered',
      'opens',
      'sent',
      'spam_complaints',
      'unsubscribes',
    ]);
    expect(readMail.statistics).toBeUndefined();
    const readSms = (await get(`/sms/sections/${SHOP}/activities/${sms.id}`)).body;
    expect(readSms).toEqual({
      id: 'single-sms',
      name: 'SMS sale',
      status: 'sent',
      created_at: expect.any(String),
      aql_queries: expect.any(Object),
    });
    expect(Object.keys(readSms.aql_queries).sort()).toEqual(['bounces', 'clicks', 'delivered', 'sent', 'unsubscribes']);
    // Each passes the segment count's validation (its route allows one count a second, so the domain function counts).
    const scope = await accountScope(server.services, accountId);
    for (const query of [...Object.values(readMail.aql_queries), ...Object.values(readSms.aql_queries)] as string[]) {
      expect(
        await countSegment(server.services.pool, scope, {
          section_discriminator: SHOP,
          segment: { timezone: 'UTC', segment_definition: query },
        }),
      ).toEqual({ profile_count: 0 });
    }
    // The built-in event types are listed like any other, and written only by activities.
    const events = (await get(`/audience/sections/${SHOP}/events`)).body.items.map(
      (e: { discriminator: string }) => e.discriminator,
    );
    expect(events).toEqual(expect.arrayContaining([`${NS}.events.email`, `${NS}.events.sms`, `${NS}.events.form`]));
  });

  it('ACT-11, ACT-12, ACT-13: website and marketing automation activities; trigger_types=api filters, another value is 400', async () => {
    await admin('PUT', '/activities/web-1', {
      kind: 'website',
      section_discriminator: BLOG,
      name: 'Banner',
      status: 'active',
    });
    await admin('PUT', '/activities/flow-api', {
      kind: 'marketing-automation',
      section_discriminator: BLOG,
      name: 'API flow',
      description: 'Started by the shop',
      trigger_type: 'api',
      status: 'active',
    });
    await admin('PUT', '/activities/flow-other', {
      kind: 'marketing-automation',
      section_discriminator: BLOG,
      name: 'Birthday flow',
      status: 'active',
    });
    expect((await get(`/website/sections/${BLOG}/activities/web-1`)).body).toEqual({
      id: 'web-1',
      name: 'Banner',
      status: 'active',
      created_at: expect.any(String),
    });
    const all = (await get(`/marketing-automation/sections/${BLOG}/activities`)).body.items.map(
      (a: { id: string }) => a.id,
    );
    expect(all.sort()).toEqual(['flow-api', 'flow-other']);
    expect((await get(`/marketing-automation/sections/${BLOG}/activities?trigger_types=api`)).body.items).toEqual([
      {
        id: 'flow-api',
        name: 'API flow',
        status: 'active',
        created_at: expect.any(String),
        description: 'Started by the shop',
      },
    ]);
    expectProblem(
      await get(`/marketing-automation/sections/${BLOG}/activities?trigger_types=api,event`),
      400,
      'AUD-2004',
    );
    expect((await get(`/marketing-automation/sections/${BLOG}/activities/flow-other`)).body.description).toBe('');
  });

  it('ACT-14, ACT-15, ACT-16: forms list without elements; a single form with elements once saved, and aql_queries', async () => {
    const element = {
      type: 'input_field',
      id: 'f1',
      name: 'email',
      required: true,
      placeholder: 'Your email',
      confirm_placeholder: 'Again',
      confirm: true,
    };
    await admin('PUT', '/activities/form-new', {
      kind: 'forms-and-pages',
      section_discriminator: SHOP,
      name: 'New form',
      status: 'draft',
    });
    await admin('PUT', '/activities/form-1', {
      kind: 'forms-and-pages',
      section_discriminator: SHOP,
      name: 'Signup',
      status: 'active',
      elements: [element],
    });
    await admin('PUT', '/activities/page-1', {
      kind: 'forms-and-pages',
      section_discriminator: SHOP,
      name: 'Landing',
      status: 'active',
      form_type: 'page',
    });
    const list = (await get(`/forms-and-pages/sections/${SHOP}/activities`)).body.items;
    expect(list.find((a: { id: string }) => a.id === 'form-1')).toEqual({
      id: 'form-1',
      name: 'Signup',
      status: 'active',
      created_at: expect.any(String),
    });
    const form = (await get(`/forms-and-pages/sections/${SHOP}/activities/form-1`)).body;
    expect(form.elements).toEqual([element]);
    expect(Object.keys(form.aql_queries).sort()).toEqual(['rejected', 'started', 'submitted', 'viewed']);
    expect((await get(`/forms-and-pages/sections/${SHOP}/activities/form-new`)).body.elements).toBeUndefined();
    expect((await get(`/forms-and-pages/sections/${SHOP}/activities/page-1`)).body).toEqual({
      id: 'page-1',
      name: 'Landing',
      status: 'active',
      created_at: expect.any(String),
    });
  });

  it('ACT-18: an unknown activity, one of another section or of another kind → 404', async () => {
    await admin('PUT', '/activities/only-shop', email());
    expectProblem(await get(`/emails/sections/${SHOP}/activities/unknown`), 404, 'AUD-2001');
    expectProblem(await get(`/emails/sections/${BLOG}/activities/only-shop`), 404, 'AUD-2001');
    expectProblem(await get(`/sms/sections/${SHOP}/activities/only-shop`), 404, 'AUD-2001');
    expectProblem(await get(`/emails/sections/${NS}.sections.user-created.nope/activities`), 404, 'AUD-1102');
  });
});

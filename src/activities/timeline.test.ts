import { describe, expect, it } from 'vitest';
import { activityEvent, serverWithAccount, SHOP, type AccountAdmin } from '../../test/activities.ts';
import { expectProblem, type TestServer } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';

// The service's own reads of an activity for its console: events over time by type, and its events
// (of one message by its correlation id).

const MANIFEST: Manifest = { sections: [{ name: 'Shop' }, { name: 'Blog' }] };
const BLOG = SHOP.replace('shop', 'blog');
const DAY = 86_400_000;

let server: TestServer;
let token: string;
let admin: AccountAdmin;
serverWithAccount(MANIFEST, (a) => {
  ({ server, token, admin } = a);
});

/** The start of the UTC day `days` before the server's today, plus `hours`. */
const dayAgo = (days: number, hours = 0) =>
  new Date(Math.floor(server.clock.now / DAY) * DAY - days * DAY + hours * 3_600_000).toISOString();

describe('an activity over time', () => {
  it('GET …/timeline counts events by type per day (UTC), the last point today, 0 where none; events before the window count nowhere', async () => {
    expect(
      (await admin('PUT', '/activities/news', { kind: 'email', section_discriminator: SHOP, name: 'News' })).status,
    ).toBe(201);
    const events = [
      activityEvent('news', 'SENT', 'a@example.com', 'm1', { event_time: dayAgo(2, 1) }),
      activityEvent('news', 'SENT', 'b@example.com', 'm2', { event_time: dayAgo(2, 5) }),
      activityEvent('news', 'DELIVERED', 'a@example.com', 'm1', { event_time: dayAgo(2, 6) }),
      activityEvent('news', 'OPENED', 'a@example.com', 'm1', { event_time: dayAgo(0, 0), device: 'MOBILE' }),
      activityEvent('news', 'BOUNCED', 'b@example.com', 'm2', { event_time: dayAgo(1, 3), bounce_code: 2001 }),
      activityEvent('news', 'SENT', 'c@example.com', 'm3', { event_time: dayAgo(40) }),
    ];
    expect((await admin('POST', '/activity-events', events)).status).toBe(200);
    const res = await server.request('GET', `/emails/sections/${SHOP}/activities/news/timeline?points=3`, { token });
    expect(res.status, res.text).toBe(200);
    const zero = { SENT: 0, DELIVERED: 0, OPENED: 0, CLICKED: 0, BOUNCED: 0, UNSUBSCRIBED: 0, ABUSE: 0 };
    expect(res.body).toEqual({
      unit: 'day',
      points: [
        { at: dayAgo(2), events: { ...zero, SENT: 2, DELIVERED: 1 } },
        { at: dayAgo(1), events: { ...zero, BOUNCED: 1 } },
        { at: dayAgo(0), events: { ...zero, OPENED: 1 } },
      ],
    });
    const hours = await server.request('GET', `/emails/sections/${SHOP}/activities/news/timeline?unit=hour&points=48`, {
      token,
    });
    expect(hours.body.points).toHaveLength(48);
    expect(hours.body.points.reduce((n: number, p: any) => n + p.events.BOUNCED, 0)).toBe(1);
    expect(
      (await server.request('GET', `/emails/sections/${SHOP}/activities/news/timeline`, { token })).body.points,
    ).toHaveLength(30);

    // Its events, newest first, and one message's.
    const all = await server.request('GET', `/emails/sections/${SHOP}/activities/news/events?limit=2`, { token });
    expect(all.status, all.text).toBe(200);
    expect(all.body.items.map((e: any) => e.type)).toEqual(['OPENED', 'BOUNCED']);
    const message = await server.request('GET', `/emails/sections/${SHOP}/activities/news/events?correlation_id=m1`, {
      token,
    });
    expect(message.body.items).toEqual([
      { type: 'OPENED', correlation_id: 'm1', event_time: dayAgo(0), device: 'MOBILE' },
      { type: 'DELIVERED', correlation_id: 'm1', event_time: dayAgo(2, 6) },
      { type: 'SENT', correlation_id: 'm1', event_time: dayAgo(2, 1) },
    ]);
  });

  it('refuses a bad unit or number of points (400 naming it); an activity of another section or kind is 404', async () => {
    expect(
      (
        await admin('PUT', '/activities/form', {
          kind: 'forms-and-pages',
          section_discriminator: SHOP,
          name: 'F',
          form_type: 'form',
        })
      ).status,
    ).toBeLessThan(300);
    const path = `/emails/sections/${SHOP}/activities/news/timeline`;
    expect(expectProblem(await server.request('GET', `${path}?unit=week`, { token }), 400)).toMatch(/unit/);
    expect(expectProblem(await server.request('GET', `${path}?points=367`, { token }), 400)).toMatch(/points/);
    expectProblem(
      await server.request('GET', `/emails/sections/${BLOG}/activities/news/timeline`, { token }),
      404,
      'AUD-2001',
    );
    expectProblem(
      await server.request('GET', `/sms/sections/${SHOP}/activities/news/events`, { token }),
      404,
      'AUD-2001',
    );
    const form = await server.request('GET', `/forms-and-pages/sections/${SHOP}/activities/form/timeline?points=1`, {
      token,
    });
    expect(form.body.points[0].events).toEqual({ VIEWED: 0, STARTED: 0, REJECTED: 0, SUBMITTED: 0 });
  });
});

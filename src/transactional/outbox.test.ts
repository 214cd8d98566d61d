import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';

// With SMTP_URL unset, sends end in the built-in outbox (docs/mail.md "The outbox"), so that
// `npm start` works without a mail server. A file of its own: its worker must be the only one
// taking this database's jobs.

const SHOP = 'com.vendor1.sections.user-created.shop';
let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start({}, { worker: true });
});
afterAll(async () => server?.close());

describe('the outbox (SMTP_URL unset)', () => {
  it("keeps the sent message for the operator: the send is sent, and the outbox has it whole, its HTML and text parts decoded; the list of the activity's sends shows it with its events", async () => {
    const { accountId, token } = await server.login({ sections: [{ name: 'Shop' }] });
    const activity = await server.admin('PUT', `/admin/accounts/${accountId}/activities/receipt`, {
      kind: 'email',
      section_discriminator: SHOP,
      name: 'Receipt',
      transactional: true,
      email_subject: 'Receipt {{ order }}',
      sender_email_address: 'shop@shop.example',
      html: '<p>Thanks for order {{ order }}.</p>',
    });
    expect(activity.status, activity.text).toBe(201);
    const res = await server.request('POST', `/emails/sections/${SHOP}/activities/transactional/receipt/transactions`, {
      token,
      body: {
        keyspace_discriminator: 'com.vendor1.keyspaces.email',
        profile_key: 'ann@example.com',
        to_name: 'Ann',
        to_email_address: 'ann@example.com',
        variables: { order: 'A-17' },
      },
    });
    expect(res.status, res.text).toBe(201);
    const until = Date.now() + 30_000;
    let status = 'queued';
    while (status === 'queued' && Date.now() < until) {
      status = (
        await server.request('GET', `/emails/sections/${SHOP}/activities/receipt/transactions/${res.body.id}`, {
          token,
        })
      ).body.status;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe('sent');
    const [item] = (await server.admin('GET', `/admin/accounts/${accountId}/outbox`)).body.items;
    expect(item).toMatchObject({
      transaction_id: res.body.id,
      sender: 'shop@shop.example',
      recipients: ['ann@example.com'],
      subject: 'Receipt A-17',
    });
    const message = (await server.admin('GET', `/admin/accounts/${accountId}/outbox/${item.message_id}`)).body;
    const parsed = await simpleParser(message.source);
    // Its parts decoded, for the console's sandboxed frame.
    expect(message.html).toContain('<p>Thanks for order A-17.</p>');
    expect(message.text.trim()).toBe('Thanks for order A-17.');
    expect(parsed.text?.trim()).toBe('Thanks for order A-17.');
    // The activity's sends, with their events: a delivery report makes it delivered.
    const delivered = await server.admin('POST', `/admin/accounts/${accountId}/activity-events`, [
      {
        activity_id: 'receipt',
        type: 'DELIVERED',
        keyspace_discriminator: 'com.vendor1.keyspaces.email',
        profile_key: 'ann@example.com',
        correlation_id: res.body.id,
      },
    ]);
    expect(delivered.status, delivered.text).toBe(200);
    const sends = await server.request('GET', `/emails/sections/${SHOP}/activities/receipt/transactions`, { token });
    expect(sends.status, sends.text).toBe(200);
    expect(sends.body.items).toEqual([
      {
        id: res.body.id,
        status: 'delivered',
        profile_key: 'ann@example.com',
        to_address: 'ann@example.com',
        created_at: expect.any(String),
        sent_at: expect.any(String),
        events: [
          { type: 'SENT', correlation_id: res.body.id, event_time: expect.any(String) },
          { type: 'DELIVERED', correlation_id: res.body.id, event_time: expect.any(String) },
        ],
      },
    ]);
    expect(
      (await server.request('GET', `/emails/sections/${SHOP}/activities/nothing/transactions`, { token })).status,
    ).toBe(404);
    expect(parsed.headerLines.map((h) => h.key)).toEqual(
      expect.arrayContaining(['list-unsubscribe', 'list-unsubscribe-post']),
    );
  });
});

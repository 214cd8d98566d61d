import { afterAll, beforeAll, expect } from 'vitest';
import { TestServer } from './app.ts';
import { SmtpReceiver, type ReceivedMail } from './smtp.ts';
import type { Manifest } from '../src/definitions/schemas.ts';

// What the tests of transactional sends (src/transactional/transactional-*.test.ts) share: their
// server with its worker, a real SMTP server on loopback, the account and its transactional
// activity, and the requests that send and follow a send.

/** Starts the test file's SMTP server, its server with its worker, and its account and activity, before its tests. */
export function transactionalServer(): void {
  beforeAll(async () => {
    smtp = await SmtpReceiver.start();
    server = await TestServer.start({ SMTP_URL: smtp.url(), TRACKING_URL: 'https://track.example' }, { worker: true });
    const login = await server.login(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_key_operations_per_second: null,
    });
    accountId = login.accountId;
    token = login.token;
    const created = await admin('PUT', '/activities/order-confirmation', transactionalActivity());
    expect(created.status, created.text).toBe(201);
    activity = created.body.id;
  });
  afterAll(async () => {
    await server?.close();
    await smtp?.close();
  });
}

export const NS = 'com.vendor1';
export const EMAIL = `${NS}.keyspaces.email`;
export const TX_KEYSPACE = `${NS}.keyspaces.transactional-email`;
export const SHOP = `${NS}.sections.user-created.shop`;
export const MANIFEST: Manifest = {
  sections: [{ name: 'Shop', attributes: [{ name: 'First name', versions: [{ type: ['Text'] }] }] }],
};
export const FIRST_NAME = `${NS}.attributes.user-created.first-name`;

export let server: TestServer;
export let smtp: SmtpReceiver;
export let accountId: string;
export let token: string;
export let activity: string;

export const admin = (method: string, path: string, body?: unknown) =>
  server.admin(method, `/admin/accounts/${accountId}${path}`, body);
export const sendPath = (id = activity, section = SHOP) =>
  `/emails/sections/${section}/activities/transactional/${id}/transactions`;
export const send = (body: Record<string, unknown>, id = activity) =>
  server.request('POST', sendPath(id), { token, body });
export const statusOf = (transaction: string, id = activity) =>
  server.request('GET', `/emails/sections/${SHOP}/activities/${id}/transactions/${transaction}`, { token });
export const eventsOf = async (key: string, keyspace = EMAIL) =>
  (await server.request('GET', `/audience/keyspaces/${keyspace}/profiles/${key}/sections/${SHOP}/events`, { token }))
    .body.items as {
    correlation_id: string;
    data: Record<string, unknown>;
  }[];

/** A send body with the required fields (TX-02). */
export const body = (key: string, over: Record<string, unknown> = {}) => ({
  keyspace_discriminator: EMAIL,
  profile_key: key,
  to_name: 'Ann Example',
  to_email_address: key,
  variables: { order: 'A-17' },
  ...over,
});

/** The status once the worker has dealt with the send (it leaves queued). */
export async function settled(transaction: string, id = activity, timeoutMs = 30_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await statusOf(transaction, id);
    expect(res.status, res.text).toBe(200);
    if (res.body.status !== 'queued' || Date.now() > until) return res.body.status;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The message the SMTP server received for a send. */
export async function mailOf(transaction: string): Promise<ReceivedMail> {
  for (let n = 1; ; n++) {
    const mail = (await smtp.waitFor(n)).find((m) => m.parsed.messageId === `<${transaction}@shop.example>`);
    if (mail) return mail;
  }
}

/** Sends and waits until it is dealt with; answers the transaction id and its status. */
export async function sendSettled(b: Record<string, unknown>, id = activity): Promise<{ id: string; status: string }> {
  const res = await send(b, id);
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, status: await settled(res.body.id, id) };
}

export const transactionalActivity = (over: Record<string, unknown> = {}) => ({
  kind: 'email',
  section_discriminator: SHOP,
  name: 'Order confirmation',
  status: 'active',
  transactional: true,
  email_subject: 'Order {{ order }}',
  preheader: 'Thanks, {{ profile.first_name | default: "friend" }}',
  sender_name: 'The Shop',
  sender_email_address: 'orders@shop.example',
  reply_to: 'help@shop.example',
  html: '<html><body><p>Hello {{ profile.first_name }}, order {{ order }}.</p><a href="https://shop.example/orders/{{ order }}">Your order</a> <a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>',
  ...over,
});

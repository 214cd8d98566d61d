import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import { SHOP, type Credentials, type Response, type TestServer } from './app.ts';
import type { Received } from './callbacks.ts';
import { builtIn, userCreated } from './names.ts';

// What the webhook tests share: the definitions they write through, and the checks of a delivery.

export const MANIFEST = SHOP;
export const S = userCreated('sections', 'shop');
export const EMAIL = builtIn('keyspaces', 'email');
export const EMAIL_CH = builtIn('channels', 'email');
export const WEEKLY = userCreated('topics', 'weekly-news');
export const ALL_TYPES = [
  'consent.changed',
  'profile.merged',
  'profile.unmerged',
  'profile.deleted',
  'import.finished',
  'export.finished',
];

export type Account = Credentials & { token: string };

export async function ok(res: Promise<Response>, status: number): Promise<Response> {
  const r = await res;
  expect(r.status, r.text).toBe(status);
  return r;
}

/** Subscribes `url` for the account through the public API; answers the endpoint with its secret. */
export async function subscribe(
  server: TestServer,
  a: Account,
  url: string,
  eventTypes: string[] = ALL_TYPES,
): Promise<{ id: string; secret: string }> {
  const r = await ok(
    server.request('POST', '/webhooks', { token: a.token, body: { url, event_types: eventTypes } }),
    201,
  );
  return r.body;
}

export async function createProfile(server: TestServer, a: Account, key: string): Promise<void> {
  await ok(
    server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, {
      token: a.token,
      body: { profile_key: key },
    }),
    201,
  );
}

export async function setConsent(server: TestServer, a: Account, key: string, type: 'opt-in' | 'opt-out') {
  const r = await server.request(
    'POST',
    `/v2/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}/sections/${S}/consents`,
    { token: a.token, body: { topic_discriminator: WEEKLY, channel_discriminator: EMAIL_CH, type, reason: 'test' } },
  );
  expect([201, 204], r.text).toContain(r.status);
}

export async function deleteProfile(server: TestServer, a: Account, key: string): Promise<void> {
  await ok(
    server.request('DELETE', `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}`, { token: a.token }),
    204,
  );
}

/** The payload of a delivery, verified with the reference library against `secret`: throws when the signature does not verify. */
export function verified(received: Received, secret: string): { type: string; timestamp: string; data: any } {
  const headers = {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  };
  return new Webhook(secret).verify(received.text, headers) as { type: string; timestamp: string; data: any };
}

export const idOf = (r: Received) => String(r.headers['webhook-id']);

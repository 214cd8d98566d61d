import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @audience/testing, from its workspace's source.
import { startEmulator, type Emulator } from '../../testing/src/index.ts';
import { CallbackReceiver, type Received } from '../../../test/callbacks.ts';
import { createAudienceClient, verifyWebhook, WebhookVerificationError, type AudienceClient } from '../src/index.ts';

// verifyWebhook against real deliveries of the emulator to a receiver on loopback (which the
// emulator reaches with CALLBACKS_ALLOW_PRIVATE), and against the reference library, standardwebhooks.

let emulator: Emulator;
let receiver: CallbackReceiver;
let audience: AudienceClient;
const V = 'com.acme1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  emulator = await startEmulator({ vendor: 'acme', timeoutMs: 110_000, env: { CALLBACKS_ALLOW_PRIVATE: 'true' } });
  audience = createAudienceClient({
    baseUrl: emulator.baseUrl,
    clientId: emulator.account.clientId,
    clientSecret: emulator.account.clientSecret,
  });
});
afterAll(async () => {
  await emulator?.stop();
  await receiver?.close();
});

/** Creates and deletes a profile: one profile.deleted event; answers its delivery once it arrived. */
async function deliveryOf(key: string): Promise<Received> {
  const before = receiver.received.length;
  const keyspace = { keyspace_discriminator: EMAIL };
  await audience.api.POST('/audience/keyspaces/{keyspace_discriminator}/sections/{section_discriminator}/profiles', {
    params: { path: { ...keyspace, section_discriminator: SHOP } },
    body: { profile_key: key },
  });
  await audience.api.DELETE('/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}', {
    params: { path: { ...keyspace, profile_key: key } },
  });
  await receiver.waitFor(before + 1, 60_000);
  return receiver.received[before];
}

const headersOf = (r: Received) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

describe('verifyWebhook', () => {
  it('verifies real deliveries as the reference library does, through a rotation, and refuses what was tampered with', async () => {
    const { data: endpoint } = await audience.api.POST('/webhooks', {
      body: { url: receiver.url('/hook'), event_types: ['profile.deleted'] },
    });
    const first = await deliveryOf('ann@example.com');
    const delivery = verifyWebhook(endpoint.secret, first.headers, first.text);
    expect(delivery).toMatchObject({ id: first.headers['webhook-id'], type: 'profile.deleted' });
    expect(delivery.data.profiles).toHaveLength(1);
    // The same as the reference library reads it; Fetch's Headers and bytes do as well as Node's headers and text.
    const reference = new Webhook(endpoint.secret).verify(first.text, headersOf(first));
    expect({ type: delivery.type, timestamp: delivery.timestamp, data: delivery.data }).toEqual(reference);
    expect(verifyWebhook(endpoint.secret, new Headers(headersOf(first)), Buffer.from(first.text))).toEqual(delivery);

    // While a rotation overlaps, either secret verifies; the receiver may hold both.
    const { data: rotated } = await audience.api.POST('/webhooks/{webhook_id}/secret', {
      params: { path: { webhook_id: endpoint.id } },
      body: {},
    });
    const second = await deliveryOf('bob@example.com');
    expect(String(second.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secrets of [endpoint.secret, rotated.secret, [rotated.secret, endpoint.secret]])
      expect(verifyWebhook(secrets, second.headers, second.text).id).toBe(second.headers['webhook-id']);

    const refused = (f: () => unknown) => expect(f).toThrow(WebhookVerificationError);
    refused(() =>
      verifyWebhook(endpoint.secret, first.headers, first.text.replace('profile.deleted', 'profile.merged')),
    );
    refused(() => verifyWebhook(rotated.secret, first.headers, first.text));
    refused(() => verifyWebhook(endpoint.secret, { ...first.headers, 'webhook-id': 'msg_other' }, first.text));
    refused(() => verifyWebhook(endpoint.secret, { ...first.headers, 'webhook-signature': undefined }, first.text));
    // Ten minutes on, the timestamp is beyond the five of tolerance, unless the receiver allows more.
    const later = () => Number(first.headers['webhook-timestamp']) * 1000 + 600_000;
    expect(() => verifyWebhook(endpoint.secret, first.headers, first.text, { now: later })).toThrow(
      /old, beyond 300 s/,
    );
    expect(() =>
      new Webhook(endpoint.secret).verify(first.text, { ...headersOf(first), 'webhook-timestamp': '1' }),
    ).toThrow();
    expect(verifyWebhook(endpoint.secret, first.headers, first.text, { now: later, toleranceSeconds: 900 }).id).toBe(
      delivery.id,
    );
  });

  it('accepts what the reference library signs, and the reference library what it accepts', () => {
    const secret = `whsec_${Buffer.alloc(24, 9).toString('base64')}`;
    const at = new Date();
    const body = JSON.stringify({ type: 'consent.changed', timestamp: at.toISOString(), data: { type: 'opt-in' } });
    const signature = new Webhook(secret).sign('msg_reference', at, body);
    const headers = {
      'webhook-id': 'msg_reference',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': `v1,AAAA ${signature}`,
    };
    expect(verifyWebhook(secret, headers, body).data).toEqual({ type: 'opt-in' });
    expect(new Webhook(secret).verify(body, headers)).toMatchObject({ type: 'consent.changed' });
  });
});

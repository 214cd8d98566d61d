import { describe, expect, it } from 'vitest';
import { serverWithPool, type TestServer } from '../../test/app.ts';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { type CallbackReceiver, receiverForTests } from '../../test/callbacks.ts';
import { createProfile, deleteProfile, MANIFEST, ok, subscribe } from '../../test/webhooks.ts';

// The address filter of outbound calls (src/outbound/, docs/security.md "Outbound calls") applies
// to webhook endpoints: a server without CALLBACKS_ALLOW_PRIVATE never reaches loopback, private or
// link-local addresses, and records why on each attempt.

let server: TestServer;
let receiver: CallbackReceiver;
serverWithPool({ worker: true }, (s) => {
  server = s;
});
receiverForTests((r) => {
  receiver = r;
});

describe('webhook endpoints at internal addresses', () => {
  it('are never called: each attempt fails with the reason', async () => {
    const a = await server.login(MANIFEST, { requests_per_second: null, token_requests_per_minute: null });
    const targets = [
      [receiver.url('/hook'), /loopback/],
      ['http://10.0.0.1/hook', /private/],
      ['http://169.254.169.254/latest/meta-data', /link-local/],
      [receiver.url('/hook', 'localhost'), /loopback/],
    ] as const;
    const ids: string[] = [];
    for (const [url] of targets) ids.push((await subscribe(server, a, url, ['profile.deleted'])).id);
    await createProfile(server, a, 'kim@example.com');
    await deleteProfile(server, a, 'kim@example.com');
    for (const [i, [, reason]] of targets.entries()) {
      const last = await readWhen(
        `the delivery to target ${i} attempted`,
        async () =>
          (await ok(server.request('GET', `/webhooks/${ids[i]}/deliveries`, { token: a.token }), 200)).body.items[0]
            ?.last_attempt,
        (attempt) => !!attempt,
        STATE_BOUND_MS,
      );
      expect(last).toMatchObject({ status: null, error: expect.stringMatching(reason) });
    }
    expect(receiver.received).toEqual([]);
  });
});

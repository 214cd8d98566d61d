import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer, type Response } from '../../test/app.ts';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { type CallbackReceiver, receiverForTests } from '../../test/callbacks.ts';
import { EMAIL, NO_LIMITS, SHOP } from '../../test/exports.ts';
import { SINGLE_MANIFEST as MANIFEST } from '../../test/single-exports.ts';

// The single profile export's callbacks with the address filter on: a second server, without
// CALLBACKS_ALLOW_PRIVATE, whose callbacks to the loopback receiver are refused.

let server: TestServer;
let receiver: CallbackReceiver;
let db: pg.Pool;
serverWithPool({ env: { CALLBACKS_ALLOW_PRIVATE: 'true' }, worker: true }, (s, d) => {
  server = s;
  db = d;
});

receiverForTests((r) => {
  receiver = r;
});

async function ok(res: Promise<Response>, status: number): Promise<Response> {
  const r = await res;
  expect(r.status, r.text).toBe(status);
  return r;
}

// Last: it stops the worker of the server above, whose jobs the filtering server's worker must take.
describe('with the address filter on (CALLBACKS_ALLOW_PRIVATE unset)', () => {
  let filtering: TestServer;
  beforeAll(async () => {
    await server.worker?.stop();
    server.worker = undefined;
    filtering = await TestServer.start({}, { worker: true });
  });
  afterAll(async () => filtering?.close());

  it('SPE-09: callbacks to loopback (by address, IPv4-mapped, by name) are refused: no callback arrives, and the export says why', async () => {
    const { accountId, token } = await filtering.login(MANIFEST, NO_LIMITS);
    await ok(
      filtering.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, {
        token,
        body: { profile_key: 'max@example.com' },
      }),
      201,
    );
    const { rows } = await db.query('select export_key from profiles where account_id = $1::bigint', [accountId]);
    for (const [host, shown] of [
      ['127.0.0.1', '127.0.0.1'],
      ['::ffff:127.0.0.1', '::ffff:7f00:1'],
      ['localhost', 'localhost'],
    ]) {
      const res = await ok(
        filtering.request('POST', `/audience/profiles/export-single/${rows[0].export_key}`, {
          token,
          body: { callback_url: receiver.url('/callback', host) },
        }),
        202,
      );
      const location = new URL(res.headers.get('location')!);
      const answer = await readWhen(
        'the export failed',
        () => filtering.request('GET', location.pathname + location.search, { token }),
        (r) => r.status !== 404,
        STATE_BOUND_MS,
      );
      expect(expectProblem(answer, 503, 'AUD-1904'), host).toMatch(
        new RegExp(
          `The verification callback failed: ${shown.replaceAll('.', '\\.')}.* is a loopback address, which callbacks may not reach; no ready callback is sent`,
        ),
      );
    }
    expect(receiver.received).toEqual([]);
  });
});

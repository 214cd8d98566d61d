import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverWithPool, startWorkerProcess, stopProcess, type TestServer } from '../../test/app.ts';
import { CallbackReceiver } from '../../test/callbacks.ts';
import { atFileEnd } from '../../test/scratch.ts';
import {
  type Account,
  createProfile,
  deleteProfile,
  idOf,
  MANIFEST,
  subscribe,
  verified,
} from '../../test/webhooks.ts';
import { freePort } from '../store/embedded.ts';

// A worker process killed (SIGKILL) while it delivers webhooks loses no event: the events are in
// the outbox with the writes that caused them, and the deliveries it held are sent again, with
// the same webhook-id, once their lease ends.

let server: TestServer;
let db: pg.Pool;
let receiver: CallbackReceiver;
// The API alone: the worker of this test is a process of its own.
serverWithPool({}, (s, d) => {
  server = s;
  db = d;
});
const children: ChildProcess[] = [];
const output: string[] = [];
beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  atFileEnd(async () => {
    for (const child of children) await stopProcess(child, 'SIGKILL');
    await receiver.close();
  });
});
afterAll(async () => {
  for (const child of children) await stopProcess(child, 'SIGKILL');
});

async function startWorker(): Promise<ChildProcess> {
  const child = await startWorkerProcess(server.services.config.dataDir, await freePort(), output, {
    CALLBACKS_ALLOW_PRIVATE: 'true',
    // Its log (each job run) is in the error of a test that fails.
    LOG_LEVEL: 'info',
  });
  children.push(child);
  return child;
}

async function events(a: Account): Promise<string[]> {
  const { rows } = await db.query('select event_id from webhook_events where account_id = $1 order by event_seq', [
    a.accountId,
  ]);
  return rows.map((r) => r.event_id);
}

describe('a worker killed in the middle of deliveries', () => {
  it('loses no event: every one is delivered after a restart, signed, with its id', { timeout: 240_000 }, async () => {
    const a = await server.login(MANIFEST, { requests_per_second: null, token_requests_per_minute: null });
    const { secret } = await subscribe(server, a, receiver.url('/crash'), ['profile.deleted']);
    for (let i = 0; i < 10; i++) {
      await createProfile(server, a, `before-${i}@example.com`);
      await deleteProfile(server, a, `before-${i}@example.com`);
    }
    // The first worker's requests are never answered: it is killed while it waits for them.
    let hang = true;
    receiver.answer = () => (hang ? 'hang' : { status: 200 });
    const first = await startWorker();
    await receiver.waitFor(1, 60_000).catch((err) => {
      throw new Error(`${err.message}\n${output.join('')}`);
    });
    await stopProcess(first, 'SIGKILL');
    hang = false;
    const atKill = receiver.received.length;
    expect(atKill).toBeGreaterThan(0);

    // Events written while no worker runs wait in the outbox.
    for (let i = 0; i < 10; i++) {
      await createProfile(server, a, `after-${i}@example.com`);
      await deleteProfile(server, a, `after-${i}@example.com`);
    }
    const written = await events(a);
    expect(written).toHaveLength(20);

    await startWorker();
    // Every event answered by the receiver after the kill: those the first worker held come back once their lease ends.
    const answered = () => new Set(receiver.received.slice(atKill).map(idOf));
    for (const until = Date.now() + 90_000; answered().size < written.length && Date.now() < until;)
      await receiver.waitFor(receiver.received.length + 1, 5000).catch(() => {});
    expect([...answered()].sort(), output.join('')).toEqual([...written].sort());
    for (const r of receiver.received) expect(verified(r, secret).type).toBe('profile.deleted');
    // Each is recorded as delivered once the answers of its batch came: wait for the records.
    for (const until = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 50))) {
      const { rows } = await db.query(
        "select count(*)::int as n from webhook_deliveries where account_id = $1 and status = 'delivered'",
        [a.accountId],
      );
      if (rows[0].n === 20) break;
      if (Date.now() > until) throw new Error(`${rows[0].n} of 20 deliveries recorded as delivered`);
    }
  });
});

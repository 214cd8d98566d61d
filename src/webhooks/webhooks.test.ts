import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { type CallbackReceiver, type Received, receiverForTests } from '../../test/callbacks.ts';
import { STATE_BOUND_MS, readWhen as readUntil } from '../../test/until.ts';
import {
  type Account,
  createProfile,
  deleteProfile,
  idOf,
  MANIFEST,
  ok,
  S,
  setConsent,
  subscribe,
  verified,
} from '../../test/webhooks.ts';

// Webhooks (docs/webhooks.md) delivered to a real receiver on loopback, which the server reaches
// with CALLBACKS_ALLOW_PRIVATE; signatures checked with the reference library, standardwebhooks.

let server: TestServer;
let db: pg.Pool;
let receiver: CallbackReceiver;
serverWithPool(
  { env: { CALLBACKS_ALLOW_PRIVATE: 'true', LOG_LEVEL: process.env.WH_LOG ?? 'silent' }, worker: true },
  (s, d) => {
    server = s;
    db = d;
  },
);
receiverForTests((r) => {
  receiver = r;
});

const NO_LIMITS = { requests_per_second: null, token_requests_per_minute: null };
let paths = 0;
/** A receiver URL of the test's own, so that its requests are told apart from another test's. */
const hookUrl = () => receiver.url(`/hook-${++paths}`);
const to = (url: string) => (r: Received) => r.path === new URL(url).pathname;

async function account(limits: Record<string, number | null> = {}): Promise<Account> {
  return server.login(MANIFEST, { ...NO_LIMITS, ...limits });
}

/** Resolves once the requests to `url` satisfy `done`; answers them. */
async function arrived(url: string, done: (rs: Received[]) => boolean, timeoutMs = 20_000): Promise<Received[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const rs = receiver.received.filter(to(url));
    if (done(rs)) return rs;
    if (Date.now() > until) throw new Error(`${rs.length} requests to ${url} within ${timeoutMs} ms`);
    await receiver.waitFor(receiver.received.length + 1, until - Date.now()).catch(() => {});
  }
}

/**
 * Polls `path` of the public API until `check` holds of its answer: a delivery's record is written
 * after the receiver answered, so a test that saw the request waits for the record too.
 */
async function readWhen(a: Account, path: string, check: (e: any) => boolean): Promise<any> {
  const read = async () => (await ok(server.request('GET', path, { token: a.token }), 200)).body;
  return readUntil(path, read, check, STATE_BOUND_MS);
}

describe('endpoints', () => {
  it('are subscribed, read, changed and deleted through the public and the operator API', async () => {
    const a = await account();
    const url = hookUrl();
    const created = await ok(
      server.request('POST', '/webhooks', {
        token: a.token,
        body: { url, event_types: ['profile.deleted'], description: 'CRM' },
      }),
      201,
    );
    expect(created.body).toMatchObject({ url, event_types: ['profile.deleted'], state: 'active', enabled: true });
    expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = created.body.id;
    // The secret is sealed at rest, not kept as it is.
    const { rows } = await db.query('select secret from webhook_endpoints where account_id = $1 and endpoint_id = $2', [
      a.accountId,
      id,
    ]);
    expect(rows[0].secret.toString('latin1')).not.toContain(created.body.secret.slice(6));

    const read = await ok(server.request('GET', `/webhooks/${id}`, { token: a.token }), 200);
    expect(read.body.secret).toBeUndefined();
    expect(read.body.description).toBe('CRM');
    const admin = await ok(server.admin('GET', `/admin/accounts/${a.accountId}/webhooks`), 200);
    expect(admin.body.items.map((e: { id: string }) => e.id)).toEqual([id]);

    const changed = await ok(
      server.admin('PATCH', `/admin/accounts/${a.accountId}/webhooks/${id}`, { enabled: false }),
      200,
    );
    expect(changed.body.state).toBe('disabled');
    await ok(server.request('DELETE', `/webhooks/${id}`, { token: a.token }), 204);
    expectProblem(await server.request('GET', `/webhooks/${id}`, { token: a.token }), 404, 'AUD-2301');
    expectProblem(await server.request('GET', '/webhooks/not-a-number', { token: a.token }), 404, 'AUD-2301');
  });

  it('refuses bad input with a problem naming the field, and keys restricted to sections', async () => {
    const a = await account();
    const post = (body: unknown) => server.request('POST', '/webhooks', { token: a.token, body });
    expect(expectProblem(await post({ url: 'not a url', event_types: ['profile.deleted'] }), 400, 'AUD-2302')).toMatch(
      /^url/,
    );
    expect(
      expectProblem(await post({ url: 'ftp://example.com/x', event_types: ['profile.deleted'] }), 400, 'AUD-2302'),
    ).toMatch(/url: the scheme "ftp"/);
    expect(expectProblem(await post({ url: 'https://example.com/x', event_types: ['profile.born'] }), 400)).toMatch(
      /event_types/,
    );
    expect(
      expectProblem(
        await post({ url: 'https://example.com/x', event_types: ['profile.deleted'], secret: 'nope' }),
        400,
      ),
    ).toMatch(/secret/);
    await ok(post({ url: 'https://example.com/x', event_types: ['profile.deleted'] }), 201);
    expectProblem(await post({ url: 'https://example.com/x', event_types: ['profile.merged'] }), 409, 'AUD-2303');

    const restricted = await server.createKey(a.accountId, { section_discriminators: [] });
    const token = await server.token(restricted);
    expectProblem(await server.request('GET', '/webhooks', { token }), 403, 'AUD-1107');
  });
});

describe('deliveries', () => {
  it('deliver consent and profile events, signed as Standard Webhooks, each attempt recorded', async () => {
    const a = await account();
    const url = hookUrl();
    const { id, secret } = await subscribe(server, a, url);
    await createProfile(server, a, 'ann@example.com');
    await setConsent(server, a, 'ann@example.com', 'opt-in');
    await deleteProfile(server, a, 'ann@example.com');
    const got = await arrived(url, (rs) => rs.length >= 2);
    const [consent, deleted] = got.map((r) => verified(r, secret));
    expect(consent.type).toBe('consent.changed');
    expect(consent.data).toMatchObject({ type: 'opt-in', previous_type: null, section_discriminator: S });
    expect(deleted.type).toBe('profile.deleted');
    expect(deleted.data.profiles).toEqual([{ export_key: consent.data.profile.export_key }]);
    expect(deleted.data.locked).toBe(false);
    for (const r of got) {
      expect(r.headers['content-type']).toBe('application/json');
      expect(Math.abs(Number(r.headers['webhook-timestamp']) * 1000 - Date.now())).toBeLessThan(60_000);
    }

    const list = await ok(server.request('GET', `/webhooks/${id}/deliveries`, { token: a.token }), 200);
    expect(list.body.items.map((d: { event_type: string }) => d.event_type)).toEqual([
      'profile.deleted',
      'consent.changed',
    ]);
    const one = await readWhen(a, `/webhooks/${id}/deliveries/${idOf(got[0])}`, (d) => d.status === 'delivered');
    expect(one).toMatchObject({ status: 'delivered', attempts: 1, payload: consent });
    expect(one.attempt_log).toEqual([
      { attempt: 1, attempted_at: expect.any(String), status: 200, latency_ms: expect.any(Number), error: null },
    ]);
  });

  it('retry after a 500 with the same webhook-id, and record both attempts', async () => {
    const a = await account();
    const url = hookUrl();
    const { id, secret } = await subscribe(server, a, url);
    let answered = 0;
    receiver.answer = (r) => (to(url)(r) && answered++ === 0 ? { status: 500 } : { status: 200 });
    await createProfile(server, a, 'bob@example.com');
    await deleteProfile(server, a, 'bob@example.com');
    const got = await arrived(url, (rs) => rs.length >= 2);
    expect(idOf(got[1])).toBe(idOf(got[0]));
    verified(got[1], secret);
    const one = await readWhen(a, `/webhooks/${id}/deliveries/${idOf(got[0])}`, (d) => d.status === 'delivered');
    expect(one.attempt_log.map((t: { status: number; error: string | null }) => [t.status, t.error])).toEqual([
      [500, 'the endpoint answered 500'],
      [200, null],
    ]);
  });

  it("keep a profile's events in order: a later one waits while an earlier one is retried", async () => {
    const a = await account();
    const url = hookUrl();
    await subscribe(server, a, url, ['consent.changed']);
    await createProfile(server, a, 'cat@example.com');
    await createProfile(server, a, 'dan@example.com');
    // The first delivery of each profile fails once; the others are answered at once.
    const failedOnce = new Set<string>();
    const firsts = new Set<string>();
    receiver.answer = (r) => {
      if (!to(url)(r)) return { status: 200 };
      const body = r.body as { data: { profile: { export_key: string }; type: string } };
      const profile = body.data.profile.export_key;
      if (!firsts.has(profile)) firsts.add(profile);
      else return { status: 200 };
      failedOnce.add(idOf(r));
      return { status: 500 };
    };
    const types = ['opt-in', 'opt-out', 'opt-in', 'opt-out'] as const;
    for (const type of types) {
      await setConsent(server, a, 'cat@example.com', type);
      await setConsent(server, a, 'dan@example.com', type);
    }
    // Four events of each profile, and the retry of each first one.
    const got = await arrived(url, (rs) => rs.length >= 2 * 4 + 2).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(receiver.received.filter(to(url)).map((r) => r.body))}`);
    });
    for (const key of firsts) {
      const mine = got.filter(
        (r) => (r.body as { data: { profile: { export_key: string } } }).data.profile.export_key === key,
      );
      // The failed first, its retry, then the others in the order they were written.
      expect(mine.map((r) => (r.body as { data: { type: string } }).data.type)).toEqual([
        'opt-in',
        'opt-in',
        'opt-out',
        'opt-in',
        'opt-out',
      ]);
      expect(idOf(mine[1])).toBe(idOf(mine[0]));
      expect(new Set(mine.map(idOf)).size).toBe(4);
    }
  });

  it('are replayed one by one and by time range, with the same webhook-id', async () => {
    const a = await account();
    const url = hookUrl();
    const { id, secret } = await subscribe(server, a, url);
    const before = new Date(Date.now() - 1000).toISOString();
    for (const key of ['eve@example.com', 'fay@example.com']) {
      await createProfile(server, a, key);
      await deleteProfile(server, a, key);
    }
    const first = await arrived(url, (rs) => rs.length >= 2);
    const ids = first.map(idOf);

    const replayed = await ok(
      server.request('POST', `/webhooks/${id}/deliveries/${ids[0]}/replay`, { token: a.token }),
      202,
    );
    expect(replayed.body.event_id).toBe(ids[0]);
    const again = await arrived(url, (rs) => rs.length >= 3);
    expect(idOf(again[2])).toBe(ids[0]);
    verified(again[2], secret);

    const range = await ok(
      server.request('POST', `/webhooks/${id}/replay`, {
        token: a.token,
        body: { since: before, until: new Date(Date.now() + 60_000).toISOString() },
      }),
      202,
    );
    expect(range.body.replayed).toBe(2);
    const all = await arrived(url, (rs) => rs.length >= 5);
    expect(all.slice(3).map(idOf).sort()).toEqual([...ids].sort());
    expectProblem(
      await server.request('POST', `/webhooks/${id}/replay`, {
        token: a.token,
        body: { since: new Date().toISOString(), until: before },
      }),
      400,
      'AUD-2305',
    );
    expectProblem(
      await server.request('POST', `/webhooks/${id}/deliveries/msg_none/replay`, { token: a.token }),
      404,
      'AUD-2304',
    );
  });

  it('are signed with both secrets while a rotation overlaps', async () => {
    const a = await account();
    const url = hookUrl();
    const { id, secret: old } = await subscribe(server, a, url);
    const rotated = await ok(server.request('POST', `/webhooks/${id}/secret`, { token: a.token }), 200);
    expect(rotated.body.previous_secret_until).not.toBeNull();
    await createProfile(server, a, 'gus@example.com');
    await deleteProfile(server, a, 'gus@example.com');
    const [got] = await arrived(url, (rs) => rs.length >= 1);
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(2);
    verified(got, old);
    verified(got, rotated.body.secret);

    // Without an overlap the old secret stops at once.
    const next = await ok(
      server.request('POST', `/webhooks/${id}/secret`, { token: a.token, body: { overlap_seconds: 0 } }),
      200,
    );
    await createProfile(server, a, 'hal@example.com');
    await deleteProfile(server, a, 'hal@example.com');
    const [, last] = await arrived(url, (rs) => rs.length >= 2);
    expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(1);
    verified(last, next.body.secret);
    expect(() => verified(last, rotated.body.secret)).toThrow();
  });

  it('pause an endpoint that keeps failing, and go on, in order, once it is enabled again', async () => {
    const a = await account({ webhook_failures_before_pause: 3 });
    const url = hookUrl();
    const { id } = await subscribe(server, a, url, ['profile.deleted']);
    let failing = true;
    receiver.answer = (r) => (to(url)(r) && failing ? { status: 503 } : { status: 200 });
    for (const key of ['ida@example.com', 'jon@example.com']) {
      await createProfile(server, a, key);
      await deleteProfile(server, a, key);
    }
    const paused = await readWhen(a, `/webhooks/${id}`, (e) => e.state === 'paused');
    expect(paused.consecutive_failures).toBeGreaterThanOrEqual(3);
    expect(paused.paused_at).not.toBeNull();
    const seen = receiver.received.filter(to(url)).length;
    // Nothing goes to a paused endpoint; its deliveries wait, pending.
    const pending = await ok(
      server.request('GET', `/webhooks/${id}/deliveries?status=pending`, { token: a.token }),
      200,
    );
    expect(pending.body.items).toHaveLength(2);

    failing = false;
    const resumed = await ok(
      server.request('PATCH', `/webhooks/${id}`, { token: a.token, body: { enabled: true } }),
      200,
    );
    expect(resumed.body).toMatchObject({ state: 'active', consecutive_failures: 0 });
    await arrived(url, (rs) => rs.filter((r) => r.headers['webhook-id']).length >= seen + 2);
    // Each is recorded once its answer came: wait for both records.
    await readWhen(a, `/webhooks/${id}/deliveries?status=delivered`, (d) => d.items.length === 2);
  });

  it('are removed with their attempts once older than the retention, unless a delivery of the event is pending', async () => {
    const DAY = 86_400_000;
    const a = await account({ webhook_retention_days: 2 });
    const answered = await subscribe(server, a, hookUrl(), ['profile.deleted']);
    const failingUrl = hookUrl();
    const failing = await subscribe(server, a, failingUrl, ['consent.changed']);
    receiver.answer = (r) => (to(failingUrl)(r) ? { status: 503 } : { status: 200 });
    await createProfile(server, a, 'kim@example.com');
    await setConsent(server, a, 'kim@example.com', 'opt-in');
    await createProfile(server, a, 'lou@example.com');
    await deleteProfile(server, a, 'lou@example.com');
    await readWhen(a, `/webhooks/${answered.id}/deliveries?status=delivered`, (d) => d.items.length === 1);
    await readWhen(a, `/webhooks/${failing.id}/deliveries`, (d) => d.items[0]?.last_attempt?.status === 503);

    // The delivery job queued the sweep for when the delivery it ended leaves the retention, by the account's clock.
    const rows = async (sql: string) => (await db.query(sql, [a.accountId])).rows;
    // The job queues it after it records the attempts that the deliveries' listing shows.
    const sweeps = "select run_at from jobs where account_id = $1 and kind = 'webhook-retention'";
    const queued = await readUntil(
      'the retention sweep queued',
      () => rows(sweeps),
      (js) => js.length > 0,
      STATE_BOUND_MS,
    );
    expect(queued.map((j) => j.run_at.getTime())).toEqual([server.clock.now + 2 * DAY]);
    const attempts =
      'select endpoint_id::text, count(*)::int as n from webhook_attempts where account_id = $1 group by 1 order by 1';
    expect((await rows(attempts)).map((r) => r.endpoint_id)).toEqual([answered.id, failing.id]);

    server.clock.advance(3 * DAY);
    try {
      // Due by the database's clock too, which the test clock does not move.
      await rows("update jobs set run_at = now() where account_id = $1 and kind = 'webhook-retention'");
      await readUntil(
        'the sweep to leave one event and no sweep',
        () =>
          rows(
            "select (select count(*) from webhook_events where account_id = $1)::int as events, (select count(*) from jobs where account_id = $1 and kind = 'webhook-retention')::int as sweeps",
          ),
        (left) => left[0].events === 1 && left[0].sweeps === 0,
        STATE_BOUND_MS,
      );
    } finally {
      server.clock.advance(-3 * DAY);
    }
    // The delivered event went with its delivery and attempts; the pending one stays whole, and no sweep waits for it.
    expect((await rows(attempts)).map((r) => r.endpoint_id)).toEqual([failing.id]);
    const list = await ok(server.request('GET', `/webhooks/${answered.id}/deliveries`, { token: a.token }), 200);
    expect(list.body.items).toEqual([]);
    const pending = await ok(server.request('GET', `/webhooks/${failing.id}/deliveries`, { token: a.token }), 200);
    expect(pending.body.items.map((d: { status: string }) => d.status)).toEqual(['pending']);
    await ok(server.request('DELETE', `/webhooks/${failing.id}`, { token: a.token }), 204);
  });
});

describe('the account manifest', () => {
  it('subscribes endpoints by URL, reads them back without their secret, and round-trips', async () => {
    const a = await account();
    const url = hookUrl();
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const applied = await ok(
      server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, {
        webhooks: [{ url, event_types: ['profile.deleted'], description: 'From the manifest', secret }],
      }),
      200,
    );
    expect(applied.body.created).toContain(`webhook ${url}`);
    const read = await ok(server.admin('GET', `/admin/accounts/${a.accountId}/manifest`), 200);
    expect(read.body.webhooks).toEqual([
      { url, event_types: ['profile.deleted'], description: 'From the manifest', enabled: true },
    ]);
    const again = await ok(server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, read.body), 200);
    expect(again.body.created).toEqual([]);
    expect(again.body.changed).toEqual([]);

    // The manifest's secret signs.
    await createProfile(server, a, 'lee@example.com');
    await deleteProfile(server, a, 'lee@example.com');
    const [got] = await arrived(url, (rs) => rs.length >= 1);
    expect(verified(got, secret).type).toBe('profile.deleted');

    expect(
      expectProblem(
        await server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, {
          webhooks: [{ url: 'gopher://x', event_types: ['profile.deleted'] }],
        }),
        400,
        'AUD-2302',
      ),
    ).toMatch(/^webhooks\[0\]\.url/);
  });
});

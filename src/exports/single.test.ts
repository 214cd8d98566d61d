import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer, type Response } from '../../test/app.ts';
import { readWhen, STATE_BOUND_MS, until } from '../../test/until.ts';
import { type CallbackReceiver, type Received, receiverForTests } from '../../test/callbacks.ts';
import { DAY, EMAIL, NO_LIMITS, SHOP, V } from '../../test/exports.ts';
import { SINGLE_MANIFEST as MANIFEST } from '../../test/single-exports.ts';

// The single profile export (SPEC §2.16, §4.7, §6.5; docs/exports.md "Single profile export"):
// callbacks received by a real HTTP server on loopback, which the server reaches with
// CALLBACKS_ALLOW_PRIVATE; the last part runs a server without it.

const CRM = `${V}.keyspaces.crm-id`;
const VIP = `${V}.tags.user-created.vip`;
const POINTS = `${V}.attributes.user-created.points`;

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

interface Account {
  accountId: string;
  token: string;
  shopId: string;
  points: string;
  visit: string;
  vip: string;
}

async function account(limits: Record<string, number | null> = NO_LIMITS): Promise<Account> {
  const { accountId, token } = await server.login(MANIFEST, limits);
  const get = async (path: string) => (await ok(server.request('GET', path, { token }), 200)).body.items;
  const shop = (await get('/audience/sections')).find((s: { discriminator: string }) => s.discriminator === SHOP);
  const points = (await get(`/audience/sections/${SHOP}/attributes`)).find(
    (a: { discriminator: string }) => a.discriminator === POINTS,
  ).versions[0].id;
  const visit = (await get(`/audience/sections/${SHOP}/events`))[0].versions[0].id;
  const vip = (await get(`/audience/sections/${SHOP}/tags`)).find(
    (t: { discriminator: string }) => t.discriminator === VIP,
  ).id;
  return { accountId, token, shopId: shop.id, points, visit, vip };
}

async function ok(res: Promise<Response>, status: number): Promise<Response> {
  const r = await res;
  expect(r.status, r.text).toBe(status);
  return r;
}

const at = (keyspace: string, key: string) => `/audience/keyspaces/${keyspace}/profiles/${key}/sections/${SHOP}`;

/** A profile with a key in `keyspace`; answers its export key. */
async function profile(a: Account, keyspace: string, key: string): Promise<string> {
  await ok(
    server.request('POST', `/audience/keyspaces/${keyspace}/sections/${SHOP}/profiles`, {
      token: a.token,
      body: { profile_key: key },
    }),
    201,
  );
  const { rows } = await db.query(
    'select p.export_key from profile_identifiers i join profiles p using (account_id, profile_id) where i.account_id = $1::bigint and i.profile_key = $2',
    [a.accountId, key],
  );
  return rows[0].export_key;
}

async function patch(
  a: Account,
  keyspace: string,
  key: string,
  what: 'attributes' | 'tags',
  body: Record<string, unknown>,
): Promise<void> {
  await ok(
    server.request('PATCH', `${what === 'attributes' ? '/v2' : ''}${at(keyspace, key)}/${what}`, {
      token: a.token,
      body,
      headers: { 'content-type': 'application/merge-patch+json' },
    }),
    204,
  );
}

/** Requests the export: 202 with an empty body; answers the path of the file's URL (the Location header). */
async function requestExport(
  a: Account,
  exportKey: string,
  options: Record<string, boolean> = {},
  callbackUrl = receiver.url(),
): Promise<string> {
  const res = await ok(
    server.request('POST', `/audience/profiles/export-single/${exportKey}`, {
      token: a.token,
      body: { callback_url: callbackUrl, ...options },
    }),
    202,
  );
  expect(res.text).toBe('');
  const location = new URL(res.headers.get('location')!);
  return location.pathname + location.search;
}

/** The export's answer once it is no longer in progress (404 AUD-1901). */
function settled(a: Account, path: string): Promise<Response> {
  return readWhen(
    `${path} no longer in progress`,
    () => server.request('GET', path, { token: a.token }),
    (res) => res.status !== 404 || res.body.type !== '/errors/AUD-1901',
    STATE_BOUND_MS,
  );
}

/** Waits until the account's callback jobs are done: no callback can arrive after. */
async function callbacksDone(a: Account): Promise<void> {
  await until(
    'the callback jobs done',
    async () =>
      (
        await db.query(
          "select count(*)::int as n from jobs where account_id = $1::bigint and kind like 'export-single%' and failed_at is null",
          [a.accountId],
        )
      ).rows[0].n === 0,
    STATE_BOUND_MS,
  );
}

/** Makes the account's waiting jobs due now: the queue's back-off is timed by the database's clock, which the test clock does not move. */
async function dueNow(a: Account): Promise<void> {
  await db.query('update jobs set run_at = now() where account_id = $1::bigint and failed_at is null', [a.accountId]);
}

const bodies = (received: Received[]) => received.map((r) => r.body);

describe('single profile export', () => {
  it('SPE-01, SPE-06, SPE-07, SPE-08, SPE-10: 202 with an empty body, then exactly two POSTs to callback_url: verification, then ready with the URL of the file', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'ann@example.com');
    const path = await requestExport(a, key);
    const received = await receiver.waitFor(2);
    expect(received.map((r) => [r.method, r.path, r.headers['content-type']])).toEqual([
      ['POST', '/callback', 'application/json'],
      ['POST', '/callback', 'application/json'],
    ]);
    expect(received[0].body).toEqual({ code: 100, message: 'Callback verified' });
    expect(received[1].body).toEqual({ code: 200, message: expect.any(String) });
    const url = (received[1].body as { message: string }).message;
    expect(url).toMatch(
      new RegExp(
        `^${server.services.config.publicUrl}/audience/profiles/export-single/accounts/${a.accountId}/definitions/[0-9a-f-]{36}\\?metadata=true$`,
      ),
    );
    // The URL of the callback is the one of the 202's Location.
    expect(new URL(url).pathname + new URL(url).search).toBe(path);
    await callbacksDone(a);
    expect(receiver.received).toHaveLength(2);
  });

  it('SPE-11, SPE-12, SPE-14, AUTH-21: the file, read with the bearer token, holds what the profile holds: attributes with their history, tags, events; not without a token', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'bo@example.com');
    await patch(a, EMAIL, 'bo@example.com', 'attributes', { [POINTS]: 10 });
    server.clock.advance(1000);
    await patch(a, EMAIL, 'bo@example.com', 'attributes', { [POINTS]: 20 });
    await patch(a, EMAIL, 'bo@example.com', 'tags', { [VIP]: true });
    const events = [
      { event_time: '2019-06-01T00:00:00Z', version_id: a.visit, data: { url: 'https://old' } },
      { event_time: '2026-01-02T03:04:05Z', version_id: a.visit, data: { url: 'https://shop/basket' } },
    ];
    await ok(
      server.request('POST', `${at(EMAIL, 'bo@example.com')}/events`, { token: a.token, body: { items: events } }),
      204,
    );
    // Hidden values are not shown by the API, and not exported either.
    await db.query(
      "update profile_sections set attributes = attributes || jsonb_build_object((select v.version_id::text from attribute_versions v join attributes x using (account_id, attribute_id) where x.account_id = $1::bigint and x.hidden), 'hush') where account_id = $1::bigint",
      [a.accountId],
    );

    const path = await requestExport(a, key, { include_attribute_history: true });
    const res = await settled(a, path);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const file = res.body;
    expect(Object.keys(file)).toEqual(['profiles']);
    expect(Object.keys(file.profiles)).toEqual([key]);
    // Only sections where the profile holds something: Shop, not Blog.
    expect(Object.keys(file.profiles[key].sections)).toEqual([a.shopId]);
    const shop = file.profiles[key].sections[a.shopId];

    const shown = (
      await ok(server.request('GET', `${at(EMAIL, 'bo@example.com')}/attributes`, { token: a.token }), 200)
    ).body as Record<string, unknown>;
    expect(
      Object.fromEntries(Object.entries(shop.attributes).map(([id, e]) => [id, (e as { value: unknown }).value])),
    ).toEqual(shown);
    // The changes, oldest first, at the times they were made (the test clock moved a second between them).
    expect(shop.attributes[a.points]).toEqual({
      value: 20,
      history: [
        { value: 10, changedAt: server.clock.now - 1000 },
        { value: 20, changedAt: server.clock.now },
      ],
    });
    expect(shop.tags).toEqual({ [a.vip]: true });

    const listed = (await ok(server.request('GET', `${at(EMAIL, 'bo@example.com')}/events`, { token: a.token }), 200))
      .body.items as {
      event_time: string;
      version_id: string;
      correlation_id: string;
      created_at: string;
      data: unknown;
    }[];
    expect(shop.events).toEqual(
      listed.toReversed().map((e) => ({
        correlationId: e.correlation_id,
        // SPEC §6.4: a source time before 2020 is 0.
        sourceEventTime: e.event_time.startsWith('2019') ? 0 : Date.parse(e.event_time),
        typeId: e.version_id,
        createdAt: Date.parse(e.created_at),
        data: e.data,
      })),
    );
    expect(shop.events.map((e: { sourceEventTime: number }) => e.sourceEventTime)).toEqual([
      0,
      Date.parse('2026-01-02T03:04:05Z'),
    ]);

    // Without include_attribute_history, no history.
    const plain = (await settled(a, await requestExport(a, key))).body;
    expect(plain.profiles[key].sections[a.shopId].attributes[a.points]).toEqual({ value: 20 });

    expectProblem(await server.request('GET', path), 401, 'AUD-8');
    await callbacksDone(a);
  });

  it('SPE-14: a value cleared and set again: the clear is a null change at its time, a clear of no value is no change', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'cl@example.com');
    const t0 = server.clock.now;
    await patch(a, EMAIL, 'cl@example.com', 'attributes', { [POINTS]: 10 });
    server.clock.advance(1000);
    await patch(a, EMAIL, 'cl@example.com', 'attributes', { [POINTS]: null });
    server.clock.advance(1000);
    await patch(a, EMAIL, 'cl@example.com', 'attributes', { [POINTS]: 30 });
    const file = (await settled(a, await requestExport(a, key, { include_attribute_history: true }))).body;
    expect(file.profiles[key].sections[a.shopId].attributes[a.points]).toEqual({
      value: 30,
      history: [
        { value: 10, changedAt: t0 },
        { value: null, changedAt: t0 + 1000 },
        { value: 30, changedAt: t0 + 2000 },
      ],
    });
    await callbacksDone(a);
  });

  it('SPE-13: metadata, the definitions of the sections in the file, only with include_type_definitions', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'cy@example.com');
    await patch(a, EMAIL, 'cy@example.com', 'attributes', { [POINTS]: 5 });
    const without = (await settled(a, await requestExport(a, key, { include_type_definitions: false }))).body;
    expect(without.metadata).toBeUndefined();
    const file = (await settled(a, await requestExport(a, key, { include_type_definitions: true }))).body;
    expect(Object.keys(file.metadata.sections)).toEqual([a.shopId]);
    const section = file.metadata.sections[a.shopId];
    expect(section).toMatchObject({ discriminator: SHOP, name: 'Shop' });
    const list = async (what: string) =>
      (await ok(server.request('GET', `/audience/sections/${SHOP}/${what}`, { token: a.token }), 200)).body.items;
    // The definitions as the definition routes list them (hidden ones left out).
    expect(section.attributes).toEqual(await list('attributes'));
    expect(section.tags).toEqual(await list('tags'));
    expect(section.events).toEqual(await list('events'));
    // Every attribute of the file is described.
    const described = new Set(
      section.attributes.flatMap((x: { versions: { id: string }[] }) => x.versions.map((v) => v.id)),
    );
    for (const id of Object.keys(file.profiles[key].sections[a.shopId].attributes))
      expect(described.has(id), id).toBe(true);
    await callbacksDone(a);
  });

  it('SPE-15: include_merged_profiles adds the other profiles of the merge cluster, each under its export key with what it holds itself; otherwise only the requested one', async () => {
    const a = await account();
    const ann = await profile(a, EMAIL, 'dee@example.com');
    const crm = await profile(a, CRM, 'C-1');
    await patch(a, EMAIL, 'dee@example.com', 'attributes', { [POINTS]: 1 });
    await patch(a, CRM, 'C-1', 'attributes', { [POINTS]: 2 });
    await ok(
      server.request('PUT', '/audience/profiles/merges', {
        token: a.token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: 'dee@example.com' },
            { keyspace_discriminator: CRM, profile_key: 'C-1' },
          ],
        },
      }),
      204,
    );
    const shown = (await ok(server.request('GET', `${at(CRM, 'C-1')}/attributes`, { token: a.token }), 200)).body;

    const alone = (await settled(a, await requestExport(a, crm))).body;
    expect(Object.keys(alone.profiles)).toEqual([crm]);
    const values = (p: { sections: Record<string, { attributes: Record<string, { value: unknown }> }> }) =>
      Object.fromEntries(Object.entries(p.sections[a.shopId].attributes).map(([id, e]) => [id, e.value]));
    // The requested profile shows what its cluster shows.
    expect(values(alone.profiles[crm])).toEqual(shown);
    expect(shown[a.points]).toBe(1);

    const all = (await settled(a, await requestExport(a, crm, { include_merged_profiles: true }))).body;
    expect(Object.keys(all.profiles).sort()).toEqual([ann, crm].sort());
    expect(values(all.profiles[crm])).toEqual(shown);
    // The other member, with its own values.
    const own = values(all.profiles[ann]);
    expect(own[a.points]).toBe(1);
    expect(Object.values(own)).toContain('dee@example.com');
    expect(Object.values(own)).not.toContain('C-1');
    await callbacksDone(a);
  });

  it('SPE-09: a verification callback answering 500 is tried again with back-off, and never followed by a ready callback; the export fails with the reason', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'eli@example.com');
    receiver.answer = () => ({ status: 500 });
    const path = await requestExport(a, key);
    // Each retry made due at once: the back-off is the database's clock, which the test does not move.
    const res = await readWhen(
      'the export failed',
      async () => {
        await dueNow(a);
        return server.request('GET', path, { token: a.token });
      },
      (r) => r.status !== 404,
      STATE_BOUND_MS,
    );
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(
      /The verification callback failed: the callback URL answered 500; no ready callback is sent/,
    );
    await callbacksDone(a);
    // One verification per attempt of the job (5), and nothing else.
    expect(bodies(receiver.received)).toEqual(Array(5).fill({ code: 100, message: 'Callback verified' }));
  });

  it('SPE-09: a verification answered 404 fails the export at once (no retry)', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'fay@example.com');
    receiver.answer = () => ({ status: 404 });
    const res = await settled(a, await requestExport(a, key));
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(/answered 404/);
    await callbacksDone(a);
    expect(bodies(receiver.received)).toEqual([{ code: 100, message: 'Callback verified' }]);
  });

  it('SPE-09: a redirect is not followed: the verification answered 307 fails the export, and its Location is never called', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'gil@example.com');
    receiver.answer = (r) =>
      r.path === '/callback' ? { status: 307, headers: { location: receiver.url('/elsewhere') } } : { status: 200 };
    const res = await settled(a, await requestExport(a, key));
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(/answered 307 \(redirects are not followed\)/);
    await callbacksDone(a);
    expect(receiver.received.map((r) => r.path)).toEqual(['/callback']);
  });

  it('SPE-06: a ready callback that is not taken is tried again, without a second verification', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'hal@example.com');
    let readies = 0;
    receiver.answer = (r) =>
      (r.body as { code: number }).code === 200 && readies++ === 0 ? { status: 503 } : { status: 204 };
    await requestExport(a, key);
    await receiver.waitFor(2);
    await until(
      'the ready callback tried again',
      async () => {
        await dueNow(a);
        return receiver.received.length >= 3;
      },
      STATE_BOUND_MS,
    );
    await callbacksDone(a);
    expect(bodies(receiver.received).map((b) => (b as { code: number }).code)).toEqual([100, 200, 200]);
  });

  it('SPE-02, SPE-03, SPE-04, SPE-05: an invalid export key, an unknown one, a missing or malformed callback_url, another scheme: refused, nothing queued', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'ida@example.com');
    const post = (k: string, body: unknown) =>
      server.request('POST', `/audience/profiles/export-single/${encodeURIComponent(k)}`, { token: a.token, body });
    const cb = { callback_url: receiver.url() };
    expect(expectProblem(await post('not_an@export.key', cb), 400, 'AUD-1920')).toMatch(/\[a-zA-Z0-9-\]\*/);
    expectProblem(await post('0b7c2a8e-1111-4c3b-9d2e-5f6a7b8c9d0e', cb), 404, 'AUD-1201');
    expect(expectProblem(await post(key, {}), 400, 'AUD-1003')).toMatch(/callback_url/);
    expect(expectProblem(await post(key, { callback_url: 'not a url' }), 400)).toMatch(/callback_url/);
    expect(expectProblem(await post(key, { callback_url: 'ftp://example.com/hook' }), 400, 'AUD-1921')).toMatch(
      /"ftp" is not http or https/,
    );
    expectProblem(await post(key, { ...cb, include_merged_profiles: 'yes' }), 400);
    const { rows } = await db.query(
      'select (select count(*) from exports where account_id = $1::bigint)::int as exports, (select count(*) from jobs where account_id = $1::bigint)::int as jobs',
      [a.accountId],
    );
    expect(rows[0]).toEqual({ exports: 0, jobs: 0 });
    expect(receiver.received).toEqual([]);
  });

  it('EXP-41: a key restricted to some sections is refused the export and its file (403)', async () => {
    const a = await account();
    const key = await profile(a, EMAIL, 'jo@example.com');
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    expectProblem(
      await server.request('POST', `/audience/profiles/export-single/${key}`, {
        token: restricted,
        body: { callback_url: receiver.url() },
      }),
      403,
      'AUD-1107',
    );
    const path = await requestExport(a, key);
    expect((await settled(a, path)).status).toBe(200);
    expectProblem(await server.request('GET', path, { token: restricted }), 403, 'AUD-1107');
    await callbacksDone(a);
  });

  it("AUTH-17, EXP-32: a URL naming another account is 403; another account's export under one's own is 404; the poll URLs know no single export", async () => {
    const a = await account();
    const b = await account();
    const path = await requestExport(a, await profile(a, EMAIL, 'kit@example.com'));
    expect((await settled(a, path)).status).toBe(200);
    expectProblem(await server.request('GET', path, { token: b.token }), 403, 'AUD-9');
    const id = path.split('/').pop()!.split('?')[0];
    expectProblem(
      await server.request('GET', `/audience/profiles/export-single/accounts/${b.accountId}/definitions/${id}`, {
        token: b.token,
      }),
      404,
      'AUD-1903',
    );
    expectProblem(
      await server.request('GET', `/audience/profiles/export-single/accounts/${a.accountId}/definitions/not-an-id`, {
        token: a.token,
      }),
      404,
      'AUD-1903',
    );
    expectProblem(await server.request('GET', `/audience/profiles/reports/${id}`, { token: a.token }), 410, 'AUD-1902');
    expectProblem(
      await server.request('GET', `/v2/audience/profiles/reports/${id}`, { token: a.token }),
      404,
      'AUD-1903',
    );
    await callbacksDone(a);
  });

  it('LIM-04: the export counts among the profile export requests, 1 per second by default', async () => {
    const a = await account({ ...NO_LIMITS, profile_export_requests_per_second: 1 });
    const key = await profile(a, EMAIL, 'lu@example.com');
    await requestExport(a, key);
    const refused = await server.request('POST', `/audience/profiles/export-single/${key}`, {
      token: a.token,
      body: { callback_url: receiver.url() },
    });
    expectProblem(refused, 429, 'AUD-1002');
    expect(refused.headers.get('retry-after')).toBe('1');
    server.clock.advance(1000);
    await requestExport(a, key);
    await callbacksDone(a);
  });
});

// Last: it moves the clock a day on, past the life of every token issued before.
describe('expiry', () => {
  it('EXP-35: the file is served for a day after it was written; then 410', async () => {
    const a = await account();
    const path = await requestExport(a, await profile(a, EMAIL, 'mo@example.com'));
    expect((await settled(a, path)).status).toBe(200);
    await callbacksDone(a);
    server.clock.advance(DAY - 1000);
    expect((await server.request('GET', path, { token: a.token })).status).toBe(200);
    server.clock.advance(1000);
    // Tokens live a day too: a new one.
    const token = await server.token(await server.createKey(a.accountId));
    expect(expectProblem(await server.request('GET', path, { token }), 410, 'AUD-1902')).toMatch(/no longer available/);
  });
});

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EmulatorError, startEmulator, type Emulator } from '../clients/testing/src/index.ts';
import { CallbackReceiver } from './callbacks.ts';
import { atFileEnd } from './scratch.ts';
import { readWhen, STATE_BOUND_MS, until } from './until.ts';
import { sendImportFile, type Created } from './imports-http.ts';

// The emulator (docs/emulator.md) used as an integrator's test suite uses it: through
// @audience/testing (clients/testing), which runs `audience emulate`, and plain HTTP. One emulator for the file,
// reset before each test.

let emulator: Emulator;
// The ready account's definitions are the demo's, under the vendor word the test chose.
const V = 'com.acme1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;
const profile = (key: string) => `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}/sections/${SHOP}`;

beforeAll(async () => {
  emulator = await startEmulator({ vendor: 'acme', timeoutMs: 110_000 });
});
afterAll(async () => {
  await emulator?.stop();
});
beforeEach(async () => {
  await emulator.control.reset();
});

async function call(
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(emulator.baseUrl + path, {
    method,
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    redirect: 'manual',
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text,
  };
}

const admin = (method: string, path: string, body?: unknown) =>
  call(method, `/admin/accounts/${emulator.account.accountId}${path}`, { token: emulator.account.adminToken, body });

describe('the ready account', () => {
  it("has the credentials the emulator printed, the vendor word asked for, and the emulator's relaxed rate limits", async () => {
    expect(emulator.account).toEqual({
      accountId: expect.stringMatching(/^\d+$/),
      clientId: expect.any(String),
      clientSecret: expect.any(String),
      vendor: 'acme',
      region: 'eu',
      adminToken: expect.any(String),
    });
    const token = await emulator.token();
    const sections = await call('GET', '/audience/sections', { token });
    expect(sections.status).toBe(200);
    expect(sections.body.items.map((s: { discriminator: string }) => s.discriminator)).toContain(SHOP);
    // The service allows 10 token requests a minute; the emulator lifts it, so a suite's setup does not trip 429s.
    for (let i = 0; i < 12; i++) await emulator.token();
    // The document the emulator serves is the service's: the control API is not in it.
    const doc = await call('GET', '/openapi.json');
    expect(Object.keys(doc.body.paths).filter((p) => p.startsWith('/_emulator'))).toEqual([]);
    expect(Object.keys(doc.body.paths)).toContain('/audience/sections');
    const limits = await emulator.control.limits.get();
    expect(limits.token_requests_per_minute).toBeNull();
    expect(limits.pending_imports).toBe(3);
  });

  it('answers at the address it prints for its control API with the operations there', async () => {
    const index = await call('GET', '/_emulator');
    expect(index.status).toBe(200);
    const listed = index.body.operations.map((o: { method: string; path: string }) => `${o.method} ${o.path}`);
    expect(listed).toEqual(expect.arrayContaining(['GET /_emulator/account', 'POST /_emulator/reset']));
    expect(index.body.operations.every((o: { summary: string }) => o.summary.length > 0)).toBe(true);
  });

  it('limits can be set per test, and reset brings back the relaxed ones', async () => {
    const typo = await call('PATCH', '/_emulator/limits', { body: { token_request_per_minute: 1 } });
    expect(typo.status).toBe(400);
    expect(typo.body.detail).toMatch(/token_request_per_minute/);
    await emulator.control.limits.set({ token_requests_per_minute: 1 });
    await emulator.token();
    await expect(emulator.token()).rejects.toThrow(/429/);
    await emulator.control.reset();
    for (let i = 0; i < 3; i++) await emulator.token();
  });
});

describe('reset', () => {
  it('goes back to the initial state: what a test wrote is gone, the credentials still work', async () => {
    const token = await emulator.token();
    expect((await call('PATCH', `${profile('ann@example.com')}/attributes`, { token, body: {} })).status).toBe(204);
    expect((await call('GET', `${profile('ann@example.com')}/attributes`, { token })).status).toBe(200);
    await emulator.control.reset();
    // The token of before still verifies: the key and the signing keys are those of the initial state.
    expect((await call('GET', `${profile('ann@example.com')}/attributes`, { token })).status).toBe(404);
    expect(
      (await call('GET', `${profile('ann@example.com')}/attributes`, { token: await emulator.token() })).status,
    ).toBe(404);
  });

  it("goes back to a saved snapshot of the test's own fixtures, and from it to the initial state", async () => {
    const token = await emulator.token();
    await call('PATCH', `${profile('fixture@example.com')}/attributes`, { token, body: {} });
    await emulator.control.snapshot('fixtures');
    await call('PATCH', `${profile('later@example.com')}/attributes`, { token, body: {} });
    await emulator.control.reset('fixtures');
    expect((await call('GET', `${profile('fixture@example.com')}/attributes`, { token })).status).toBe(200);
    expect((await call('GET', `${profile('later@example.com')}/attributes`, { token })).status).toBe(404);
    await emulator.control.reset();
    expect((await call('GET', `${profile('fixture@example.com')}/attributes`, { token })).status).toBe(404);
    const unknown = await call('POST', '/_emulator/reset', { body: { snapshot: 'nothing_saved' } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.type).toBe('/errors/AUD-2201');
  });
});

describe('the clock', () => {
  it('AUTH-12 moved past a token’s lifetime, the token is refused; a new one works', async () => {
    const token = await emulator.token();
    expect((await call('GET', '/audience/sections', { token })).status).toBe(200);
    const before = Date.parse((await emulator.control.clock.now()).now);
    const moved = await emulator.control.clock.advance(24 * 3600 + 1);
    expect(Date.parse(moved.now) - before).toBeGreaterThanOrEqual((24 * 3600 + 1) * 1000);
    const refused = await call('GET', '/audience/sections', { token });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/expired/i);
    expect((await call('GET', '/audience/sections', { token: await emulator.token() })).status).toBe(200);
  });

  it('set and frozen, it stands still; reset brings back the real time', async () => {
    const at = await emulator.control.clock.set('2030-01-02T03:04:05.000Z', { frozen: true });
    expect(at).toEqual({ now: '2030-01-02T03:04:05.000Z', frozen: true, jobs_run: expect.any(Number) });
    expect((await emulator.control.clock.now()).now).toBe('2030-01-02T03:04:05.000Z');
    const past = await call('PUT', '/_emulator/clock', { body: { now: '2020-01-01T00:00:00Z' } });
    expect(past.status).toBe(400);
    expect(past.body.type).toBe('/errors/AUD-2203');
    await emulator.control.reset();
    const now = await emulator.control.clock.now();
    expect(now.frozen).toBe(false);
    expect(Math.abs(Date.parse(now.now) - Date.now())).toBeLessThan(60_000);
  });

  it('IMP-06 moved past an import’s upload window, the upload is refused (403)', async () => {
    const token = await emulator.token();
    const created = { body: await createImport(token) };
    await emulator.control.clock.advance(5 * 60 + 1);
    const res = await upload(created.body, 'email,reader\nlate@example.com,true\n');
    expect(res.status).toBe(403);
  });
});

/** An import of email addresses with one attribute of the demo's Shop, the newsletter reader flag. */
async function createImport(token: string) {
  const attributes = (await call('GET', `/audience/sections/${SHOP}/attributes`, { token })).body.items as {
    discriminator: string;
    versions: { id: string }[];
  }[];
  const reader = attributes.find((a) => a.discriminator.endsWith('.newsletter-reader'))!;
  const created = await call('POST', `/v2/audience/sections/${SHOP}/imports`, {
    token,
    body: {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'reader', attribute_version_id: reader.versions.at(-1)!.id }],
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body;
}

const upload = (created: Pick<Created, 'file_upload_url' | 'file_upload_body'>, csv: string) =>
  sendImportFile(emulator.baseUrl, created, csv);

describe('jobs', () => {
  it('IMP-05 run now: an uploaded import is completed on the next poll', async () => {
    const token = await emulator.token();
    const created = { body: await createImport(token) };
    expect(
      (await upload(created.body, 'email,reader\nimported@example.com,true\nsecond@example.com,false\n')).status,
    ).toBe(204);
    await emulator.control.jobs.run();
    const status = await call('GET', `/audience/sections/${SHOP}/imports/${created.body.import_id}`, { token });
    expect(status.body.result).toEqual({
      status: 'completed',
      profiles_found: 2,
      profiles_processed: 2,
      profiles_failed: 0,
    });
    expect((await call('GET', `${profile('imported@example.com')}/attributes`, { token })).status).toBe(200);
  });
});

describe('jobs under a stopped clock', () => {
  it('IMP-05 jobs to run at once still run when the stopped clock has fallen behind the real time', async () => {
    await emulator.control.clock.set(new Date(Date.now() + 1000), { frozen: true });
    // The real time passes the stopped clock: the import's job is due at the database's time.
    await new Promise((r) => setTimeout(r, 1500));
    const token = await emulator.token();
    const created = { body: await createImport(token) };
    expect((await upload(created.body, 'email,reader\nfrozen@example.com,true\n')).status).toBe(204);
    await emulator.control.jobs.run();
    const status = await call('GET', `/audience/sections/${SHOP}/imports/${created.body.import_id}`, { token });
    expect(status.body.result.status).toBe('completed');
  });
});

describe('faults', () => {
  it('answers the next N requests on a path 503, then serves it again', async () => {
    const token = await emulator.token();
    const fault = await emulator.control.faults.add({
      path: '/audience/sections',
      method: 'GET',
      status: 503,
      times: 2,
    });
    expect(fault).toMatchObject({ id: expect.any(Number), remaining: 2 });
    for (let i = 0; i < 2; i++) {
      const res = await call('GET', '/audience/sections', { token });
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body.status).toBe(503);
    }
    expect((await call('GET', '/audience/sections', { token })).status).toBe(200);
    expect(await emulator.control.faults.list()).toEqual([]);
  });

  it('answers 429 with the Retry-After asked for, on any path the pattern matches, before authentication', async () => {
    await emulator.control.faults.add({ path: '/audience/*', status: 429, retry_after: 7 });
    const res = await call('GET', `${profile('x@example.com')}/attributes`);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(res.body.type).toBe('/errors/AUD-1002');
    // Spent: the same request is the service's again (401: no token).
    expect((await call('GET', `${profile('x@example.com')}/attributes`)).status).toBe(401);
  });

  it('drops the connection, or delays the answer and then serves the request', async () => {
    await emulator.control.faults.add({ path: '/oauth/token', drop: true });
    await expect(emulator.token()).rejects.toThrow();
    await emulator.control.faults.add({ path: '/oauth/token', delay_ms: 50 });
    expect(await emulator.token()).toMatch(/\./);
    const logged = await emulator.control.requests.list({ path: '/oauth/token' });
    expect(logged.map((r) => [r.status, r.fault !== undefined])).toEqual([
      [0, true],
      [200, true],
    ]);
  });

  it('a fault that does nothing is refused, naming what it needs', async () => {
    const res = await call('POST', '/_emulator/faults', { body: { path: '/x' } });
    expect(res.status).toBe(400);
    expect(res.body.type).toBe('/errors/AUD-2202');
    expect(res.body.detail).toMatch(/status, drop, body or delay_ms/);
  });
});

describe('the request log', () => {
  it('holds what the client sent, filterable by method, path and time, credentials masked', async () => {
    const start = (await emulator.control.clock.now()).now;
    const token = await emulator.token();
    await call('PATCH', `${profile('logged@example.com')}/attributes`, { token, body: {} });
    await call('GET', '/audience/sections', { token });
    const tokens = await emulator.control.requests.list({ method: 'POST', path: '/oauth/token', since: start });
    expect(tokens).toHaveLength(1);
    expect(tokens[0].body).toEqual({
      grant_type: 'client_credentials',
      client_id: emulator.account.clientId,
      client_secret: '[masked]',
    });
    expect(tokens[0].status).toBe(200);
    const patches = await emulator.control.requests.list({ path: '/audience/keyspaces/*' });
    expect(patches.map((r) => [r.method, r.status, r.headers.authorization])).toEqual([
      ['PATCH', 204, 'Bearer [masked]'],
    ]);
    expect((await emulator.control.requests.list()).map((r) => r.path)).toEqual([
      '/oauth/token',
      patches[0].path,
      '/audience/sections',
    ]);
    // The control API's own requests are not in it.
    expect((await emulator.control.requests.list({ path: '/_emulator*' })).length).toBe(0);
  });
});

describe('mail', () => {
  it('TX-01 holds the messages transactional sends sent, decoded, with their tracking links', async () => {
    const activity = await admin('PUT', '/activities/order-confirmation', {
      kind: 'email',
      section_discriminator: SHOP,
      name: 'Order confirmation',
      status: 'active',
      transactional: true,
      email_subject: 'Order {{ order }}',
      sender_name: 'The Shop',
      sender_email_address: 'orders@shop.example',
      html: '<p>Order {{ order }}.</p><a href="https://shop.example/orders/{{ order }}">Your order</a> <a href="{{ unsubscribe_url }}">Unsubscribe</a>',
    });
    expect(activity.status).toBe(201);
    const token = await emulator.token();
    const sent = await call(
      'POST',
      `/emails/sections/${SHOP}/activities/transactional/${activity.body.id}/transactions`,
      {
        token,
        body: {
          keyspace_discriminator: EMAIL,
          profile_key: 'buyer@example.com',
          to_name: 'Bea Buyer',
          to_email_address: 'buyer@example.com',
          variables: { order: 'A-17' },
        },
      },
    );
    expect(sent.status, JSON.stringify(sent.body)).toBe(201);
    await emulator.control.jobs.run();
    const [message] = await emulator.control.mail.list({ to: 'buyer@example.com' });
    expect(message).toMatchObject({
      transaction_id: sent.body.id,
      to: ['buyer@example.com'],
      subject: 'Order A-17',
      from: expect.stringContaining('orders@shop.example'),
    });
    expect(message.html).toContain('Order A-17.');
    expect(message.unsubscribe).toMatch(/\/mail\/unsubscribe\//);
    const click = message.links.find((l) => l.includes('/mail/click/'))!;
    const followed = await fetch(emulator.baseUrl + new URL(click).pathname, { redirect: 'manual' });
    expect(followed.status).toBe(302);
    expect(followed.headers.get('location')).toBe('https://shop.example/orders/A-17');
    expect(await emulator.control.mail.list({ to: 'nobody@example.com' })).toEqual([]);
  });
});

describe('outbound calls', () => {
  /** A profile of the demo's Shop and its export key (its key in the export keyspace). */
  async function exportKeyOf(token: string, key: string): Promise<string> {
    expect((await call('PATCH', `${profile(key)}/attributes`, { token, body: {} })).status).toBe(204);
    const cluster = await call('GET', `/audience/profiles/merges/keyspaces/${EMAIL}/profiles/${key}`, { token });
    return cluster.body.items[0].keys.find((k: { keyspace_discriminator: string }) =>
      k.keyspace_discriminator.endsWith('.keyspaces.export'),
    ).profile_key;
  }

  async function receiver() {
    const r = await CallbackReceiver.start();
    atFileEnd(() => r.close());
    return r;
  }

  it('SPE-01 a callback reaches a receiver on loopback, and is recorded with its body and answer', async () => {
    const target = await receiver();
    target.answer = () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'thanks' });
    const token = await emulator.token();
    const key = await exportKeyOf(token, 'exported@example.com');
    const requested = await call('POST', `/audience/profiles/export-single/${key}`, {
      token,
      body: { callback_url: target.url('/hook') },
    });
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    await emulator.control.jobs.run();
    // The verification's success queues the ready callback, which the worker sends a moment later.
    const calls = await readWhen(
      'both callbacks recorded',
      () => emulator.control.outbound.list({ kind: 'callback' }),
      (c) => c.length >= 2,
      STATE_BOUND_MS,
    );
    expect(target.received.map((r) => (r.body as { code: number }).code)).toEqual([100, 200]);
    expect(calls).toEqual([
      expect.objectContaining({
        kind: 'callback',
        method: 'POST',
        target: target.url('/hook'),
        body: { code: 100, message: 'Callback verified' },
        answer: { status: 200, body: 'thanks' },
      }),
      expect.objectContaining({ body: { code: 200, message: requested.headers.get('location') } }),
    ]);
  });

  it('SPE-09 faulted: refused, then answered 500 in the target’s place; the job tries again', async () => {
    const target = await receiver();
    await emulator.control.outbound.faults.add({ kind: 'callback', target: `${target.url('')}/*`, refuse: true });
    await emulator.control.outbound.faults.add({ kind: 'callback', status: 500 });
    const token = await emulator.token();
    const key = await exportKeyOf(token, 'faulted@example.com');
    await call('POST', `/audience/profiles/export-single/${key}`, { token, body: { callback_url: target.url() } });
    await emulator.control.jobs.run();
    // Both attempts failed without reaching the receiver; the retries come after their back-off.
    expect(target.received).toEqual([]);
    await emulator.control.clock.advance(2);
    await emulator.control.clock.advance(4);
    // The verification's success queues the ready callback, which the worker may send a moment later.
    const calls = await readWhen(
      'four callbacks recorded',
      () => emulator.control.outbound.list({ kind: 'callback' }),
      (c) => c.length >= 4,
      STATE_BOUND_MS,
    );
    expect(calls.map((c) => [c.fault !== undefined, c.answer.status ?? null, c.answer.error !== undefined])).toEqual([
      [true, null, true],
      [true, 500, false],
      [false, 200, false],
      [false, 200, false],
    ]);
    expect(target.received).toHaveLength(2);
    expect(await emulator.control.outbound.faults.list()).toEqual([]);
  });

  it('a webhook delivery reaches a receiver on loopback, and is listed with its headers, body and answer', async () => {
    const target = await receiver();
    target.answer = () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'received' });
    const token = await emulator.token();
    const subscribed = await call('POST', '/webhooks', {
      token,
      body: { url: target.url('/hooks'), event_types: ['profile.deleted'] },
    });
    expect(subscribed.status, JSON.stringify(subscribed.body)).toBe(201);
    await exportKeyOf(token, 'deleted@example.com');
    const fault = await emulator.control.outbound.faults.add({ kind: 'webhook', status: 503 });
    expect((await call('DELETE', `/audience/keyspaces/${EMAIL}/profiles/deleted@example.com`, { token })).status).toBe(
      204,
    );
    await emulator.control.jobs.run();
    // The first attempt may be the background worker's, a moment after: wait for it, then for the retry.
    const attempts = (n: number) =>
      until(
        `${n} attempts`,
        async () => (await emulator.control.webhooks.list({ type: 'profile.deleted' })).length >= n,
        STATE_BOUND_MS,
      );
    await attempts(1);
    await emulator.control.clock.advance(3600);
    await attempts(2);
    expect(target.received).toHaveLength(1);
    const deliveries = await emulator.control.webhooks.list({ type: 'profile.deleted' });
    expect(deliveries).toEqual([
      expect.objectContaining({ url: target.url('/hooks'), answer: { status: 503, body: '' }, fault: fault.id }),
      expect.objectContaining({ url: target.url('/hooks'), answer: { status: 200, body: 'received' } }),
    ]);
    const [faulted, delivered] = deliveries;
    expect(delivered.event_id).toBe(faulted.event_id);
    expect(delivered.headers).toEqual({
      'webhook-id': delivered.event_id,
      'webhook-timestamp': expect.stringMatching(/^\d+$/),
      'webhook-signature': expect.stringMatching(/^v1,/),
    });
    expect(delivered.body).toMatchObject({ type: 'profile.deleted', data: { profiles: [expect.anything()] } });
    expect(target.received[0].body).toEqual(delivered.body);
    expect(await emulator.control.webhooks.list({ limit: 1 })).toEqual([delivered]);
    expect(await emulator.control.webhooks.list({ url: 'http://elsewhere/*' })).toEqual([]);
    expect(await emulator.control.webhooks.list({ after: delivered.id })).toEqual([]);
    expect(await emulator.control.outbound.list({ kind: 'webhook' })).toEqual([
      expect.objectContaining({ id: faulted.id, headers: faulted.headers }),
      expect.objectContaining({ id: delivered.id, target: delivered.url }),
    ]);
  });

  it('TX-01 mail is recorded as an outbound call, and a fault answers in the mail server’s place', async () => {
    const activity = await admin('PUT', '/activities/welcome', {
      kind: 'email',
      section_discriminator: SHOP,
      name: 'Welcome',
      status: 'active',
      transactional: true,
      email_subject: 'Welcome {{ name }}',
      sender_name: 'The Shop',
      sender_email_address: 'hello@shop.example',
      html: '<p>Hello {{ name }}</p>',
    });
    expect(activity.status).toBe(201);
    await emulator.control.outbound.faults.add({ kind: 'mail', target: 'bounce@*', status: 550 });
    const token = await emulator.token();
    for (const to of ['bounce@example.com', 'fine@example.com'])
      await call('POST', `/emails/sections/${SHOP}/activities/transactional/welcome/transactions`, {
        token,
        body: {
          keyspace_discriminator: EMAIL,
          profile_key: to,
          to_name: 'X',
          to_email_address: to,
          variables: { name: 'X' },
        },
      });
    await emulator.control.jobs.run();
    const mail = await emulator.control.outbound.list({ kind: 'mail' });
    const sorted = mail.sort((a, b) => a.target.localeCompare(b.target));
    expect(sorted.map((m) => [m.target, m.answer.status, (m.body as { subject: string }).subject])).toEqual([
      ['bounce@example.com', 550, 'Welcome X'],
      ['fine@example.com', 250, 'Welcome X'],
    ]);
    expect((await emulator.control.mail.list()).map((m) => m.to)).toEqual([['fine@example.com']]);
  });

  it('an outbound fault that does nothing is refused', async () => {
    const res = await call('POST', '/_emulator/outbound/faults', { body: { kind: 'callback' } });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/status, refuse or delay_ms/);
  });
});

describe('strict mode and manual jobs for one test', () => {
  it('the header refuses an unknown field for one request; without it the field is ignored, as the platform does', async () => {
    const token = await emulator.token();
    const strict = await fetch(`${emulator.baseUrl}/audience/sections/${SHOP}/tags`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-audience-strict': 'true' },
      body: JSON.stringify({ name: 'Typo', nope: 1 }),
    });
    expect(strict.status).toBe(400);
    expect(((await strict.json()) as { detail: string }).detail).toMatch(/"nope" is not allowed/);
    const lenient = await call('POST', `/audience/sections/${SHOP}/tags`, { token, body: { name: 'Typo', nope: 1 } });
    expect(lenient.status).toBe(201);
  });

  it('jobs switched to manual wait until run; a reset brings back the automatic mode', async () => {
    await emulator.control.jobs.setMode('manual');
    const token = await emulator.token();
    const created = await createImport(token);
    expect((await upload(created, 'email,reader\nwaiting@example.com,true\n')).status).toBe(204);
    const status = () => call('GET', `/audience/sections/${SHOP}/imports/${created.import_id}`, { token });
    expect((await status()).body.result.status).toBe('queued');
    expect((await emulator.control.jobs.list()).items.map((j) => [j.kind, j.state])).toContainEqual([
      'import',
      'waiting',
    ]);
    expect(await emulator.control.jobs.run()).toBeGreaterThanOrEqual(1);
    expect((await status()).body.result.status).toBe('completed');
    await emulator.control.reset();
    expect((await emulator.control.jobs.list()).mode).toBe('automatic');
    const unknown = await call('POST', '/_emulator/jobs/999999/run');
    expect(unknown.status).toBe(404);
    expect(unknown.body.type).toBe('/errors/AUD-2204');
  });
});

describe('the control client', () => {
  it('lists snapshots, limits the request log and the mail, and throws typed errors', async () => {
    await emulator.control.snapshot('listed');
    expect(await emulator.control.snapshots.list()).toContain('listed');
    const token = await emulator.token();
    for (let i = 0; i < 3; i++) await call('GET', '/audience/sections', { token });
    const last = await emulator.control.requests.list({ path: '/audience/sections', limit: 2 });
    expect(last).toHaveLength(2);
    expect(await emulator.control.mail.list({ limit: 1 })).toEqual([]);
    const refused = await emulator.control.reset('never_saved').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EmulatorError);
    expect(refused).toMatchObject({ code: 'AUD-2201', status: 404, request: 'POST /_emulator/reset' });
  });

  it('a fault of a status it cannot answer is refused naming the statuses it can', async () => {
    const refused = await emulator.control.faults
      .add({ path: '/x', status: 418 as never })
      .catch((e: unknown) => e as EmulatorError);
    expect(refused).toMatchObject({ status: 400, code: 'AUD-0' });
    expect((refused as EmulatorError).detail).toMatch(/status.*429, 500, 502, 503, 504/);
  });
});

describe('more faults', () => {
  it('answers 502 and 504 as problem documents', async () => {
    await emulator.control.faults.add({ path: '/audience/sections', status: 502 });
    await emulator.control.faults.add({ path: '/audience/sections', status: 504 });
    const token = await emulator.token();
    const first = await call('GET', '/audience/sections', { token });
    const second = await call('GET', '/audience/sections', { token });
    expect([first.status, first.body.status, second.status, second.body.status]).toEqual([502, 502, 504, 504]);
  });

  it('serves the request and spoils its answer: malformed, truncated, slow', async () => {
    const token = await emulator.token();
    const whole = await call('GET', '/audience/sections', { token });
    const get = () => fetch(`${emulator.baseUrl}/audience/sections`, { headers: { authorization: `Bearer ${token}` } });
    await emulator.control.faults.add({ path: '/audience/sections', body: 'malformed' });
    const malformed = await get();
    expect(malformed.status).toBe(200);
    const text = await malformed.text();
    expect(() => JSON.parse(text)).toThrow();
    expect(JSON.stringify(whole.body).startsWith(text)).toBe(true);
    await emulator.control.faults.add({ path: '/audience/sections', body: 'truncated' });
    const truncated = await get();
    expect(truncated.status).toBe(200);
    await expect(truncated.text()).rejects.toThrow();
    await emulator.control.faults.add({ path: '/audience/sections', body: 'slow', body_delay_ms: 300 });
    // A lower bound only, which load cannot break: the body cannot come before the emulator's delay.
    const sentAt = performance.now();
    const slow = await get();
    expect(JSON.parse(await slow.text())).toEqual(whole.body);
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(290);
    const logged = await emulator.control.requests.list({ path: '/audience/sections' });
    expect(logged.slice(-3).map((r) => r.fault !== undefined)).toEqual([true, true, true]);
  });

  it('applies with a probability: a request spared does not spend it', async () => {
    await emulator.control.faults.add({ path: '/audience/sections', status: 503, probability: 1e-12 });
    const token = await emulator.token();
    for (let i = 0; i < 5; i++) expect((await call('GET', '/audience/sections', { token })).status).toBe(200);
    expect(await emulator.control.faults.list()).toEqual([
      expect.objectContaining({ remaining: 1, probability: 1e-12 }),
    ]);
  });
});

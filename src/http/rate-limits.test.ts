import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer, expectProblem, metric } from '../../test/app.ts';
import { freePort } from '../store/embedded.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('rate limits (LIM-01)', () => {
  const sections = (token: string) => server.request('GET', '/audience/sections', { token });

  it('the 101st request within one second answers 429 with Retry-After, and the next second passes (LIM-01, ERR-18, ERR-01)', async () => {
    const { token } = await server.login({}, { requests_per_second: 100 });
    const refusals = async () =>
      metric(
        (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text,
        'audience_rate_limit_refusals_total',
        { limit: 'requests_per_second' },
      ) ?? 0;
    const before = await refusals();
    for (let i = 0; i < 100; i++) expect((await sections(token)).status).toBe(200);
    const refused = await sections(token);
    expectProblem(refused, 429, 'AUD-1002');
    // Counted by the name of the limit, for /metrics.
    expect(await refusals()).toBe(before + 1);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body.detail).toMatch(/retry later/);
    server.clock.advance(1000);
    expect((await sections(token)).status).toBe(200);
  });

  it('is shared by all API keys of one account (LIM-01, AUTH-06)', async () => {
    const first = await server.login({}, { requests_per_second: 100 });
    const token2 = await server.token(await server.createKey(first.accountId));
    for (let i = 0; i < 50; i++) expect((await sections(first.token)).status).toBe(200);
    for (let i = 0; i < 50; i++) expect((await sections(token2)).status).toBe(200);
    expectProblem(await sections(token2), 429, 'AUD-1002');
    expectProblem(await sections(first.token), 429, 'AUD-1002');
    // Another account has its own budget.
    const other = await server.login({}, { requests_per_second: 100 });
    expect((await sections(other.token)).status).toBe(200);
  });

  it('a limit lifted with null allows many more (LIM-01, LIM-12)', async () => {
    const { token } = await server.login({}, { requests_per_second: null });
    for (let i = 0; i < 250; i++) expect((await sections(token)).status).toBe(200);
  });

  it('an operator change of the limits takes effect at once (LIM-12)', async () => {
    const { accountId, token } = await server.login();
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 3 } })).status,
    ).toBe(200);
    for (let i = 0; i < 3; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
    const lifted = await server.admin('PATCH', `/admin/accounts/${accountId}`, {
      limits: { requests_per_second: null },
    });
    expect(lifted.status).toBe(200);
    expect(lifted.body.limits.requests_per_second).toBeNull();
    expect((await sections(token)).status).toBe(200);
  });

  it('a raised limit serves at once: 5 per second spent, raised to 100, the next requests pass (LIM-12)', async () => {
    const { accountId, token } = await server.login({}, { requests_per_second: 5, token_requests_per_minute: null });
    for (let i = 0; i < 5; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 100 } })).status,
    ).toBe(200);
    // The test clock stands still: no refill, only the raise.
    for (let i = 0; i < 8; i++) expect((await sections(token)).status).toBe(200);
    // Lowered again, it binds at once.
    expect(
      (await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 2 } })).status,
    ).toBe(200);
    for (let i = 0; i < 2; i++) expect((await sections(token)).status).toBe(200);
    expectProblem(await sections(token), 429, 'AUD-1002');
  });

  it('a patch of the limits changes only the limits it names; an empty one changes none', async () => {
    const { accountId } = await server.login(
      {},
      { requests_per_second: 7, tags_per_section: 9, token_requests_per_minute: null },
    );
    let res = await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { tags_per_section: 4 } });
    expect(res.body.limits).toMatchObject({ requests_per_second: 7, tags_per_section: 4 });
    res = await server.admin('PATCH', `/admin/accounts/${accountId}`, { limits: {} });
    expect(res.body.limit_overrides).toEqual({
      requests_per_second: 7,
      tags_per_section: 4,
      token_requests_per_minute: null,
    });
    // A manifest's account.limits are changes too: nothing absent from it is removed.
    expect(
      (
        await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, {
          account: { limits: { merges_per_profile: 10 } },
        })
      ).status,
    ).toBe(200);
    expect((await server.admin('GET', `/admin/accounts/${accountId}`)).body.limits).toMatchObject({
      requests_per_second: 7,
      tags_per_section: 4,
      merges_per_profile: 10,
    });
  });
});

// ---- RedisBuckets: several API processes share one budget per account ----

const redisBinary = spawnSync('which', ['redis-server']).status === 0;

/** Starts redis-server and resolves once it accepts connections. */
function startRedis(port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) resolve(child);
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
  });
}

describe.skipIf(!redisBinary)('RedisBuckets (LIM-01 across processes)', () => {
  let redis: ChildProcess | undefined;
  let url = '';
  beforeAll(async () => {
    const port = await freePort();
    redis = await startRedis(port);
    url = `redis://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    if (!redis || redis.exitCode !== null) return;
    const exited = new Promise((resolve) => redis!.once('exit', resolve));
    redis.kill();
    await exited;
  });

  it('a raised or lowered limit takes effect at once in the shared buckets too (LIM-12)', async () => {
    const shared = await TestServer.start({ REDIS_URL: url });
    try {
      const { accountId, token } = await shared.login({}, { requests_per_second: 5, token_requests_per_minute: null });
      for (let i = 0; i < 5; i++)
        expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expectProblem(await shared.request('GET', '/audience/sections', { token }), 429, 'AUD-1002');
      expect(
        (await shared.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 100 } })).status,
      ).toBe(200);
      for (let i = 0; i < 8; i++)
        expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expect(
        (await shared.admin('PATCH', `/admin/accounts/${accountId}`, { limits: { requests_per_second: 1 } })).status,
      ).toBe(200);
      expect((await shared.request('GET', '/audience/sections', { token })).status).toBe(200);
      expectProblem(await shared.request('GET', '/audience/sections', { token }), 429, 'AUD-1002');
    } finally {
      await shared.close();
    }
  });

  it('two servers with one REDIS_URL share one budget per account (LIM-01)', async () => {
    const first = await TestServer.start({ REDIS_URL: url });
    const second = await TestServer.start({ REDIS_URL: url });
    try {
      // Both processes read the same instant, as machines with synchronised clocks do.
      second.clock.now = first.clock.now;
      const { token } = await first.login({}, { requests_per_second: 5 });
      const other = await first.login({}, { requests_per_second: 5 });
      for (let i = 0; i < 5; i++)
        expect((await first.request('GET', '/audience/sections', { token })).status).toBe(200);
      const refused = await second.request('GET', '/audience/sections', { token });
      expectProblem(refused, 429, 'AUD-1002');
      expect(refused.headers.get('retry-after')).toBe('1');
      // Another account's budget is untouched.
      expect((await second.request('GET', '/audience/sections', { token: other.token })).status).toBe(200);
      first.clock.advance(1000);
      second.clock.advance(1000);
      expect((await second.request('GET', '/audience/sections', { token })).status).toBe(200);
      // A request refused for its input gives back its route limit, in the shared bucket too.
      const imports = '/v2/audience/sections/com.vendor1.sections.user-created.shop/imports';
      const exporter = await first.login(SHOP, { requests_per_second: null, import_requests_per_minute: 1 });
      expectProblem(await first.request('POST', imports, { token: exporter.token, body: {} }), 400);
      const attributes = await first.request(
        'GET',
        '/audience/sections/com.vendor1.sections.user-created.shop/attributes',
        {
          token: exporter.token,
        },
      );
      const firstname = attributes.body.items.find(
        (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
      ).versions[0].id;
      const good = {
        keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'e' },
        attribute_mappings: [{ field_selector: 'f', attribute_version_id: firstname }],
      };
      const accepted = await second.request('POST', imports, { token: exporter.token, body: good });
      expect(accepted.status, accepted.text).toBe(201);
      expectProblem(await first.request('POST', imports, { token: exporter.token, body: good }), 429, 'AUD-1002');
    } finally {
      await first.close();
      await second.close();
    }
  });
});

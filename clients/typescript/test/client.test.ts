import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer } from '../../../test/app.ts';
import { AudienceProblem, createAudienceClient, type AudienceClientOptions } from '../src/index.ts';

// The typed client against a running server with its worker, as a user's test suite would call it.
// Between the two is a small HTTP relay of the test's own: the address the server publishes
// (PUBLIC_URL: poll and upload URLs) and the one the client calls, which can answer the next
// requests with 429 or 503 to show the client's retries, and counts what passes.

const S = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';

let server: TestServer;
let relay: http.Server;
let base: string;
/** Answers the relay gives instead of forwarding, one per request, first in first out. */
const faults: { status: number; headers: Record<string, string> }[] = [];
/** The method and path of every request that reached the relay. */
const seen: string[] = [];

beforeAll(async () => {
  relay = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const fault = faults.shift();
    if (fault) {
      res.writeHead(fault.status, { 'content-type': 'application/problem+json', ...fault.headers });
      const body = { type: '/errors/AUD-2', title: 'Injected', status: fault.status, status_code: fault.status };
      res.end(JSON.stringify({ ...body, detail: 'injected by the test relay' }));
      return;
    }
    const target = new URL(req.url!, server.url);
    const forward = http.request(target, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
  server = await TestServer.start({ PUBLIC_URL: base }, { worker: true });
});
afterAll(async () => {
  await server?.close();
  relay?.closeAllConnections();
  await new Promise((resolve) => relay?.close(resolve));
});

/** A client of a new account's key; waits are recorded and move the server's clock instead of passing. */
async function clientOf(limits: Record<string, number | null>, options: Partial<AudienceClientOptions> = {}) {
  const credentials = await server.createAccount(SHOP, { limits });
  const waits: number[] = [];
  const client = createAudienceClient({
    baseUrl: base,
    clientId: credentials.clientId,
    clientSecret: credentials.clientSecret,
    now: server.clock.read,
    sleep: async (ms) => {
      waits.push(ms);
      server.clock.advance(ms);
      await new Promise((resolve) => setTimeout(resolve, 20));
    },
    ...options,
  });
  return { client, waits, credentials };
}

const UNLIMITED = { requests_per_second: null, token_requests_per_minute: null };
const tokenRequests = () => seen.filter((line) => line.startsWith('POST /oauth/token')).length;

describe('the typed client', () => {
  it('AUTH-07 fetches a token once for concurrent calls, keeps it, and fetches the next one before it expires', async () => {
    const { client } = await clientOf(UNLIMITED);
    const before = tokenRequests();
    const [a, b] = await Promise.all([client.api.GET('/audience/sections'), client.api.GET('/audience/keyspaces')]);
    expect(a.data!.items.map((s) => s.discriminator)).toContain(S);
    expect(b.data!.items.length).toBeGreaterThan(0);
    expect(tokenRequests() - before).toBe(1);
    const first = await client.token();
    expect(tokenRequests() - before).toBe(1);
    // Tokens live 24 hours: 23 h 59 min 30 s on, within the minute before expiry, the next call renews it.
    server.clock.advance((24 * 3600 - 30) * 1000);
    await client.api.GET('/audience/sections');
    expect(tokenRequests() - before).toBe(2);
    expect(await client.token()).not.toBe(first);
  });

  it('ERR-04 throws a problem document as an AudienceProblem with its code, status and detail', async () => {
    const { client } = await clientOf(UNLIMITED);
    const refused = await client.api
      .GET('/audience/segments/{segment_discriminator}', {
        params: { path: { segment_discriminator: 'com.vendor1.segments.user-created.nothing' } },
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AudienceProblem);
    expect(refused).toMatchObject({ code: 'AUD-1104', status: 404, title: 'Segment not found' });
    expect((refused as AudienceProblem).detail).toMatch(/nothing/);
    const wrong = createAudienceClient({ baseUrl: base, clientId: 'nobody', clientSecret: 'nothing' });
    await expect(wrong.api.GET('/audience/sections')).rejects.toMatchObject({ code: 'AUD-1009', status: 401 });
  });

  it("retries a 429 after the server's Retry-After (LIM-01: one request a second), and a 503 after its Retry-After", async () => {
    const { client, waits } = await clientOf({ requests_per_second: 1, token_requests_per_minute: null });
    await client.token();
    const before = seen.length;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await client.api.GET('/audience/sections')).response.status);
    expect(answers).toEqual([200, 200, 200]);
    // The second and third calls were refused once each, and sent again after the second the server asked for.
    expect(seen.length - before).toBe(5);
    expect(waits).toEqual([1000, 1000]);
    faults.push({ status: 503, headers: { 'retry-after': '2' } }, { status: 503, headers: {} });
    expect((await client.api.GET('/audience/sections')).response.status).toBe(200);
    expect(waits.slice(2)).toEqual([2000, 1000]);
  });

  it('gives up after its retries and throws the last problem', async () => {
    const { client, waits } = await clientOf(UNLIMITED, { retries: 2 });
    await client.token();
    faults.push(...Array.from({ length: 3 }, () => ({ status: 503, headers: { 'retry-after': '1' } })));
    await expect(client.api.GET('/audience/sections')).rejects.toMatchObject({ code: 'AUD-2', status: 503 });
    expect(waits).toEqual([1000, 1000]);
  });

  it('uploads an import and waits for its report, then exports the segment its rows joined and streams the file', async () => {
    const { client } = await clientOf({ ...UNLIMITED, import_requests_per_minute: null });
    const { data: attributes } = await client.api.GET('/audience/sections/{section_discriminator}/attributes', {
      params: { path: { section_discriminator: S } },
    });
    const points = attributes!.items.find((a) => a.discriminator === 'com.vendor1.attributes.user-created.points')!
      .versions[1].id;
    const status = await client.importProfiles(
      S,
      {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'points', attribute_version_id: points }],
      },
      'email;points\r\nann@shop.test;150\r\nbo@shop.test;20\r\n',
      { intervalMs: 50 },
    );
    expect(status.result).toMatchObject({ status: 'completed', profiles_found: 2, profiles_processed: 2 });
    const file = await client.exportFile(
      '/audience/profiles/reports/segments',
      {
        section_discriminator: S,
        segment: { timezone: 'UTC', segment_discriminator: 'com.vendor1.segments.user-created.big-spenders' },
        attributes: [{ field_name: 'points', attribute_version_id: points }],
      },
      { intervalMs: 50 },
    );
    expect(file.status).toBe(200);
    const [header, ...rows] = (await file.text()).trim().split(/\r?\n/);
    expect(header.split(',')).toContain('points');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('150');
  });
});

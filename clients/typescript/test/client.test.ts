import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
// @audience/testing (clients/testing), from its source: this package is a workspace of its own.
import { startEmulator, type Emulator } from '../../testing/src/index.ts';
import { AudienceProblem, createAudienceClient, type AudienceClientOptions, type paths } from '../src/index.ts';

// The typed client against the emulator (docs/emulator.md), as an integrator's test suite would
// use both: the emulator's ready account, its clock moved forward, its jobs run, faults injected
// on its routes, and its request log to see what the client sent. Reset before each test.

let emulator: Emulator;
const V = 'com.acme1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;

beforeAll(async () => {
  emulator = await startEmulator({ vendor: 'acme', timeoutMs: 110_000 });
});
afterAll(async () => {
  await emulator?.stop();
});
beforeEach(async () => {
  await emulator.control.reset();
});

/**
 * A client of the ready account whose time is the emulator's: its clock moves when the emulator's
 * is moved through `advance`, and a wait before a retry or a poll moves the emulator's clock (its
 * due jobs then run) instead of passing. The waits are recorded.
 */
function client(options: Partial<AudienceClientOptions> = {}) {
  const waits: number[] = [];
  let now = Date.now();
  const advance = async (ms: number) => {
    now += ms;
    await emulator.control.clock.advance(ms / 1000);
  };
  const audience = createAudienceClient({
    baseUrl: emulator.baseUrl,
    clientId: emulator.account.clientId,
    clientSecret: emulator.account.clientSecret,
    now: () => now,
    sleep: async (ms) => {
      waits.push(ms);
      await advance(ms);
    },
    ...options,
  });
  return { audience, waits, advance };
}

/** The consent types the document lists for a consent request. */
type ConsentType = NonNullable<
  paths['/v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/consents']['post']['requestBody']
>['content']['application/json']['type'];

const tokenRequests = async () => (await emulator.control.requests.list({ path: '/oauth/token' })).length;

describe('the typed client', () => {
  it('AUTH-07 fetches one token for concurrent calls, keeps it, renews it before it expires, and again when the service refuses it', async () => {
    const { audience, advance } = client();
    await emulator.control.requests.clear();
    const [sections, keyspaces] = await Promise.all([
      audience.api.GET('/audience/sections'),
      audience.api.GET('/audience/keyspaces'),
    ]);
    expect(sections.data.items.map((s) => s.discriminator)).toContain(SHOP);
    expect(keyspaces.data.items.length).toBeGreaterThan(0);
    expect(await tokenRequests()).toBe(1);
    const sent = await emulator.control.requests.list({ path: '/audience/sections' });
    expect(sent[0].headers.authorization).toMatch(/^Bearer /);
    // Tokens live 24 hours: 30 seconds before the end, the next call fetches the next token first.
    const first = await audience.token();
    await advance((24 * 3600 - 30) * 1000);
    await audience.api.GET('/audience/sections');
    expect(await tokenRequests()).toBe(2);
    expect(await audience.token()).not.toBe(first);
    // A token the service refuses while the client holds it as valid (the service's time moved on
    // alone): the call is answered once the client has fetched another.
    await emulator.control.clock.advance(25 * 3600);
    expect((await audience.api.GET('/audience/sections')).response.status).toBe(200);
    expect(await tokenRequests()).toBe(3);
  });

  it('ERR-04 throws a problem document as an AudienceProblem with its code, status and detail', async () => {
    const { audience } = client();
    const refused = await audience.api
      .GET('/audience/segments/{segment_discriminator}', {
        params: { path: { segment_discriminator: `${V}.segments.user-created.nothing` } },
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AudienceProblem);
    expect(refused).toMatchObject({ code: 'AUD-1104', status: 404, title: 'Segment not found' });
    expect((refused as AudienceProblem).detail).toMatch(/nothing/);
    const stranger = createAudienceClient({ baseUrl: emulator.baseUrl, clientId: 'nobody', clientSecret: 'nothing' });
    await expect(stranger.api.GET('/audience/sections')).rejects.toMatchObject({ code: 'AUD-1009', status: 401 });
  });

  it("LIM-01 sends a 429 again after the service's Retry-After, and a 503 after its Retry-After or a backoff", async () => {
    const { audience, waits } = client();
    await audience.token();
    await emulator.control.limits.set({ requests_per_second: 1 });
    await emulator.control.requests.clear();
    for (let i = 0; i < 3; i++) expect((await audience.api.GET('/audience/sections')).response.status).toBe(200);
    // The second and third calls were refused once each, and sent again after the second the service asked for.
    expect((await emulator.control.requests.list({ path: '/audience/sections' })).map((r) => r.status)).toEqual([
      200, 429, 200, 429, 200,
    ]);
    expect(waits).toEqual([1000, 1000]);
    await emulator.control.limits.set({ requests_per_second: null });
    await emulator.control.faults.add({ path: '/audience/keyspaces', times: 1, status: 503, retry_after: 2 });
    await emulator.control.faults.add({ path: '/audience/keyspaces', times: 1, status: 503 });
    expect((await audience.api.GET('/audience/keyspaces')).response.status).toBe(200);
    expect(waits.slice(2)).toEqual([2000, 1000]);
  });

  it('gives up after its retries and throws the last problem', async () => {
    const { audience, waits } = client({ retries: 2 });
    await audience.token();
    await emulator.control.faults.add({ path: '/audience/sections', times: 3, status: 503, retry_after: 1 });
    await expect(audience.api.GET('/audience/sections')).rejects.toMatchObject({ status: 503 });
    expect(waits).toEqual([1000, 1000]);
  });

  it('sends a request again after a 502, a 504 or a dropped connection; as configured', async () => {
    const { audience, waits } = client();
    await audience.token();
    await emulator.control.faults.add({ path: '/audience/sections', status: 502 });
    await emulator.control.faults.add({ path: '/audience/sections', status: 504 });
    await emulator.control.faults.add({ path: '/audience/sections', drop: true });
    expect((await audience.api.GET('/audience/sections')).response.status).toBe(200);
    expect(waits).toEqual([500, 1000, 2000]);
    expect((await emulator.control.requests.list({ path: '/audience/sections' })).map((r) => r.status)).toEqual([
      502, 504, 0, 200,
    ]);
    // A POST whose connection dropped is not sent again by default: the service may have served it.
    await emulator.control.faults.add({ path: '/audience/sections/*/tags', method: 'POST', drop: true });
    await expect(
      audience.api.POST('/audience/sections/{section_discriminator}/tags', {
        params: { path: { section_discriminator: SHOP } },
        body: { name: 'Dropped once' },
      }),
    ).rejects.toThrow();
    const strict = client({ retryOn: { statuses: [503], dropped: 'none' } }).audience;
    await emulator.control.faults.add({ path: '/audience/sections', status: 502 });
    await expect(strict.api.GET('/audience/sections')).rejects.toMatchObject({ status: 502 });
  });

  it('uploads an import and waits for its report, then exports the segment its rows joined and streams the file', async () => {
    const { audience } = client();
    const { data: attributes } = await audience.api.GET('/audience/sections/{section_discriminator}/attributes', {
      params: { path: { section_discriminator: SHOP } },
    });
    const points = attributes!.items.find((a) => a.discriminator === `${V}.attributes.user-created.loyalty-points`)!
      .versions[1].id;
    const status = await audience.importProfiles(
      SHOP,
      {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'points', attribute_version_id: points }],
      },
      'email;points\r\nann@shop.test;150\r\nbo@shop.test;20\r\n',
      { intervalMs: 1000 },
    );
    expect(status.result).toMatchObject({ status: 'completed', profiles_found: 2, profiles_processed: 2 });
    const upload = await emulator.control.requests.list({ path: '/files/uploads' });
    expect(upload.map((r) => [r.status, r.headers.authorization])).toEqual([[204, undefined]]);
    const file = await audience.exportFile(
      '/audience/profiles/reports/segments',
      {
        section_discriminator: SHOP,
        segment: { timezone: 'UTC', segment_discriminator: `${V}.segments.user-created.loyal-customers` },
        attributes: [{ field_name: 'points', attribute_version_id: points }],
      },
      { intervalMs: 1000 },
    );
    expect(file.status).toBe(200);
    const [header, ...rows] = (await file.text()).trim().split(/\r?\n/);
    expect(header.split(',')).toContain('points');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('150');
    // A file is typed as bytes (the document's format binary): read as a Blob, or a stream, not as JSON.
    const { data: bytes } = await audience.api.GET('/v2/audience/profiles/reports/{report_id}', {
      params: { path: { report_id: new URL(file.url).pathname.split('/').pop()! } },
      parseAs: 'blob',
    });
    const blob: Blob = bytes;
    expect((await blob.text()).trim().split(/\r?\n/)[0]).toBe(header);
    // Without a parse option, the file is read as what it is (a Blob), never as JSON.
    const { data: unparsed, response } = await audience.api.GET('/v2/audience/profiles/reports/{report_id}', {
      params: { path: { report_id: new URL(file.url).pathname.split('/').pop()! } },
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(unparsed).toBeInstanceOf(Blob);
    const typed: Blob | undefined = unparsed; // undefined: the 202 of an export in progress
    expect((await typed!.text()).trim().split(/\r?\n/)[0]).toBe(header);
  });

  it('CONS-06 takes only the values the document lists: a misspelt consent type does not compile', async () => {
    const { audience } = client();
    const consent = (type: ConsentType) =>
      audience.api.POST(
        '/v2/audience/keyspaces/{keyspace_discriminator}/profiles/{profile_key}/sections/{section_discriminator}/consents',
        {
          params: {
            path: { keyspace_discriminator: EMAIL, profile_key: 'ann@shop.test', section_discriminator: SHOP },
          },
          body: {
            topic_discriminator: `${V}.topics.none`,
            channel_discriminator: `${V}.channels.email`,
            type,
            reason: 'Typed',
          },
        },
      );
    // @ts-expect-error `tsc` (npm test) fails here if a type that is no consent type compiles.
    const misspelt: ConsentType = 'opt-inn';
    // The service refuses it all the same, with its own code: AUD-1602.
    await expect(consent(misspelt)).rejects.toMatchObject({ code: 'AUD-1602', status: 400 });
  });

  it('IMP-05 waits by a poll hook that runs the emulator’s jobs instead of sleeping, and sees them queued first', async () => {
    await emulator.control.jobs.setMode('manual');
    const polled: string[][] = [];
    const poll = async () => {
      const { items } = await emulator.control.jobs.list();
      polled.push(items.filter((j) => j.state === 'waiting').map((j) => j.kind));
      await emulator.control.jobs.run();
    };
    const { audience, waits } = client({ poll });
    const { data: attributes } = await audience.api.GET('/audience/sections/{section_discriminator}/attributes', {
      params: { path: { section_discriminator: SHOP } },
    });
    const reader = attributes!.items.find((a) => a.discriminator.endsWith('.newsletter-reader'))!.versions[0].id;
    const status = await audience.importProfiles(
      SHOP,
      {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'reader', attribute_version_id: reader }],
      },
      'email,reader\ncy@shop.test,true\n',
    );
    expect(status.result.status).toBe('completed');
    const file = await audience.exportFile('/audience/profiles/reports/segments', {
      section_discriminator: SHOP,
      segment: { timezone: 'UTC', segment_discriminator: `${V}.segments.user-created.loyal-customers` },
      attributes: [{ field_name: 'reader', attribute_version_id: reader }],
    });
    expect(file.status).toBe(200);
    await file.body?.cancel();
    // One poll each found the job waiting; the hook ran it; nothing slept.
    expect(polled.map((kinds) => kinds.filter((k) => k === 'import' || k === 'export'))).toEqual([
      ['import'],
      ['export'],
    ]);
    expect(waits).toEqual([]);
  });
});

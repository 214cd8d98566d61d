import pg from 'pg';
import { afterAll, beforeAll, expect } from 'vitest';
import { TestServer, type Response, testDatabase } from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { createPool } from '../src/store/pool.ts';

// What the segment tests (src/segments/segments-*.test.ts) share: their server, a connection of
// its own to its database, the manifest every account applies (its segment queries refer to ids
// through the manifest placeholders, docs/manifest.md), and an account's requests.

export let server: TestServer;
export let db: pg.Pool;

/** Starts the test file's server and connection, before its tests. */
export function segmentsServer(): void {
  beforeAll(async () => {
    server = await TestServer.start();
    db = createPool(await testDatabase(), 2);
  });
  afterAll(async () => {
    await db?.end();
    await server?.close();
  });
}

export const SEC = 'com.vendor1.sections.user-created.store';
export const OTHER = 'com.vendor1.sections.user-created.other';
export const EMAIL = 'com.vendor1.keyspaces.email';
export const WEB = 'com.vendor1.keyspaces.web';
export const SPEND = 'com.vendor1.attributes.user-created.spend';
export const TIER = 'com.vendor1.attributes.user-created.tier';
export const PURCHASE = 'com.vendor1.events.user-created.purchase';
export const seg = (slug: string) => `com.vendor1.segments.user-created.${slug}`;

export const spend = 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.spend@1})';
export const tier = 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.tier@1})';
export const purchase = 'section({section}).event({event:com.vendor1.events.user-created.purchase@1})';

export const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Store',
      attributes: [
        { name: 'Spend', versions: [{ type: ['Number'] }] },
        { name: 'Tier', versions: [{ type: ['Text'] }] },
      ],
      events: [
        {
          name: 'Purchase',
          versions: [
            {
              type: [
                { name: 'sku', type: 'Text' },
                { name: 'amount', type: 'Number' },
              ],
            },
          ],
        },
      ],
    },
    { name: 'Other', attributes: [{ name: 'Score', versions: [{ type: ['Number'] }] }] },
  ],
  segments: [
    // Version 1 and a stricter version 2: the latest is the one used when no version is named.
    { name: 'Spenders', section: SEC, versions: [{ query: `${spend}.gt(100)` }, { query: `${spend}.gt(1000)` }] },
    { name: 'Gold', section: SEC, versions: [{ query: `${tier}.eq("Gold")` }] },
    { name: 'Gold spenders', section: SEC, versions: [{ query: `${tier}.eq("Gold") && ${spend}.gt(100)` }] },
    { name: 'Gold or spenders', section: SEC, versions: [{ query: `${tier}.eq("Gold") || ${spend}.gt(1000)` }] },
    {
      name: 'Silver or gold spenders',
      section: SEC,
      versions: [{ query: `(${tier}.eq("Silver") || ${tier}.eq("Gold")) && ${spend}.gt(100)` }],
    },
    { name: 'Buyers', section: SEC, versions: [{ query: purchase }] },
    { name: 'Recent buyers', section: SEC, versions: [{ query: `${purchase}.inLast("events.day", 0, 7)` }] },
    { name: 'Lapsed buyers', section: SEC, versions: [{ query: `${purchase}.inLast("events.day", 7, 30)` }] },
    {
      name: 'New year buyers',
      section: SEC,
      versions: [{ query: `${purchase}.betweenDates("events", "2026-01-01", "2026-01-01")` }],
    },
    { name: 'ABC buyers', section: SEC, versions: [{ query: `${purchase}.eventData("sku").eq("ABC")` }] },
    {
      name: 'High scorers',
      section: OTHER,
      versions: [
        { query: 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.score}).gt(10)' },
      ],
    },
  ],
};

/** Rate limits lifted, so that tests may count as often as they like. */
export const OPEN = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_export_requests_per_second: null,
  profile_key_operations_per_second: null,
};

export function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
}

/** An account of its own with MANIFEST applied, and helpers for its token. */
export async function account(limits: Record<string, number | null> = OPEN) {
  const credentials = await server.login(MANIFEST, limits);
  let token = credentials.token;
  const call = (
    method: string,
    path: string,
    options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ) => server.request(method, path, { token, ...options });
  const events = await call('GET', `/audience/sections/${SEC}/events`);
  const purchaseVersion: string = events.body.items.find((e: any) => e.discriminator === PURCHASE).versions[0].id;
  return {
    accountId: credentials.accountId,
    call,
    purchaseVersion,
    /** A new token, once the server clock has moved past the old one's life. */
    async renewToken() {
      token = await server.token(credentials);
    },
    async create(keyspace: string, key: string, section = SEC) {
      const r = await call('POST', `/audience/keyspaces/${keyspace}/sections/${section}/profiles`, {
        body: { profile_key: key },
      });
      expect(r.status, r.text).toBe(201);
    },
    async set(keyspace: string, key: string, values: Record<string, unknown>) {
      expectNoContent(
        await call(
          'PATCH',
          `/v2/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/sections/${SEC}/attributes`,
          { body: values },
        ),
      );
    },
    async buy(keyspace: string, key: string, eventTime: number | string, sku = 'X-1') {
      const event_time = typeof eventTime === 'number' ? new Date(eventTime).toISOString() : eventTime;
      expectNoContent(
        await call(
          'POST',
          `/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/sections/${SEC}/events`,
          {
            body: { items: [{ event_time, version_id: purchaseVersion, data: { sku, amount: 10 } }] },
          },
        ),
      );
    },
    async merge(a: [string, string], b: [string, string]) {
      expectNoContent(
        await call('PUT', '/audience/profiles/merges', {
          body: {
            profiles: [
              { keyspace_discriminator: a[0], profile_key: a[1] },
              { keyspace_discriminator: b[0], profile_key: b[1] },
            ],
          },
        }),
      );
    },
    evaluate(keyspace: string, key: string, body: unknown) {
      return call('POST', `/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/evaluations`, { body });
    },
    /** The evaluation's answer map, asserting 200. */
    async matches(
      keyspace: string,
      key: string,
      segments: { discriminator: string; version_id?: string }[],
      timeZone = 'UTC',
    ): Promise<Record<string, boolean>> {
      const r = await call('POST', `/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/evaluations`, {
        body: { segments, time_zone: timeZone },
      });
      expect(r.status, r.text).toBe(200);
      expect(Object.keys(r.body)).toEqual(['matches']);
      return r.body.matches.segments;
    },
    count(body: unknown) {
      return call('POST', '/audience/profiles/reports/segments/count', { body });
    },
    /** The count's profile_count, asserting 200. */
    async counted(segment: Record<string, unknown>, knownProfiles?: boolean | null): Promise<number> {
      const body: Record<string, unknown> = { section_discriminator: SEC, segment: { timezone: 'UTC', ...segment } };
      if (knownProfiles !== undefined) body.known_profiles = knownProfiles;
      const r = await call('POST', '/audience/profiles/reports/segments/count', { body });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toEqual({ profile_count: expect.any(Number) });
      expect(Number.isInteger(r.body.profile_count)).toBe(true);
      return r.body.profile_count;
    },
    trend(segment: string, body: unknown, section = SEC) {
      return call('POST', `/audience/sections/${section}/segments/${segment}/trend`, { body });
    },
    async versions(segment: string): Promise<{ id: string; query: string }[]> {
      const r = await call('GET', `/audience/segments/${segment}`);
      expect(r.status, r.text).toBe(200);
      return r.body.versions;
    },
  };
}

export const iso = (ms: number) => new Date(ms).toISOString();
export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

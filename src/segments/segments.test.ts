/**
 * Segment evaluation, trends and counts through real HTTP against a real database (SPEC §4.3,
 * §4.7; CHECKLIST "Segments and AQL"). Every account applies MANIFEST below, whose segment
 * queries refer to ids through the manifest placeholders (docs/manifest.md).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer, type Response, expectProblem, testDatabase } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';

let server: TestServer;
let db: pg.Pool;
beforeAll(async () => {
  server = await TestServer.start();
  db = new pg.Pool({ connectionString: await testDatabase(), max: 2 });
});
afterAll(async () => {
  await db?.end();
  await server?.close();
});

const SEC = 'com.vendor1.sections.user-created.store';
const OTHER = 'com.vendor1.sections.user-created.other';
const EMAIL = 'com.vendor1.keyspaces.email';
const WEB = 'com.vendor1.keyspaces.web';
const SPEND = 'com.vendor1.attributes.user-created.spend';
const TIER = 'com.vendor1.attributes.user-created.tier';
const PURCHASE = 'com.vendor1.events.user-created.purchase';
const seg = (slug: string) => `com.vendor1.segments.user-created.${slug}`;

const spend = 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.spend@1})';
const tier = 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.tier@1})';
const purchase = 'section({section}).event({event:com.vendor1.events.user-created.purchase@1})';

const MANIFEST: Manifest = {
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
const OPEN = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_export_requests_per_second: null,
  profile_key_operations_per_second: null,
};

function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
}

/** An account of its own with MANIFEST applied, and helpers for its token. */
async function account(limits: Record<string, number | null> = OPEN) {
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

const iso = (ms: number) => new Date(ms).toISOString();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe('evaluate a profile against segments', () => {
  it('AQL-01, AQL-02, AQL-03: answers {matches:{segments}} keyed by discriminator (latest version) or discriminator|version_id', async () => {
    const a = await account();
    const [v1, v2] = await a.versions(seg('spenders'));
    expect(v2).toBeDefined();
    await a.create(EMAIL, 'ann@x.io');
    await a.set(EMAIL, 'ann@x.io', { [SPEND]: 500 });
    const ask = [
      { discriminator: seg('spenders') },
      { discriminator: seg('spenders'), version_id: v1.id },
      { discriminator: seg('spenders'), version_id: v2.id },
    ];
    const r = await a.evaluate(EMAIL, 'ann@x.io', { segments: ask, time_zone: 'Europe/Oslo' });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    // 500 passes version 1 (> 100) but not version 2 (> 1000), the latest.
    expect(r.body).toEqual({
      matches: {
        segments: {
          [seg('spenders')]: false,
          [`${seg('spenders')}|${v1.id}`]: true,
          [`${seg('spenders')}|${v2.id}`]: false,
        },
      },
    });
    await a.set(EMAIL, 'ann@x.io', { [SPEND]: 5000 });
    expect(await a.matches(EMAIL, 'ann@x.io', ask)).toEqual({
      [seg('spenders')]: true,
      [`${seg('spenders')}|${v1.id}`]: true,
      [`${seg('spenders')}|${v2.id}`]: true,
    });
    // Several segments at once, each under its own key.
    expect(
      await a.matches(EMAIL, 'ann@x.io', [{ discriminator: seg('gold') }, { discriminator: seg('spenders') }]),
    ).toEqual({ [seg('gold')]: false, [seg('spenders')]: true });
  });

  it('AQL-01, AQL-02: accepts a form-urlencoded body with bracket keys', async () => {
    const a = await account();
    const [v1] = await a.versions(seg('spenders'));
    await a.create(EMAIL, 'bo@x.io');
    await a.set(EMAIL, 'bo@x.io', { [SPEND]: 500 });
    const form = new URLSearchParams([
      ['segments[0][discriminator]', seg('spenders')],
      ['segments[1][discriminator]', seg('spenders')],
      ['segments[1][version_id]', v1.id],
      ['time_zone', 'Europe/Oslo'],
    ]).toString();
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    let r = await a.call('POST', `/audience/keyspaces/${EMAIL}/profiles/bo%40x.io/evaluations`, { raw: form, headers });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({
      matches: { segments: { [seg('spenders')]: false, [`${seg('spenders')}|${v1.id}`]: true } },
    });
    // The same form without its time zone is refused like the JSON body (AQL-04).
    r = await a.call('POST', `/audience/keyspaces/${EMAIL}/profiles/bo%40x.io/evaluations`, {
      raw: `segments[0][discriminator]=${encodeURIComponent(seg('spenders'))}`,
      headers,
    });
    expectProblem(r, 400);
  });

  it('AQL-04: segments missing or empty, or time_zone missing → 400', async () => {
    const a = await account();
    await a.create(EMAIL, 'cy@x.io');
    expectProblem(await a.evaluate(EMAIL, 'cy@x.io', { time_zone: 'UTC' }), 400);
    expectProblem(await a.evaluate(EMAIL, 'cy@x.io', { segments: [], time_zone: 'UTC' }), 400);
    expectProblem(await a.evaluate(EMAIL, 'cy@x.io', { segments: [{ discriminator: seg('gold') }] }), 400);
    // A segment entry without its discriminator.
    expectProblem(await a.evaluate(EMAIL, 'cy@x.io', { segments: [{ version_id: '1' }], time_zone: 'UTC' }), 400);
  });

  it('AQL-05: an unrecognised time zone → 400', async () => {
    const a = await account();
    await a.create(EMAIL, 'di@x.io');
    for (const time_zone of ['Mars/Olympus_Mons', 'not a zone', '']) {
      expectProblem(await a.evaluate(EMAIL, 'di@x.io', { segments: [{ discriminator: seg('gold') }], time_zone }), 400);
    }
    const r = await a.evaluate(EMAIL, 'di@x.io', {
      segments: [{ discriminator: seg('gold') }],
      time_zone: 'Mars/Olympus_Mons',
    });
    expect(r.body.detail).toContain('Mars/Olympus_Mons');
  });

  it('AQL-06: a version_id of another segment → 400; an unknown segment → 400', async () => {
    const a = await account();
    await a.create(EMAIL, 'ed@x.io');
    const [goldVersion] = await a.versions(seg('gold'));
    expectProblem(
      await a.evaluate(EMAIL, 'ed@x.io', {
        segments: [{ discriminator: seg('spenders'), version_id: goldVersion.id }],
        time_zone: 'UTC',
      }),
      400,
      'AUD-1713',
    );
    expectProblem(
      await a.evaluate(EMAIL, 'ed@x.io', {
        segments: [{ discriminator: seg('spenders'), version_id: '999999999' }],
        time_zone: 'UTC',
      }),
      400,
    );
    expectProblem(
      await a.evaluate(EMAIL, 'ed@x.io', { segments: [{ discriminator: seg('no-such-segment') }], time_zone: 'UTC' }),
      400,
      'AUD-1711',
    );
    // One bad entry spoils the request, even beside a good one.
    expectProblem(
      await a.evaluate(EMAIL, 'ed@x.io', {
        segments: [
          { discriminator: seg('gold') },
          { discriminator: seg('gold'), version_id: (await a.versions(seg('spenders')))[0].id },
        ],
        time_zone: 'UTC',
      }),
      400,
      'AUD-1713',
    );
  });

  it('AQL-07: evaluating an unknown profile → 404', async () => {
    const a = await account();
    expectProblem(
      await a.evaluate(EMAIL, 'nobody@x.io', { segments: [{ discriminator: seg('gold') }], time_zone: 'UTC' }),
      404,
      'AUD-1201',
    );
    expectProblem(
      await a.evaluate(WEB, 'no-cookie', { segments: [{ discriminator: seg('gold') }], time_zone: 'UTC' }),
      404,
      'AUD-1201',
    );
  });

  it("AQL-01, AQL-07: a merged profile is evaluated with its cluster (values, every member's events) by any key; a locked one → 410", async () => {
    const a = await account();
    await a.create(EMAIL, 'cluster@x.io');
    await a.create(WEB, 'cookie-cluster');
    // The purchase reaches the web member before the merge, the value the email member after it.
    await a.buy(WEB, 'cookie-cluster', Date.now() - HOUR, 'ABC');
    await a.merge([EMAIL, 'cluster@x.io'], [WEB, 'cookie-cluster']);
    await a.set(EMAIL, 'cluster@x.io', { [SPEND]: 5000, [TIER]: 'Gold' });
    const ask = [
      { discriminator: seg('abc-buyers') },
      { discriminator: seg('gold-spenders') },
      { discriminator: seg('lapsed-buyers') },
    ];
    const expected = { [seg('abc-buyers')]: true, [seg('gold-spenders')]: true, [seg('lapsed-buyers')]: false };
    expect(await a.matches(EMAIL, 'cluster@x.io', ask)).toEqual(expected);
    expect(await a.matches(WEB, 'cookie-cluster', ask)).toEqual(expected);
    expectNoContent(await a.call('PUT', `/audience/keyspaces/${EMAIL}/profiles/cluster%40x.io/locks`));
    expectProblem(await a.evaluate(WEB, 'cookie-cluster', { segments: ask, time_zone: 'UTC' }), 410, 'AUD-1202');
  });

  it('AQL-19: terms combine with && and || (and parentheses), in evaluation and count alike', async () => {
    const a = await account();
    const people: [string, string, number][] = [
      ['gold-rich@x.io', 'Gold', 5000],
      ['gold-mid@x.io', 'Gold', 500],
      ['gold-poor@x.io', 'Gold', 5],
      ['silver-rich@x.io', 'Silver', 5000],
      ['silver-mid@x.io', 'Silver', 500],
      ['bronze-mid@x.io', 'Bronze', 500],
      ['silver-poor@x.io', 'Silver', 5],
    ];
    for (const [key, t, s] of people) {
      await a.create(EMAIL, key);
      await a.set(EMAIL, key, { [TIER]: t, [SPEND]: s });
    }
    const ask = ['gold-spenders', 'gold-or-spenders', 'silver-or-gold-spenders'].map((s) => ({
      discriminator: seg(s),
    }));
    const expected: Record<string, [boolean, boolean, boolean]> = {
      'gold-rich@x.io': [true, true, true],
      'gold-mid@x.io': [true, true, true],
      'gold-poor@x.io': [false, true, false],
      'silver-rich@x.io': [false, true, true],
      'silver-mid@x.io': [false, false, true],
      'bronze-mid@x.io': [false, false, false],
      'silver-poor@x.io': [false, false, false],
    };
    for (const [key, [and, or, nested]] of Object.entries(expected)) {
      expect(await a.matches(EMAIL, key, ask), key).toEqual({
        [seg('gold-spenders')]: and,
        [seg('gold-or-spenders')]: or,
        [seg('silver-or-gold-spenders')]: nested,
      });
    }
    expect(await a.counted({ segment_discriminator: seg('gold-spenders') })).toBe(2);
    expect(await a.counted({ segment_discriminator: seg('gold-or-spenders') })).toBe(4);
    expect(await a.counted({ segment_discriminator: seg('silver-or-gold-spenders') })).toBe(4);
  });

  it('AQL-24: text conditions are case-sensitive (attributes and event data; evaluation and count)', async () => {
    const a = await account();
    for (const [key, t, sku] of [
      ['g1@x.io', 'Gold', 'ABC'],
      ['g2@x.io', 'gold', 'abc'],
      ['g3@x.io', 'GOLD', 'Abc'],
      ['g4@x.io', ' Gold', 'ABC '],
    ]) {
      await a.create(EMAIL, key);
      await a.set(EMAIL, key, { [TIER]: t });
      await a.buy(EMAIL, key, server.clock.now - HOUR, sku);
    }
    const ask = [{ discriminator: seg('gold') }, { discriminator: seg('abc-buyers') }];
    expect(await a.matches(EMAIL, 'g1@x.io', ask)).toEqual({ [seg('gold')]: true, [seg('abc-buyers')]: true });
    for (const key of ['g2@x.io', 'g3@x.io', 'g4@x.io']) {
      expect(await a.matches(EMAIL, key, ask), key).toEqual({ [seg('gold')]: false, [seg('abc-buyers')]: false });
    }
    expect(await a.counted({ segment_discriminator: seg('gold') })).toBe(1);
    expect(await a.counted({ segment_discriminator: seg('abc-buyers') })).toBe(1);
    // The same through an inline definition with the lower-case constant: only the lower-case value.
    const [gold] = await a.versions(seg('gold'));
    expect(await a.counted({ segment_definition: gold.query.replace('"Gold"', '"gold"') })).toBe(1);
    // And the trend agrees.
    const point = iso(server.clock.now + MINUTE);
    const r = await a.trend(seg('gold'), { sampling_points: [point], timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ matching_profile_count: { [point]: { known: 1, unknown: 0 } } });
  });

  it("AQL-17: inLast windows count back from the server clock's now", async () => {
    const a = await account();
    await a.create(EMAIL, 'fresh@x.io');
    await a.buy(EMAIL, 'fresh@x.io', server.clock.now - 2 * DAY);
    await a.create(EMAIL, 'stale@x.io');
    await a.buy(EMAIL, 'stale@x.io', server.clock.now - 10 * DAY);
    await a.create(EMAIL, 'ancient@x.io');
    await a.buy(EMAIL, 'ancient@x.io', server.clock.now - 40 * DAY);
    await a.create(EMAIL, 'never@x.io');
    const ask = ['buyers', 'recent-buyers', 'lapsed-buyers'].map((s) => ({ discriminator: seg(s) }));
    const result = (buyers: boolean, recent: boolean, lapsed: boolean) => ({
      [seg('buyers')]: buyers,
      [seg('recent-buyers')]: recent,
      [seg('lapsed-buyers')]: lapsed,
    });
    expect(await a.matches(EMAIL, 'fresh@x.io', ask)).toEqual(result(true, true, false));
    expect(await a.matches(EMAIL, 'stale@x.io', ask)).toEqual(result(true, false, true));
    expect(await a.matches(EMAIL, 'ancient@x.io', ask)).toEqual(result(true, false, false));
    expect(await a.matches(EMAIL, 'never@x.io', ask)).toEqual(result(false, false, false));
    expect(await a.counted({ segment_discriminator: seg('recent-buyers') })).toBe(1);
    expect(await a.counted({ segment_discriminator: seg('lapsed-buyers') })).toBe(1);
    expect(await a.counted({ segment_discriminator: seg('buyers') })).toBe(3);

    // Six days on, the fresh purchase is eight days old: lapsed, no longer recent.
    server.clock.advance(6 * DAY);
    await a.renewToken();
    expect(await a.matches(EMAIL, 'fresh@x.io', ask)).toEqual(result(true, false, true));
    expect(await a.matches(EMAIL, 'stale@x.io', ask)).toEqual(result(true, false, true));
    expect(await a.counted({ segment_discriminator: seg('recent-buyers') })).toBe(0);
    expect(await a.counted({ segment_discriminator: seg('lapsed-buyers') })).toBe(2);
    // A purchase made now is recent again.
    await a.buy(EMAIL, 'never@x.io', server.clock.now - MINUTE);
    expect(await a.matches(EMAIL, 'never@x.io', ask)).toEqual(result(true, true, false));
  });

  it("AQL-18: betweenDates takes whole days in the request's time zone, around midnight", async () => {
    const a = await account();
    // 23:30 UTC on New Year's Eve is 00:30 on New Year's Day in Oslo (UTC+1).
    await a.create(EMAIL, 'eve@x.io');
    await a.buy(EMAIL, 'eve@x.io', '2025-12-31T23:30:00Z');
    // Midday on New Year's Day is that day everywhere near.
    await a.create(EMAIL, 'noon@x.io');
    await a.buy(EMAIL, 'noon@x.io', '2026-01-01T12:00:00Z');
    // 23:30 UTC on New Year's Day is already January 2nd in Oslo.
    await a.create(EMAIL, 'late@x.io');
    await a.buy(EMAIL, 'late@x.io', '2026-01-01T23:30:00Z');
    await a.create(EMAIL, 'later@x.io');
    await a.buy(EMAIL, 'later@x.io', '2026-01-01T23:45:00Z');
    // 04:30 UTC on New Year's Day is still New Year's Eve in New York (UTC-5).
    await a.create(EMAIL, 'ny@x.io');
    await a.buy(EMAIL, 'ny@x.io', '2026-01-01T04:30:00Z');
    const nyb = [{ discriminator: seg('new-year-buyers') }];
    const is = (v: boolean) => ({ [seg('new-year-buyers')]: v });
    expect(await a.matches(EMAIL, 'eve@x.io', nyb, 'UTC')).toEqual(is(false));
    expect(await a.matches(EMAIL, 'eve@x.io', nyb, 'Europe/Oslo')).toEqual(is(true));
    expect(await a.matches(EMAIL, 'noon@x.io', nyb, 'UTC')).toEqual(is(true));
    expect(await a.matches(EMAIL, 'noon@x.io', nyb, 'Europe/Oslo')).toEqual(is(true));
    expect(await a.matches(EMAIL, 'late@x.io', nyb, 'UTC')).toEqual(is(true));
    expect(await a.matches(EMAIL, 'late@x.io', nyb, 'Europe/Oslo')).toEqual(is(false));
    expect(await a.matches(EMAIL, 'ny@x.io', nyb, 'UTC')).toEqual(is(true));
    expect(await a.matches(EMAIL, 'ny@x.io', nyb, 'America/New_York')).toEqual(is(false));
    // The count applies the same days: UTC has noon, late, later and ny; Oslo has eve, noon and ny.
    expect(await a.counted({ segment_discriminator: seg('new-year-buyers'), timezone: 'UTC' })).toBe(4);
    expect(await a.counted({ segment_discriminator: seg('new-year-buyers'), timezone: 'Europe/Oslo' })).toBe(3);
    // And so does the trend.
    const point = iso(server.clock.now + MINUTE);
    for (const [timezone, n] of [
      ['UTC', 4],
      ['Europe/Oslo', 3],
    ] as const) {
      const r = await a.trend(seg('new-year-buyers'), { sampling_points: [point], timezone });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toEqual({ matching_profile_count: { [point]: { known: n, unknown: 0 } } });
    }
  });
});

describe('profile in segment count', () => {
  it('AQL-11 reading: known_profiles true counts known, false unknown (web only), null or absent all; the export key does not make a profile known', async () => {
    const a = await account();
    await a.create(EMAIL, 'known@x.io');
    await a.set(EMAIL, 'known@x.io', { [SPEND]: 5000 });
    // Only in the web keyspace (and the export keyspace, which every profile has): unknown.
    await a.create(WEB, 'cookie-unknown');
    await a.set(WEB, 'cookie-unknown', { [SPEND]: 5000 });
    // A web visitor merged with a known profile is known.
    await a.create(EMAIL, 'merged@x.io');
    await a.create(WEB, 'cookie-merged');
    await a.merge([EMAIL, 'merged@x.io'], [WEB, 'cookie-merged']);
    await a.set(WEB, 'cookie-merged', { [SPEND]: 5000 });
    // Known and unknown profiles outside the segment.
    await a.create(EMAIL, 'poor@x.io');
    await a.set(EMAIL, 'poor@x.io', { [SPEND]: 5 });
    await a.create(WEB, 'cookie-poor');
    await a.set(WEB, 'cookie-poor', { [SPEND]: 5 });
    const spenders = { segment_discriminator: seg('spenders') };
    expect(await a.counted(spenders, true)).toBe(2);
    expect(await a.counted(spenders, false)).toBe(1);
    expect(await a.counted(spenders, null)).toBe(3);
    expect(await a.counted(spenders)).toBe(3);
    // The unknown visitor becomes known once merged with a known profile.
    await a.merge([WEB, 'cookie-unknown'], [EMAIL, 'late@x.io']);
    expect(await a.counted(spenders, true)).toBe(3);
    expect(await a.counted(spenders, false)).toBe(0);
    expect(await a.counted(spenders, null)).toBe(3);
  });

  it('EXP-23: counts by stored discriminator (latest version) or by inline segment_definition, answering 200 {profile_count} at once', async () => {
    const a = await account();
    for (const [key, t, s] of [
      ['a@x.io', 'Gold', 5000],
      ['b@x.io', 'Gold', 500],
      ['c@x.io', 'Silver', 500],
      ['d@x.io', 'Silver', 5],
    ] as const) {
      await a.create(EMAIL, key);
      await a.set(EMAIL, key, { [TIER]: t, [SPEND]: s });
    }
    const [v1, v2] = await a.versions(seg('spenders'));
    // The discriminator means the latest version (> 1000).
    expect(await a.counted({ segment_discriminator: seg('spenders') })).toBe(1);
    expect(await a.counted({ segment_definition: v2.query })).toBe(1);
    expect(await a.counted({ segment_definition: v1.query })).toBe(3);
    // A definition of the caller's own, built from the ids the API lists.
    const sections = await a.call('GET', '/audience/sections');
    const sectionId = sections.body.items.find((s: any) => s.discriminator === SEC).id;
    const attributes = await a.call('GET', `/audience/sections/${SEC}/attributes`);
    const idOf = (d: string) => attributes.body.items.find((x: any) => x.discriminator === d).versions[0].id;
    const definition = `section(${sectionId}).attribute(${idOf(SPEND)}).gte(500) && section(${sectionId}).attribute(${idOf(TIER)}).neq("Gold")`;
    expect(await a.counted({ segment_definition: definition })).toBe(1);
    expect(await a.counted({ segment_definition: definition }, true)).toBe(1);
    expect(await a.counted({ segment_definition: definition }, false)).toBe(0);
  });

  it('AQL-25: an inline segment_definition is validated on arrival: 400 with the AQL error', async () => {
    const a = await account();
    const sections = await a.call('GET', '/audience/sections');
    const sectionId = sections.body.items.find((s: any) => s.discriminator === SEC).id;
    const cases: [string, string][] = [
      ['section(1).attribute("x").eq(1)', 'AUD-1703'],
      ['section("store").attribute(1).eq(1)', 'AUD-1702'],
      [`section(${sectionId}).attribute(1).eq("Gold`, 'AUD-1701'],
      [`section(${sectionId}).attribute(`, 'AUD-1703'],
      ['', 'AUD-1701'],
      [`section(${sectionId}).attribute(999999999).eq(1)`, 'AUD-1111'],
      ['section(999999999).attribute(1).eq(1)', 'AUD-1111'],
      [`section(${sectionId}).event(1).inLast("events.year", 0, 1)`, 'AUD-1707'],
    ];
    for (const [definition, code] of cases) {
      const r = await a.count({
        section_discriminator: SEC,
        segment: { timezone: 'UTC', segment_definition: definition },
      });
      expectProblem(r, 400, code);
      expect(r.body.detail, definition).toMatch(/AQL/);
    }
    // The detail says where the fault is.
    const r = await a.count({
      section_discriminator: SEC,
      segment: { timezone: 'UTC', segment_definition: 'section(1).attribute("x").eq(1)' },
    });
    expect(r.body.detail).toMatch(/line 1, column 22/);
  });

  it('unknown section → 404; neither or both of segment_discriminator and segment_definition → 400; unknown segment → 400', async () => {
    const a = await account();
    const [v2] = (await a.versions(seg('spenders'))).slice(-1);
    expectProblem(
      await a.count({
        section_discriminator: 'com.vendor1.sections.user-created.nope',
        segment: { timezone: 'UTC', segment_discriminator: seg('spenders') },
      }),
      404,
    );
    expectProblem(await a.count({ section_discriminator: SEC, segment: { timezone: 'UTC' } }), 400);
    expectProblem(
      await a.count({
        section_discriminator: SEC,
        segment: { timezone: 'UTC', segment_discriminator: seg('spenders'), segment_definition: v2.query },
      }),
      400,
    );
    expectProblem(
      await a.count({
        section_discriminator: SEC,
        segment: { timezone: 'UTC', segment_discriminator: seg('no-such') },
      }),
      400,
    );
    expectProblem(await a.count({ section_discriminator: SEC }), 400);
    expectProblem(await a.count({ segment: { timezone: 'UTC', segment_discriminator: seg('spenders') } }), 400);
    expectProblem(
      await a.count({
        section_discriminator: SEC,
        segment: { timezone: 'UTC', segment_discriminator: seg('spenders') },
        known_profiles: 'yes',
      }),
      400,
    );
  });

  it('AQL-05: an unrecognised or missing time zone → 400', async () => {
    const a = await account();
    const r = await a.count({
      section_discriminator: SEC,
      segment: { timezone: 'Atlantis/Capital', segment_discriminator: seg('spenders') },
    });
    expectProblem(r, 400, 'AUD-1712');
    expect(r.body.detail).toContain('Atlantis/Capital');
    expectProblem(
      await a.count({ section_discriminator: SEC, segment: { segment_discriminator: seg('spenders') } }),
      400,
    );
    expectProblem(
      await a.count({
        section_discriminator: SEC,
        segment: { time_zone: 'UTC', segment_discriminator: seg('spenders') },
      }),
      400,
    );
  });

  it('LIM-04: a second count within the same second → 429 with the default limits', async () => {
    const a = await account({});
    await a.create(EMAIL, 'rich@x.io');
    await a.set(EMAIL, 'rich@x.io', { [SPEND]: 5000 });
    const body = { section_discriminator: SEC, segment: { timezone: 'UTC', segment_discriminator: seg('spenders') } };
    let r = await a.count(body);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ profile_count: 1 });
    r = await a.count(body);
    expectProblem(r, 429, 'AUD-1002');
    expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
    // A second later there is room again.
    server.clock.advance(1000);
    r = await a.count(body);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ profile_count: 1 });
  });
});

describe('count matching profiles over time', () => {
  /**
   * A buyer created at t0 who buys ten minutes later (bought), and ten minutes after that an
   * unknown profile (created) with a purchase dated a day before t0, before it existed.
   */
  async function buyerAndLateCookie(
    a: Awaited<ReturnType<typeof account>>,
  ): Promise<{ t0: number; bought: number; created: number }> {
    const t0 = server.clock.now;
    await a.create(EMAIL, 'buyer@x.io');
    server.clock.advance(10 * MINUTE);
    const bought = server.clock.now;
    await a.buy(EMAIL, 'buyer@x.io', bought);
    server.clock.advance(10 * MINUTE);
    const created = server.clock.now;
    await a.create(WEB, 'cookie-late');
    await a.buy(WEB, 'cookie-late', t0 - DAY);
    server.clock.advance(10 * MINUTE);
    return { t0, bought, created };
  }

  it('AQL-08, AQL-11: each point counts known and unknown profiles as their attributes were then, by the latest segment version', async () => {
    const a = await account();
    const t0 = server.clock.now;
    await a.create(EMAIL, 'known@x.io');
    await a.create(WEB, 'cookie-1');
    await a.set(EMAIL, 'known@x.io', { [SPEND]: 50 });
    await a.set(WEB, 'cookie-1', { [SPEND]: 50 });
    server.clock.advance(10 * MINUTE);
    const t1 = server.clock.now;
    // 500 passes version 1 of the segment, not version 2 (> 1000), the one the trend uses.
    await a.set(EMAIL, 'known@x.io', { [SPEND]: 500 });
    await a.set(WEB, 'cookie-1', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    const t2 = server.clock.now;
    await a.set(EMAIL, 'known@x.io', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    const t3 = server.clock.now;
    await a.set(WEB, 'cookie-1', { [SPEND]: 5 });
    server.clock.advance(10 * MINUTE);
    const points = [t0 - HOUR, t0 + MINUTE, t1 + MINUTE, t2 + MINUTE, t3 + MINUTE, server.clock.now].map(iso);
    const r = await a.trend(seg('spenders'), { sampling_points: points, timezone: 'Europe/Oslo' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({
      matching_profile_count: {
        [points[0]]: { known: 0, unknown: 0 },
        [points[1]]: { known: 0, unknown: 0 },
        [points[2]]: { known: 0, unknown: 1 },
        [points[3]]: { known: 1, unknown: 1 },
        [points[4]]: { known: 1, unknown: 0 },
        [points[5]]: { known: 1, unknown: 0 },
      },
    });
    for (const c of Object.values(r.body.matching_profile_count) as { known: number; unknown: number }[]) {
      expect(Number.isInteger(c.known) && Number.isInteger(c.unknown)).toBe(true);
    }
    // The count now agrees with the last point.
    expect(await a.counted({ segment_discriminator: seg('spenders') }, true)).toBe(1);
    expect(await a.counted({ segment_discriminator: seg('spenders') }, false)).toBe(0);
  });

  it("AQL-08: a merged cluster is one profile of the trend (clusters as they are now), known through any member, with every member's history and events", async () => {
    const a = await account();
    const t0 = server.clock.now;
    // A web visitor buys and spends before it is merged with a known profile; an unknown visitor spends too.
    await a.create(WEB, 'cookie-trend');
    await a.buy(WEB, 'cookie-trend', t0);
    await a.set(WEB, 'cookie-trend', { [SPEND]: 5000 });
    await a.create(WEB, 'cookie-alone');
    await a.set(WEB, 'cookie-alone', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    const t1 = server.clock.now;
    await a.create(EMAIL, 'trend@x.io');
    await a.merge([EMAIL, 'trend@x.io'], [WEB, 'cookie-trend']);
    server.clock.advance(10 * MINUTE);
    const points = [t0 - HOUR, t1 - MINUTE, server.clock.now].map(iso);
    const trend = async (s: string) => {
      const r = await a.trend(seg(s), { sampling_points: points, timezone: 'UTC' });
      expect(r.status, r.text).toBe(200);
      return r.body.matching_profile_count;
    };
    // The cluster counts once and known (docs/aql.md: clusters as they are now) from its first
    // member's creation, with the value and the purchase its web member had before the merge.
    const expected = {
      [points[0]]: { known: 0, unknown: 0 },
      [points[1]]: { known: 1, unknown: 1 },
      [points[2]]: { known: 1, unknown: 1 },
    };
    expect(await trend('spenders')).toEqual(expected);
    expect(await trend('buyers')).toEqual({
      ...expected,
      [points[1]]: { known: 1, unknown: 0 },
      [points[2]]: { known: 1, unknown: 0 },
    });
  });

  it('AQL-08: points before a profile existed count 0; events count only up to each point, windows back from it', async () => {
    const a = await account();
    const { bought, created } = await buyerAndLateCookie(a);

    const before = iso(bought - MINUTE);
    const after = iso(bought + MINUTE);
    const both = iso(created + MINUTE);
    const weekOn = iso(bought + 8 * DAY);
    const trend = async (s: string) => {
      const r = await a.trend(seg(s), { sampling_points: [before, after, both, weekOn], timezone: 'UTC' });
      expect(r.status, r.text).toBe(200);
      return r.body.matching_profile_count;
    };
    // Seven days back from each point: the late cookie's event (a day before t0) is in the window
    // of the "after" point, but the cookie did not exist yet; it counts at the "both" point, and
    // not a week on, when the buyer's event has fallen out of the window too.
    expect(await trend('recent-buyers')).toEqual({
      [before]: { known: 0, unknown: 0 },
      [after]: { known: 1, unknown: 0 },
      [both]: { known: 1, unknown: 1 },
      [weekOn]: { known: 0, unknown: 0 },
    });
    expect(await trend('lapsed-buyers')).toEqual({
      [before]: { known: 0, unknown: 0 },
      [after]: { known: 0, unknown: 0 },
      [both]: { known: 0, unknown: 0 },
      [weekOn]: { known: 1, unknown: 1 },
    });
  });

  it("AQL-08: an event term without a time window counts every event up to the point, from the profile's creation on", async () => {
    const a = await account();
    const { t0, bought, created } = await buyerAndLateCookie(a);
    const points = [t0 - HOUR, bought - MINUTE, bought + MINUTE, created + MINUTE, bought + 400 * DAY].map(iso);
    const r = await a.trend(seg('buyers'), { sampling_points: points, timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({
      matching_profile_count: {
        [points[0]]: { known: 0, unknown: 0 },
        [points[1]]: { known: 0, unknown: 0 },
        [points[2]]: { known: 1, unknown: 0 },
        [points[3]]: { known: 1, unknown: 1 },
        [points[4]]: { known: 1, unknown: 1 },
      },
    });
  });

  it('AQL-09: sampling_points required, 1 to 25 date-times; empty or not date-times → 400, 26 → 413', async () => {
    const a = await account();
    const start = Date.parse('2026-01-01T00:00:00Z');
    const points = (n: number) => Array.from({ length: n }, (_, i) => iso(start + i * HOUR));
    let r = await a.trend(seg('spenders'), { sampling_points: points(25), timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
    expect(Object.keys(r.body.matching_profile_count)).toEqual(points(25));
    r = await a.trend(seg('spenders'), { sampling_points: points(1), timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ matching_profile_count: { [points(1)[0]]: { known: 0, unknown: 0 } } });
    expectProblem(await a.trend(seg('spenders'), { sampling_points: points(26), timezone: 'UTC' }), 413);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: [], timezone: 'UTC' }), 400);
    expectProblem(await a.trend(seg('spenders'), { timezone: 'UTC' }), 400);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: ['yesterday'], timezone: 'UTC' }), 400);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: ['2026-13-40T00:00:00Z'], timezone: 'UTC' }), 400);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: [1767225600000], timezone: 'UTC' }), 400);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: '2026-01-01T00:00:00Z', timezone: 'UTC' }), 400);
  });

  it("AQL-10: the trend's time zone field is timezone, required (400 when missing or given as time_zone)", async () => {
    const a = await account();
    const point = '2026-01-01T00:00:00Z';
    expectProblem(await a.trend(seg('spenders'), { sampling_points: [point] }), 400);
    expectProblem(await a.trend(seg('spenders'), { sampling_points: [point], time_zone: 'UTC' }), 400);
    const r = await a.trend(seg('spenders'), { sampling_points: [point], timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
  });

  it('AQL-05: an unrecognised trend timezone → 400', async () => {
    const a = await account();
    const r = await a.trend(seg('spenders'), {
      sampling_points: ['2026-01-01T00:00:00Z'],
      timezone: 'Europe/Atlantis',
    });
    expectProblem(r, 400, 'AUD-1712');
    expect(r.body.detail).toContain('Europe/Atlantis');
  });

  it('unknown segment or section → 404', async () => {
    const a = await account();
    const body = { sampling_points: ['2026-01-01T00:00:00Z'], timezone: 'UTC' };
    expectProblem(await a.trend(seg('no-such-segment'), body), 404);
    expectProblem(await a.trend(seg('spenders'), body, 'com.vendor1.sections.user-created.nope'), 404);
  });
});

describe('attribute history: a row for each value replaced (migration 0015)', () => {
  /** The account's attribute history rows, [value, set_at, replaced_at] in ms, oldest first. */
  const history = async (accountId: string) =>
    (
      await db.query<{ value: unknown; set_at: Date; replaced_at: Date }>(
        'select value, set_at, replaced_at from attribute_history where account_id = $1 order by set_at, replaced_at',
        [accountId],
      )
    ).rows.map((r) => [r.value, r.set_at.getTime(), r.replaced_at.getTime()]);
  /** The known profiles the spenders segment counts at each point. */
  const known = async (a: Awaited<ReturnType<typeof account>>, points: number[]) => {
    const r = await a.trend(seg('spenders'), { sampling_points: points.map(iso), timezone: 'UTC' });
    expect(r.status, r.text).toBe(200);
    return points.map((p) => r.body.matching_profile_count[iso(p)].known);
  };

  it('AQL-08: a first value writes no history row, and the trend sees it from the instant it was set', async () => {
    const a = await account();
    const t0 = server.clock.now;
    await a.create(EMAIL, 'first@x.io');
    server.clock.advance(10 * MINUTE);
    const t1 = server.clock.now;
    await a.set(EMAIL, 'first@x.io', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    expect(await history(a.accountId)).toEqual([]);
    expect(await known(a, [t0 + MINUTE, t1 - 1, t1, server.clock.now])).toEqual([0, 0, 1, 1]);
  });

  it('AQL-08: replacing a value writes one row, the old value with when it was set and replaced; writing the same value again writes none', async () => {
    const a = await account();
    await a.create(EMAIL, 'change@x.io');
    const t1 = server.clock.now;
    await a.set(EMAIL, 'change@x.io', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    const t2 = server.clock.now;
    await a.set(EMAIL, 'change@x.io', { [SPEND]: 50 });
    server.clock.advance(10 * MINUTE);
    await a.set(EMAIL, 'change@x.io', { [SPEND]: 50 });
    expect(await history(a.accountId)).toEqual([[5000, t1, t2]]);
    expect(await known(a, [t1 - 1, t1, t2 - 1, t2, server.clock.now])).toEqual([0, 1, 1, 0, 0]);
  });

  it('AQL-08: a clear writes the value it ends; a value set again after it replaces nothing', async () => {
    const a = await account();
    await a.create(EMAIL, 'clear@x.io');
    const t1 = server.clock.now;
    await a.set(EMAIL, 'clear@x.io', { [SPEND]: 5000 });
    server.clock.advance(10 * MINUTE);
    const t2 = server.clock.now;
    await a.set(EMAIL, 'clear@x.io', { [SPEND]: null });
    server.clock.advance(10 * MINUTE);
    const t3 = server.clock.now;
    await a.set(EMAIL, 'clear@x.io', { [SPEND]: 5000 });
    expect(await history(a.accountId)).toEqual([[5000, t1, t2]]);
    expect(await known(a, [t1, t2 - 1, t2, t3 - 1, t3])).toEqual([1, 1, 0, 0, 1]);
  });

  it("AQL-08, MRG-12, MRG-14: a merge and an unmerge write no history; a write to the cluster replaces the canonical profile's own value", async () => {
    const a = await account();
    // The web profile, created first, is the canonical one: its value is the one the cluster shows.
    await a.create(WEB, 'cookie-h');
    const t1 = server.clock.now;
    await a.set(WEB, 'cookie-h', { [SPEND]: 5000 });
    await a.create(EMAIL, 'merged@x.io');
    await a.set(EMAIL, 'merged@x.io', { [SPEND]: 50 });
    server.clock.advance(10 * MINUTE);
    await a.merge([EMAIL, 'merged@x.io'], [WEB, 'cookie-h']);
    expect(await history(a.accountId)).toEqual([]);
    server.clock.advance(10 * MINUTE);
    const t2 = server.clock.now;
    await a.set(EMAIL, 'merged@x.io', { [SPEND]: 20 });
    expect(await history(a.accountId)).toEqual([[5000, t1, t2]]);
    server.clock.advance(10 * MINUTE);
    expect(await known(a, [t1, t2 - 1, t2])).toEqual([1, 1, 0]);
    expectNoContent(await a.call('DELETE', `/audience/profiles/merges/keyspaces/${EMAIL}/profiles/merged@x.io`));
    expect(await history(a.accountId)).toEqual([[5000, t1, t2]]);
    // Apart, the email profile (known) holds its own 50 and the web profile 20: neither spends over 1000.
    expect(await known(a, [t2 - 1, server.clock.now])).toEqual([0, 0]);
  });
});

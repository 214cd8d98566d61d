import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { MAX_TERMS } from '../aql/check.ts';
import {
  DAY,
  EMAIL,
  HOUR,
  MINUTE,
  SEC,
  SPEND,
  TIER,
  WEB,
  account,
  iso,
  purchase,
  seg,
  spend,
  tier,
  segmentsServer,
  server,
} from '../../test/segments-http.ts';

/**
 * Counts of the profiles in a segment, and their trend over time, through real HTTP against a real
 * database (SPEC §4.7; CHECKLIST "Segments and AQL").
 */

segmentsServer();

/**
 * Queries each refused with its code (AQL-14 to AQL-26), made of a Number attribute, a Text
 * attribute and an event (with its version, as the query names it), of one section.
 */
function refusedQueries(spent: string, tiered: string, bought: string, event: string): [string, string][] {
  return [
    [`${spent}.eq("100")`, 'AUD-1401'],
    [`${bought}.eventData("colour").eq("red")`, 'AUD-1402'],
    [`${bought}.eventData("sku[]").eq("x")`, 'AUD-1403'],
    [`${spent}.eventData("city").eq("Oslo")`, 'AUD-1704'],
    [spent, 'AUD-1705'],
    [`${tiered}.eq()`, 'AUD-1706'],
    [`${bought}.event(${event})`, 'AUD-1708'],
    [Array.from({ length: MAX_TERMS + 1 }, () => `${spent}.gt(1)`).join(' || '), 'AUD-1710'],
    [`${spent}.gt(1) & ${spent}.gt(1)`, 'AUD-1701'],
    ['section("store").attribute(1).eq(1)', 'AUD-1702'],
    [`${bought}.inLast("events.year", 0, 1)`, 'AUD-1707'],
    [`!${spent}.gt(1)`, 'AUD-1709'],
  ];
}

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

  it('AQL-14 to AQL-26: each refusal of a query, through each operation that takes one here: inline count and export, new segment, new version', async () => {
    const a = await account();
    const section = (await a.call('GET', '/audience/sections')).body.items.find((s: any) => s.discriminator === SEC).id;
    const attributes = (await a.call('GET', `/audience/sections/${SEC}/attributes`)).body.items;
    const versionOf = (discriminator: string) =>
      attributes.find((x: any) => x.discriminator === discriminator).versions[0].id;
    const [spent, tiered] = [
      `section(${section}).attribute(${versionOf(SPEND)})`,
      `section(${section}).attribute(${versionOf(TIER)})`,
    ];
    const bought = `section(${section}).event(${a.purchaseVersion})`;
    const cases = refusedQueries(spent, tiered, bought, a.purchaseVersion);
    const segment = seg('spenders');
    for (const [query, code] of cases) {
      const asked = [
        await a.count({ section_discriminator: SEC, segment: { timezone: 'UTC', segment_definition: query } }),
        await a.call('POST', '/audience/profiles/reports/segments', {
          body: { section_discriminator: SEC, segment: { timezone: 'UTC', segment_definition: query } },
        }),
        await a.call('POST', '/audience/segments', { body: { name: `Refused ${code}`, query } }),
        await a.call('POST', `/audience/segments/${segment}/versions`, { body: { query } }),
      ];
      for (const r of asked) expectProblem(r, 400, code);
    }
  });

  it("AQL-12: each refusal of a query, in a manifest's segment, applied and previewed", async () => {
    const a = await account();
    // The manifest's placeholders name the definitions.
    const cases = refusedQueries(spend, tier, purchase, '{event:com.vendor1.events.user-created.purchase@1}');
    for (const [query, code] of cases) {
      const manifest = { segments: [{ name: 'Refused', section: SEC, versions: [{ query }] }] };
      for (const path of [`/admin/accounts/${a.accountId}/manifest`, `/admin/accounts/${a.accountId}/manifest/preview`])
        expectProblem(await server.admin(path.endsWith('preview') ? 'POST' : 'PUT', path, manifest), 400, code);
    }
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

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  DAY,
  EMAIL,
  HOUR,
  MINUTE,
  SPEND,
  TIER,
  WEB,
  account,
  db,
  expectNoContent,
  iso,
  seg,
  segmentsServer,
  server,
} from '../../test/segments-http.ts';

/**
 * Evaluation of a profile against segments through real HTTP against a real database (SPEC §4.3;
 * CHECKLIST "Segments and AQL"), and the attribute history it reads.
 */

segmentsServer();

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

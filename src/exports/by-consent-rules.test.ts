import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  CH_EMAIL,
  CH_WEB,
  exportHelpers,
  MEMBERS,
  NEWS,
  pollPath,
  SHOP,
  V,
  VIP,
} from '../../test/exports.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const { account, ok, requestExport, whenReady, expectNothingQueued } = exportHelpers(() => ({ server, db }));

/** The result of a ready count. */
async function countResult(a: Account, body: unknown): Promise<Record<string, number>> {
  const pollUrl = await requestExport(a, body, 'consents/count');
  await whenReady(a, pollUrl);
  return (await ok(server.request('GET', pollPath(pollUrl), { token: a.token }), 200)).body;
}

const segments = (filter?: string) => ({
  timezone: 'Europe/Oslo',
  segment_discriminators: { big: BIG, members: MEMBERS },
  ...(filter === undefined ? {} : { filter }),
});

describe('body rules: a problem document and nothing queued', () => {
  const base = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
  const cases: [string, (a: Account) => Record<string, unknown>, number, string, RegExp][] = [
    [
      'EXP-02 section_discriminator missing',
      () => ({ ...base, section_discriminator: undefined }),
      400,
      'AUD-1003',
      /section_discriminator/,
    ],
    [
      'EXP-02 section unknown',
      () => ({ ...base, section_discriminator: `${V}.sections.user-created.none` }),
      404,
      'AUD-1102',
      /none/,
    ],
    [
      'EXP-03 topic_discriminators missing',
      () => ({ ...base, topic_discriminators: undefined }),
      400,
      'AUD-1003',
      /topic_discriminators/,
    ],
    [
      'EXP-03 topic_discriminators empty',
      () => ({ ...base, topic_discriminators: [] }),
      400,
      'AUD-0',
      /topic_discriminators/,
    ],
    [
      'EXP-03 over 100 topics',
      () => ({ ...base, topic_discriminators: Array(101).fill(NEWS) }),
      413,
      'AUD-1007',
      /topic_discriminators/,
    ],
    [
      'EXP-03 a topic of another section',
      () => ({ ...base, topic_discriminators: [NEWS, `${V}.topics.user-created.digest`] }),
      400,
      'AUD-1610',
      /topic_discriminators\[1\]/,
    ],
    [
      'EXP-04 the web channel',
      () => ({ ...base, channel_discriminator: CH_WEB }),
      400,
      'AUD-1608',
      /channel_discriminator/,
    ],
    [
      'EXP-04 an unknown channel',
      () => ({ ...base, channel_discriminator: `${V}.channels.fax` }),
      400,
      'AUD-1607',
      /channel_discriminator/,
    ],
    [
      'EXP-05 over 2 channels',
      () => ({
        ...base,
        channel_discriminator: undefined,
        channels: [1, 2, 3].map((i) => ({ field_name: `c${i}`, channel_discriminator: CH_EMAIL })),
      }),
      413,
      'AUD-1007',
      /channels/,
    ],
    [
      'EXP-05 channels empty',
      () => ({ ...base, channel_discriminator: undefined, channels: [] }),
      400,
      'AUD-0',
      /channels/,
    ],
    [
      'EXP-05 a channel without field_name',
      () => ({ ...base, channel_discriminator: undefined, channels: [{ channel_discriminator: CH_EMAIL }] }),
      400,
      'AUD-1003',
      /channels\[0\]\.field_name/,
    ],
    [
      'EXP-05 the web channel in channels',
      () => ({
        ...base,
        channel_discriminator: undefined,
        channels: [
          { field_name: 'a', channel_discriminator: CH_EMAIL },
          { field_name: 'b', channel_discriminator: CH_WEB },
        ],
      }),
      400,
      'AUD-1608',
      /channels\[1\]\.channel_discriminator/,
    ],
    [
      'EXP-06 channel_discriminator with channels',
      () => ({ ...base, channels: [{ field_name: 'mail', channel_discriminator: CH_EMAIL }] }),
      400,
      'AUD-1907',
      /not both/,
    ],
    [
      'EXP-06 neither channel_discriminator nor channels',
      () => ({ ...base, channel_discriminator: undefined }),
      400,
      'AUD-1907',
      /channel_discriminator or channels/,
    ],
    [
      'EXP-07 a malformed filter',
      () => ({ ...base, segments: segments('big & (members | ') }),
      400,
      'AUD-1906',
      /segments\.filter: expected a segment name, "!" or "\(", found the end at position 18/,
    ],
    [
      'EXP-07 an unclosed parenthesis',
      () => ({ ...base, segments: segments('(big | members & big') }),
      400,
      'AUD-1906',
      /expected "\)" closing the "\(" at position 1, found the end at position 21/,
    ],
    [
      'EXP-07 a name unknown to the filter',
      () => ({ ...base, segments: segments('big | small') }),
      400,
      'AUD-1906',
      /unknown segment name "small" .* at position 7/,
    ],
    [
      'EXP-07 two names in a row',
      () => ({ ...base, segments: segments('big members') }),
      400,
      'AUD-1906',
      /expected "&", "\|" or the end, found "members" at position 5/,
    ],
    [
      'EXP-07 an unknown segment',
      () => ({
        ...base,
        segments: { timezone: 'UTC', segment_discriminators: { x: `${V}.segments.user-created.none` } },
      }),
      400,
      'AUD-1711',
      /segments\.segment_discriminators\.x/,
    ],
    [
      'EXP-07 no segment names',
      () => ({ ...base, segments: { timezone: 'UTC', segment_discriminators: {} } }),
      400,
      'AUD-0',
      /segment_discriminators/,
    ],
    [
      'EXP-07 an empty segment name',
      () => ({
        ...base,
        segments: { timezone: 'UTC', segment_discriminators: { '': `${V}.segments.user-created.none` } },
      }),
      400,
      'AUD-1925',
      /segment name .* must not be empty/,
    ],
    [
      'EXP-07 an unknown time zone',
      () => ({ ...base, segments: { ...segments(), timezone: 'Mars/Olympus' } }),
      400,
      'AUD-1712',
      /segments\.timezone/,
    ],
    [
      'EXP-08 an unknown duplicate_address_filter',
      () => ({ ...base, duplicate_address_filter: 'newest' }),
      400,
      'AUD-0',
      /duplicate_address_filter/,
    ],
    [
      'EXP-09 over 75 attributes',
      (a) => ({
        ...base,
        attributes: Array.from({ length: 76 }, (_, i) => ({ field_name: `a${i}`, attribute_version_id: a.v.points })),
      }),
      413,
      'AUD-1007',
      /attributes/,
    ],
    [
      'EXP-09 over 25 tags',
      () => ({
        ...base,
        tags: Array.from({ length: 26 }, (_, i) => ({ field_name: `t${i}`, tag_discriminator: VIP })),
      }),
      413,
      'AUD-1007',
      /tags/,
    ],
    [
      'EXP-09 an attribute version of no attribute of the section',
      () => ({ ...base, attributes: [{ field_name: 'x', attribute_version_id: '999999999' }] }),
      400,
      'AUD-1206',
      /attributes\[0\]\.attribute_version_id/,
    ],
    [
      'EXP-09 a hidden attribute',
      (a) => ({ ...base, attributes: [{ field_name: 'x', attribute_version_id: a.v.hidden }] }),
      400,
      'AUD-1211',
      /attributes\[0\]/,
    ],
    [
      'EXP-09 a hidden tag',
      () => ({ ...base, tags: [{ field_name: 'x', tag_discriminator: `${V}.tags.user-created.hidden` }] }),
      400,
      'AUD-1218',
      /tags\[0\]\.tag_discriminator/,
    ],
    [
      'EXP-12 a column named twice',
      (a) => ({ ...base, attributes: [{ field_name: 'Email', attribute_version_id: a.v.points }] }),
      400,
      'AUD-1908',
      /"Email"/,
    ],
    [
      'EXP-12 a segment named as the export key',
      () => ({ ...base, segments: { timezone: 'UTC', segment_discriminators: { exportKey: BIG } } }),
      400,
      'AUD-1908',
      /exportKey/,
    ],
    ['EXP-10 a limit of 0', () => ({ ...base, limit: 0 }), 400, 'AUD-0', /limit/],
  ];
  // One account for the cases, which refuse before anything is written: each checks that nothing
  // was queued, so a case that queued would be seen by its own check (made once: an account with
  // the exports' manifest is most of a case's work).
  let refusing: Promise<Account> | undefined;
  for (const [name, body, status, code, detail] of cases) {
    it(name, async () => {
      const a = await (refusing ??= account());
      const res = await server.request('POST', '/audience/profiles/reports/consents', {
        token: a.token,
        body: body(a),
      });
      expect(expectProblem(res, status, code)).toMatch(detail);
      await expectNothingQueued(a);
    });
  }

  it('EXP-15: the count takes no attributes, tags, limit or exclude_unsubscribed_profiles (ignored as unknown fields), and refuses what the export refuses', async () => {
    const a = await account();
    expectProblem(
      await server.request('POST', '/audience/profiles/reports/consents/count', {
        token: a.token,
        body: { ...base, topic_discriminators: Array(101).fill(NEWS) },
      }),
      413,
      'AUD-1007',
    );
    expectProblem(
      await server.request('POST', '/audience/profiles/reports/consents/count', {
        token: a.token,
        body: { ...base, channels: [{ field_name: 'x', channel_discriminator: CH_EMAIL }] },
      }),
      400,
      'AUD-1907',
    );
    expectProblem(
      await server.request('POST', '/audience/profiles/reports/consents/count', {
        token: a.token,
        body: {
          ...base,
          channel_discriminator: undefined,
          channels: [{ field_name: 'total_profile_count', channel_discriminator: CH_EMAIL }],
        },
      }),
      400,
      'AUD-1908',
    );
    await expectNothingQueued(a);
    const result = await countResult(a, {
      ...base,
      attributes: [{ field_name: 'x', attribute_version_id: '1' }],
      limit: 0,
    });
    expect(result).toEqual({ profile_count: 0, total_profile_count: 0 });
  });
});

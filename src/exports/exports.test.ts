import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { parse as parseCsv } from 'csv-parse/sync';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  BLOG,
  CH_EMAIL,
  CH_SMS,
  CH_WEB,
  CRM,
  CSV,
  DAILY,
  DAY,
  EMAIL,
  EXPORT,
  exportHelpers,
  MANIFEST,
  MEMBERS,
  NEWS,
  NO_LIMITS,
  pollPath,
  SHOP,
  sleep,
  SMS_OFFERS,
  V,
  v2,
  VIP,
} from '../../test/exports.ts';
import { serverOnS3 } from '../../test/s3.ts';
import { maySend } from '../consents/consents.ts';
import { locate } from '../profiles/profiles.ts';
import { accountScope } from '../services.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});
const {
  account,
  ok,
  person,
  suppress,
  requestExport,
  whenReady,
  rawGet,
  download,
  expectNothingQueued,
  holds,
  withoutWorker,
  changeDefinitions,
} = exportHelpers(() => ({ server, db }));

async function exportFile(a: Account, body: unknown, kind = 'consents') {
  const pollUrl = await requestExport(a, body, kind);
  await whenReady(a, pollUrl);
  return download(a, pollUrl);
}

/** The result of a ready count. */
async function countResult(a: Account, body: unknown): Promise<Record<string, number>> {
  const pollUrl = await requestExport(a, body, 'consents/count');
  await whenReady(a, pollUrl);
  return (await ok(server.request('GET', pollPath(pollUrl), { token: a.token }), 200)).body;
}

/** The profile's matches, through the evaluation route. */
async function matches(a: Account, exportKey: string, segments: string[]): Promise<Record<string, boolean>> {
  const res = await ok(
    server.request('POST', `/audience/keyspaces/${EXPORT}/profiles/${exportKey}/evaluations`, {
      token: a.token,
      body: { segments: segments.map((discriminator) => ({ discriminator })), time_zone: 'Europe/Oslo' },
    }),
    200,
  );
  return res.body.matches.segments;
}

/** maySend for the profile of an export key on any of the topics. */
async function mayBeSent(a: Account, exportKey: string, topics: string[], channel: string): Promise<boolean> {
  const scope = await accountScope(server.services, a.accountId);
  const { canonicalId } = await locate(server.services.pool, scope, {
    keyspace_discriminator: EXPORT,
    profile_key: exportKey,
  });
  for (const topic of topics)
    if (await maySend(server.services.pool, scope, canonicalId, topic, channel, SHOP)) return true;
  return false;
}

/** The people of the shared account: who matches which segment, and who may be sent to. */
let shop: Account;
beforeAll(async () => {
  shop = await account();
  await person(shop, 'ann@example.com', {
    points: 150,
    member: true,
    vip: true,
    birthday: '1990-05-01',
    mobile: '+4741234567',
    consents: [
      [NEWS, CH_EMAIL, 'opt-in'],
      [SMS_OFFERS, CH_SMS, 'opt-in'],
    ],
  });
  await person(shop, 'bob@example.com', { points: 50, member: true, consents: [[NEWS, CH_EMAIL, 'opt-out']] });
  await person(shop, 'cid@example.com', {
    points: 200,
    member: false,
    mobile: '+4741234568',
    consents: [
      [NEWS, CH_EMAIL, 'opt-in'],
      [SMS_OFFERS, CH_SMS, 'opt-in'],
    ],
  });
  await person(shop, 'dan@example.com', { points: 300 });
  await person(shop, 'eve@example.com', { points: 120, member: true, consents: [[DAILY, CH_EMAIL, 'opt-in']] });
  await person(shop, 'gus@example.com', { points: 10, member: false, consents: [[NEWS, CH_EMAIL, 'opt-in']] });
  await suppress(shop, CH_EMAIL, 'CID@example.com');
  await suppress(shop, CH_SMS, '+4741234568');
});

const segments = (filter?: string) => ({
  timezone: 'Europe/Oslo',
  segment_discriminators: { big: BIG, members: MEMBERS },
  ...(filter === undefined ? {} : { filter }),
});

describe('profile in segment by consent export', () => {
  it('EXP-01, EXP-12, EXP-13, EXP-37: 201 with a poll URL; the CSV has exportKey, the attribute and tag columns, a 1/0 column per segment and the Email column, row by row as the profiles hold', async () => {
    const { header, rows } = await exportFile(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
      segments: segments('big | members'),
      attributes: [
        { field_name: 'points', attribute_version_id: shop.v.points },
        { field_name: 'birthday', attribute_version_id: shop.v.birthday },
        { field_name: 'member', attribute_version_id: shop.v.member },
        { field_name: 'address', attribute_version_id: shop.v.email },
      ],
      tags: [{ field_name: 'vip', tag_discriminator: VIP }],
    });
    expect(header).toEqual(['exportKey', 'points', 'birthday', 'member', 'address', 'vip', 'big', 'members', 'Email']);
    // gus is in neither segment.
    expect(rows.map((r) => r[4]).sort()).toEqual([
      'ann@example.com',
      'bob@example.com',
      'cid@example.com',
      'dan@example.com',
      'eve@example.com',
    ]);
    for (const [exportKey, points, birthday, member, address, vip, big, members, email] of rows) {
      const held = await holds(shop, exportKey);
      expect(points).toBe(String(held.attributes[shop.v.points]));
      expect(birthday).toBe(
        held.attributes[shop.v.birthday] === undefined ? '' : String(held.attributes[shop.v.birthday]),
      );
      expect(member).toBe(held.attributes[shop.v.member] === undefined ? '' : String(held.attributes[shop.v.member]));
      expect(address).toBe(held.attributes[shop.v.email]);
      expect(vip).toBe(held.tags[VIP] ? '1' : '0');
      const matched = await matches(shop, exportKey, [BIG, MEMBERS]);
      expect([big, members]).toEqual([matched[BIG] ? '1' : '0', matched[MEMBERS] ? '1' : '0']);
      // CONS-23: the address only where maySend allows it (bob opted out, cid is suppressed, dan has no consent, eve's is to another topic).
      expect(email).toBe((await mayBeSent(shop, exportKey, [NEWS], CH_EMAIL)) ? address : '');
    }
    expect(rows.filter((r) => r[8] !== '').map((r) => r[8])).toEqual(['ann@example.com']);
  });

  it('EXP-14, CONS-23: with channels, each field_name column holds the address only for profiles that may be contacted on that channel', async () => {
    const { header, rows } = await exportFile(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS, SMS_OFFERS],
      channels: [
        { field_name: 'mail', channel_discriminator: CH_EMAIL },
        { field_name: 'phone', channel_discriminator: CH_SMS },
      ],
      attributes: [{ field_name: 'address', attribute_version_id: shop.v.email }],
    });
    expect(header).toEqual(['exportKey', 'address', 'mail', 'phone']);
    // Without segments, every profile of the account.
    expect(rows).toHaveLength(6);
    for (const [exportKey, , mail, phone] of rows) {
      const held = await holds(shop, exportKey);
      expect(mail).toBe(
        (await mayBeSent(shop, exportKey, [NEWS, SMS_OFFERS], CH_EMAIL)) ? held.attributes[shop.v.email] : '',
      );
      expect(phone).toBe(
        (await mayBeSent(shop, exportKey, [NEWS, SMS_OFFERS], CH_SMS)) ? held.attributes[shop.v.mobile] : '',
      );
    }
    const byAddress = Object.fromEntries(rows.map((r) => [r[1], [r[2], r[3]]]));
    expect(byAddress['ann@example.com']).toEqual(['ann@example.com', '+4741234567']);
    // cid's address is suppressed on both channels; gus has no mobile number.
    expect(byAddress['cid@example.com']).toEqual(['', '']);
    expect(byAddress['gus@example.com']).toEqual(['gus@example.com', '']);
  });

  it('EXP-07: the filter selects by !, & and | with parentheses over the segment names', async () => {
    const addresses = async (filter: string) => {
      const { rows } = await exportFile(shop, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
        segments: segments(filter),
        attributes: [{ field_name: 'address', attribute_version_id: shop.v.email }],
      });
      return rows.map((r) => r[1].split('@')[0]).sort();
    };
    expect(await addresses('big & !members')).toEqual(['cid', 'dan']);
    expect(await addresses('!(big | members)')).toEqual(['gus']);
    expect(await addresses('big&members')).toEqual(['ann', 'eve']);
    expect(await addresses('!!members & (big | !big)')).toEqual(['ann', 'bob', 'eve']);
  });

  it('EXP-11: exclude_unsubscribed_profiles leaves out those that may be contacted on no requested topic and channel, and adds subscribed', async () => {
    const { header, rows } = await exportFile(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS, DAILY],
      channel_discriminator: CH_EMAIL,
      exclude_unsubscribed_profiles: true,
      attributes: [{ field_name: 'address', attribute_version_id: shop.v.email }],
    });
    expect(header).toEqual(['exportKey', 'address', 'Email', 'subscribed']);
    expect(rows.map((r) => r[1]).sort()).toEqual(['ann@example.com', 'eve@example.com', 'gus@example.com']);
    for (const row of rows) expect(row.slice(2)).toEqual([row[1], '1']);
  });

  it('EXP-10: limit gives that many profiles chosen at random among those the export holds', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const { rows } = await exportFile(shop, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
        segments: segments('big'),
        limit: 2,
      });
      expect(rows).toHaveLength(2);
      expect(new Set(rows.map((r) => r[0])).size).toBe(2);
      for (const r of rows) seen.add(r[0]);
    }
    // Four profiles are big; eight samples of two that never left the first two would not be random.
    expect(seen.size).toBeGreaterThan(2);
    const { rows } = await exportFile(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
      segments: segments('big'),
      limit: 10,
    });
    expect(rows).toHaveLength(4);
  });

  it('EXP-08: duplicate_address_filter keeps the least (oldest) or most (latest) recently updated of profiles sharing an address, or all (keep); empty addresses are never duplicates', async () => {
    const a = await account();
    // Profiles keyed by CRM id whose email attribute is the same address (in another case), updated in this order.
    const crm = async (id: string, email?: string) => {
      await ok(
        server.request('POST', `/audience/keyspaces/${CRM}/sections/${SHOP}/profiles`, {
          token: a.token,
          body: { profile_key: id },
        }),
        201,
      );
      if (email !== undefined)
        await ok(
          server.request('PATCH', `/audience/keyspaces/${CRM}/profiles/${id}/sections/${SHOP}/attributes`, {
            token: a.token,
            body: { [a.v.email]: email },
            headers: { 'content-type': 'application/merge-patch+json' },
          }),
          204,
        );
    };
    await crm('first', 'same@example.com');
    await crm('second', 'SAME@example.com');
    await crm('third', 'same@example.com');
    await crm('other', 'other@example.com');
    await crm('none-1');
    await crm('none-2', '');
    await crm('none-3');
    const ids = async (filter?: string) => {
      const { rows } = await exportFile(a, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
        ...(filter ? { duplicate_address_filter: filter } : {}),
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
      });
      return rows.map((r) => r[1]).sort();
    };
    const all = ['first', 'none-1', 'none-2', 'none-3', 'other', 'second', 'third'];
    expect(await ids('keep')).toEqual(all);
    expect(await ids()).toEqual(all);
    expect(await ids('oldest')).toEqual(['first', 'none-1', 'none-2', 'none-3', 'other']);
    expect(await ids('latest')).toEqual(['none-1', 'none-2', 'none-3', 'other', 'third']);
    // An update makes a profile the latest.
    await ok(
      server.request('PATCH', `/audience/keyspaces/${CRM}/profiles/first/sections/${SHOP}/attributes`, {
        token: a.token,
        body: { [a.v.points]: 1 },
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      204,
    );
    expect(await ids('latest')).toEqual(['first', 'none-1', 'none-2', 'none-3', 'other']);
    expect(await ids('oldest')).toEqual(['none-1', 'none-2', 'none-3', 'other', 'second']);
  });

  it('VER-07: the deprecated consent_list_discriminator is accepted', async () => {
    const { rows } = await exportFile(shop, {
      section_discriminator: SHOP,
      consent_list_discriminator: `${V}.topic-folders.root`,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    expect(rows).toHaveLength(6);
  });

  it('an export holds no profile data of other accounts and a file of no rows still has its header', async () => {
    const a = await account();
    const { header, rows } = await exportFile(a, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_SMS,
      segments: segments(),
    });
    expect(header).toEqual(['exportKey', 'big', 'members', 'Mobile']);
    expect(rows).toEqual([]);
  });
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
  for (const [name, body, status, code, detail] of cases) {
    it(name, async () => {
      const a = await account();
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

describe('count by consent', () => {
  it('EXP-15, EXP-16, VER-06: the count poll answers profile_count, total_profile_count and one integer per channels[].field_name, as the export of the same request holds', async () => {
    const body = {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS, SMS_OFFERS],
      channels: [
        { field_name: 'mail', channel_discriminator: CH_EMAIL },
        { field_name: 'phone', channel_discriminator: CH_SMS },
      ],
      segments: segments('big | members'),
    };
    const result = await countResult(shop, body);
    const { rows } = await exportFile(shop, body);
    expect(result).toEqual({
      profile_count: rows.length,
      total_profile_count: rows.length,
      mail: rows.filter((r) => r[3] !== '').length,
      phone: rows.filter((r) => r[4] !== '').length,
    });
    expect(result).toEqual({ profile_count: 5, total_profile_count: 5, mail: 1, phone: 1 });
  });

  it('EXP-16: the count of a segment agrees with /audience/profiles/reports/segments/count', async () => {
    for (const segment of [BIG, MEMBERS]) {
      const direct = await ok(
        server.request('POST', '/audience/profiles/reports/segments/count', {
          token: shop.token,
          body: { section_discriminator: SHOP, segment: { timezone: 'UTC', segment_discriminator: segment } },
        }),
        200,
      );
      const result = await countResult(shop, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
        segments: { timezone: 'UTC', segment_discriminators: { s: segment } },
      });
      expect(result.total_profile_count).toBe(direct.body.profile_count);
      expect(result).toEqual({
        profile_count: direct.body.profile_count,
        total_profile_count: direct.body.profile_count,
      });
    }
  });
});

describe('duplicate export', () => {
  /** An account whose profiles are keyed by CRM id, with an email address and points; `first` has opted in to News by email. */
  async function duplicates(): Promise<Account & { sectionId: string }> {
    const a = await account();
    const crm = async (id: string, values: Record<string, unknown>) => {
      await ok(
        server.request('POST', `/audience/keyspaces/${CRM}/sections/${SHOP}/profiles`, {
          token: a.token,
          body: { profile_key: id },
        }),
        201,
      );
      if (Object.keys(values).length > 0)
        await ok(
          server.request('PATCH', `/audience/keyspaces/${CRM}/profiles/${id}/sections/${SHOP}/attributes`, {
            token: a.token,
            body: values,
            headers: { 'content-type': 'application/merge-patch+json' },
          }),
          204,
        );
    };
    await crm('first', { [a.v.email]: 'same@example.com', [a.v.points]: 5 });
    await crm('second', { [a.v.email]: 'SAME@example.com', [a.v.points]: 7 });
    await crm('third', { [a.v.email]: ' same@example.com ', [a.v.points]: 5 });
    await crm('other', { [a.v.email]: 'other@example.com', [a.v.points]: 9 });
    await crm('none', {});
    await crm('blank-1', { [a.v.email]: '' });
    await crm('blank-2', { [a.v.email]: '' });
    await ok(
      server.request('POST', `/v2/audience/keyspaces/${CRM}/profiles/first/sections/${SHOP}/consents`, {
        token: a.token,
        body: { topic_discriminator: NEWS, channel_discriminator: CH_EMAIL, type: 'opt-in', reason: 'test' },
      }),
      201,
    );
    const sections = (await server.request('GET', '/audience/sections', { token: a.token })).body.items as {
      discriminator: string;
      id: string;
    }[];
    return { ...a, sectionId: sections.find((x) => x.discriminator === SHOP)!.id };
  }

  it('EXP-17, EXP-19: 201 with a poll URL; the file lists the profiles sharing a value of the attribute (texts trimmed and without case; empty values never), next to each other, with the value as each holds it', async () => {
    const a = await duplicates();
    const { header, rows } = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.email,
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
        tags: [{ field_name: 'vip', tag_discriminator: VIP }],
      },
      'duplicates',
    );
    expect(header).toEqual(['exportKey', 'duplicateValue', 'crm', 'vip']);
    expect(rows.map((r) => r[2])).toEqual(['first', 'second', 'third']);
    for (const [exportKey, value, crmId, vip] of rows) {
      const held = await holds(a, exportKey);
      expect([value, crmId, vip]).toEqual([held.attributes[a.v.email], held.attributes[a.v.crmid], '0']);
    }
    const byPoints = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.points,
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
      },
      'duplicates',
    );
    expect(byPoints.rows.map((r) => [r[1], r[2]])).toEqual([
      ['5', 'first'],
      ['5', 'third'],
    ]);
  });

  it('EXP-18: segment_definitions (AQL by name) in place of segment_discriminators, with a filter; the channel column holds the address of profiles that may be contacted; limit', async () => {
    const a = await duplicates();
    const points = (op: string, n: number) => `section(${a.sectionId}).attribute(${a.v.points}).${op}(${n})`;
    const { header, rows } = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.email,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
        segments: {
          timezone: 'UTC',
          segment_definitions: { small: points('lt', 6), odd: points('eq', 7) },
          filter: 'small | odd',
        },
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
      },
      'duplicates',
    );
    expect(header).toEqual(['exportKey', 'duplicateValue', 'crm', 'small', 'odd', 'Email']);
    expect(rows.map((r) => r.slice(2))).toEqual([
      ['first', '1', '0', 'same@example.com'],
      ['second', '0', '1', ''],
      ['third', '1', '0', ''],
    ]);
    // Within the segment alone, only first and third share their address.
    const small = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.points,
        segments: { timezone: 'UTC', segment_definitions: { small: points('lt', 6) } },
      },
      'duplicates',
    );
    expect(small.rows).toHaveLength(2);
    const one = await exportFile(
      a,
      { section_discriminator: SHOP, find_duplicates_by_attribute_version_id: a.v.email, limit: 1 },
      'duplicates',
    );
    expect(one.rows).toHaveLength(1);
  });

  it('EXP-18: topic_discriminators without channel_discriminator: a column per channel with addresses, holding the address of profiles that may be contacted on it for one of the topics', async () => {
    const a = await duplicates();
    const { header, rows } = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.email,
        topic_discriminators: [NEWS],
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
      },
      'duplicates',
    );
    expect(header).toEqual(['exportKey', 'duplicateValue', 'crm', 'Email', 'Mobile']);
    expect(rows.map((r) => r.slice(2))).toEqual([
      ['first', 'same@example.com', ''],
      ['second', '', ''],
      ['third', '', ''],
    ]);
  });

  it('EXP-18: channel_discriminator without topic_discriminators: its column holds the address of profiles that may be contacted on it for any topic of the section', async () => {
    const a = await duplicates();
    await ok(
      server.request('POST', `/v2/audience/keyspaces/${CRM}/profiles/second/sections/${SHOP}/consents`, {
        token: a.token,
        body: { topic_discriminator: DAILY, channel_discriminator: CH_EMAIL, type: 'opt-in', reason: 'test' },
      }),
      201,
    );
    const { header, rows } = await exportFile(
      a,
      {
        section_discriminator: SHOP,
        find_duplicates_by_attribute_version_id: a.v.email,
        channel_discriminator: CH_EMAIL,
        attributes: [{ field_name: 'crm', attribute_version_id: a.v.crmid }],
      },
      'duplicates',
    );
    expect(header).toEqual(['exportKey', 'duplicateValue', 'crm', 'Email']);
    expect(rows.map((r) => r.slice(2))).toEqual([
      ['first', 'same@example.com'],
      ['second', 'SAME@example.com'],
      ['third', ''],
    ]);
  });

  const base = (a: Account) => ({ section_discriminator: SHOP, find_duplicates_by_attribute_version_id: a.v.email });
  const cases: [string, (a: Account) => Record<string, unknown>, number, string, RegExp][] = [
    [
      'EXP-18 section_discriminator missing',
      (a) => ({ ...base(a), section_discriminator: undefined }),
      400,
      'AUD-1003',
      /section_discriminator/,
    ],
    [
      'EXP-18 find_duplicates_by_attribute_version_id missing',
      (a) => ({ ...base(a), find_duplicates_by_attribute_version_id: undefined }),
      400,
      'AUD-1003',
      /find_duplicates_by_attribute_version_id/,
    ],
    [
      'EXP-18 an attribute version of no attribute of the section',
      (a) => ({ ...base(a), find_duplicates_by_attribute_version_id: '999999999' }),
      400,
      'AUD-1206',
      /find_duplicates_by_attribute_version_id/,
    ],
    [
      'EXP-18 over 100 topics',
      (a) => ({ ...base(a), channel_discriminator: CH_EMAIL, topic_discriminators: Array(101).fill(NEWS) }),
      413,
      'AUD-1007',
      /topic_discriminators/,
    ],
    [
      'EXP-18 over 75 attributes',
      (a) => ({
        ...base(a),
        attributes: Array.from({ length: 76 }, (_, i) => ({ field_name: `a${i}`, attribute_version_id: a.v.points })),
      }),
      413,
      'AUD-1007',
      /attributes/,
    ],
    [
      'EXP-18 over 25 tags',
      (a) => ({
        ...base(a),
        tags: Array.from({ length: 26 }, (_, i) => ({ field_name: `t${i}`, tag_discriminator: VIP })),
      }),
      413,
      'AUD-1007',
      /tags/,
    ],
    [
      'EXP-18 segment_discriminators and segment_definitions together',
      (a) => ({
        ...base(a),
        segments: { timezone: 'UTC', segment_discriminators: { big: BIG }, segment_definitions: { x: 'section(1)' } },
      }),
      400,
      'AUD-0',
      /either segment_discriminators or segment_definitions/,
    ],
    [
      'EXP-18 a segment definition that is no AQL',
      (a) => ({ ...base(a), segments: { timezone: 'UTC', segment_definitions: { broken: 'section(' } } }),
      400,
      'AUD-1702',
      /segments\.segment_definitions\.broken: AQL: .* at line 1/,
    ],
  ];
  for (const [name, body, status, code, detail] of cases) {
    it(`${name}: a problem document and nothing queued`, async () => {
      const a = await account();
      const res = await server.request('POST', '/audience/profiles/reports/duplicates', {
        token: a.token,
        body: body(a),
      });
      expect(expectProblem(res, status, code)).toMatch(detail);
      await expectNothingQueued(a);
    });
  }
});

describe('profile in segment export (beta)', () => {
  const WEB = `${V}.keyspaces.web`;

  it('EXP-37, EXP-22: cells with line feeds, quotes, commas, backslashes and empty texts come back as they are; rows end with CRLF; a query constant with quotes and backslashes selects its profile', async () => {
    const a = await account();
    const texts = ['two\nlines', 'say "hi", then \'bye\'', '', 'back\\slash \\. and $1::text', '\\.', 'ünï €'];
    for (const [i, text] of texts.entries()) {
      await person(a, `tricky${i}@example.com`, { points: i });
      await ok(
        server.request(
          'PATCH',
          `/v2/audience/keyspaces/${EMAIL}/profiles/tricky${i}@example.com/sections/${SHOP}/attributes`,
          {
            token: a.token,
            body: { [`${V}.attributes.firstname`]: text },
            headers: { 'content-type': 'application/merge-patch+json' },
          },
        ),
        204,
      );
    }
    const sectionId = (await ok(server.request('GET', '/audience/sections', { token: a.token }), 200)).body.items.find(
      (x: { discriminator: string }) => x.discriminator === SHOP,
    ).id;
    const exportOf = async (definition: string) => {
      const res = await ok(
        server.request('POST', '/audience/profiles/reports/segments', {
          token: a.token,
          body: {
            section_discriminator: SHOP,
            segment: { timezone: 'UTC', segment_definition: definition },
            attributes: [
              { field_name: 'name', attribute_version_id: a.v.firstname },
              { field_name: 'points', attribute_version_id: a.v.points },
            ],
          },
        }),
        201,
      );
      await whenReady(a, res.body.file_download_url);
      const raw = await rawGet(pollPath(res.body.file_download_url), { authorization: `Bearer ${a.token}` });
      expect(raw.status).toBe(200);
      return raw.body.toString('utf8');
    };
    const all = await exportOf(`section(${sectionId}).attribute(${a.v.points}).gte(0)`);
    const parsed = parseCsv(all) as string[][];
    expect(parsed[0]).toEqual(['exportKey', 'name', 'points']);
    expect(parsed.slice(1).map((r) => [r[1], r[2]])).toEqual(texts.map((t, i) => [t, String(i)]));
    // Every record ends with CRLF; the line feed inside the first value stays a lone line feed.
    expect(all.split('\r\n')).toHaveLength(texts.length + 2);
    expect(all.match(/\n/g)).toHaveLength(texts.length + 2);
    const quote = (t: string) => `"${t.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
    for (const [i, text] of texts.entries()) {
      const one = parseCsv(
        await exportOf(`section(${sectionId}).attribute(${a.v.firstname}).eq(${quote(text)})`),
      ) as string[][];
      expect(
        one.slice(1).map((r) => r[2]),
        JSON.stringify(text),
      ).toEqual([String(i)]);
    }
  });

  it('EXP-20, EXP-22: 201 with file_download_url and file_download_url_v2; known_profiles true, false or absent; the rows agree with the segment count and with what the profiles hold', async () => {
    const a = await account();
    await person(a, 'ann@example.com', { points: 150, vip: true });
    await person(a, 'bob@example.com', { points: 50 });
    for (const [cookie, points] of [
      ['cookie-1', 200],
      ['cookie-2', 5],
    ] as const) {
      await ok(
        server.request('POST', `/audience/keyspaces/${WEB}/sections/${SHOP}/profiles`, {
          token: a.token,
          body: { profile_key: cookie },
        }),
        201,
      );
      await ok(
        server.request('PATCH', `/audience/keyspaces/${WEB}/profiles/${cookie}/sections/${SHOP}/attributes`, {
          token: a.token,
          body: { [a.v.points]: points },
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
        204,
      );
    }
    const segment = { timezone: 'UTC', segment_discriminator: BIG };
    const file = async (known?: boolean | null) => {
      const res = await ok(
        server.request('POST', '/audience/profiles/reports/segments', {
          token: a.token,
          body: {
            section_discriminator: SHOP,
            segment,
            ...(known === undefined ? {} : { known_profiles: known }),
            attributes: [{ field_name: 'points', attribute_version_id: a.v.points }],
            tags: [{ field_name: 'vip', tag_discriminator: VIP }],
          },
        }),
        201,
      );
      expect(new URL(res.body.file_download_url_v2).pathname).toBe(
        `/v2${new URL(res.body.file_download_url).pathname}`,
      );
      await whenReady(a, res.body.file_download_url);
      const count = await ok(
        server.request('POST', '/audience/profiles/reports/segments/count', {
          token: a.token,
          body: { section_discriminator: SHOP, segment, known_profiles: known },
        }),
        200,
      );
      const downloaded = await download(a, res.body.file_download_url);
      expect(downloaded.rows).toHaveLength(count.body.profile_count);
      expect(downloaded.header).toEqual(['exportKey', 'points', 'vip']);
      for (const [exportKey, points, vip] of downloaded.rows) {
        const held = await holds(a, exportKey);
        expect([points, vip]).toEqual([String(held.attributes[a.v.points]), held.tags[VIP] ? '1' : '0']);
      }
      return downloaded.rows.map((r) => r[1]).sort();
    };
    expect(await file()).toEqual(['150', '200']);
    expect(await file(null)).toEqual(['150', '200']);
    expect(await file(true)).toEqual(['150']);
    expect(await file(false)).toEqual(['200']);
  });

  const base = { section_discriminator: SHOP, segment: { timezone: 'UTC', segment_discriminator: BIG } };
  const cases: [string, (a: Account) => Record<string, unknown>, number, string, RegExp][] = [
    [
      'EXP-21 section_discriminator missing',
      () => ({ ...base, section_discriminator: undefined }),
      400,
      'AUD-1003',
      /section_discriminator/,
    ],
    ['EXP-21 segment missing', () => ({ ...base, segment: undefined }), 400, 'AUD-1003', /segment/],
    [
      'EXP-21 neither segment_discriminator nor segment_definition',
      () => ({ ...base, segment: { timezone: 'UTC' } }),
      400,
      'AUD-0',
      /segment_discriminator or segment_definition/,
    ],
    [
      'EXP-21 both segment_discriminator and segment_definition',
      () => ({ ...base, segment: { ...base.segment, segment_definition: 'section(1)' } }),
      400,
      'AUD-0',
      /segment_discriminator or segment_definition/,
    ],
    [
      'EXP-21 over 75 attributes',
      (a) => ({
        ...base,
        attributes: Array.from({ length: 76 }, (_, i) => ({ field_name: `a${i}`, attribute_version_id: a.v.points })),
      }),
      413,
      'AUD-1007',
      /attributes/,
    ],
    [
      'EXP-21 over 25 tags',
      () => ({
        ...base,
        tags: Array.from({ length: 26 }, (_, i) => ({ field_name: `t${i}`, tag_discriminator: VIP })),
      }),
      413,
      'AUD-1007',
      /tags/,
    ],
    ['EXP-21 a limit of 0', () => ({ ...base, limit: 0 }), 400, 'AUD-0', /limit/],
    ['EXP-22 known_profiles not a boolean', () => ({ ...base, known_profiles: 'yes' }), 400, 'AUD-0', /known_profiles/],
  ];
  for (const [name, body, status, code, detail] of cases) {
    it(`${name}: a problem document and nothing queued`, async () => {
      const a = await account();
      const res = await server.request('POST', '/audience/profiles/reports/segments', {
        token: a.token,
        body: body(a),
      });
      expect(expectProblem(res, status, code)).toMatch(detail);
      await expectNothingQueued(a);
    });
  }
});

describe('poll URLs', () => {
  it('EXP-34 (reading: every export): a request that no longer holds when the worker takes it fails the export, and both forms answer 503 with the reason', async () => {
    const a = await account();
    const pollUrl = await withoutWorker(async () => {
      const url = await requestExport(a, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
      });
      // As if the topic had gone from the definitions since the request: they changed, and the request names it.
      await db.query(
        `update exports set request = jsonb_set(request::jsonb, '{topic_discriminators}', '["${V}.topics.user-created.gone"]')::json where account_id = $1::bigint`,
        [a.accountId],
      );
      await changeDefinitions(a);
      return url;
    });
    let res = await server.request('GET', pollPath(pollUrl), { token: a.token });
    for (let i = 0; i < 200 && res.status === 404; i++) {
      await sleep(25);
      res = await server.request('GET', pollPath(pollUrl), { token: a.token });
    }
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(
      /topic_discriminators\[0\]: topic "com\.vendor1\.topics\.user-created\.gone" not found/,
    );
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 503, 'AUD-1904');
  });

  it('the worker runs the plan made when the export was requested, while the definitions stay as they were: the stored request is not checked again', async () => {
    const a = await account();
    const pollUrl = await withoutWorker(async () => {
      const url = await requestExport(a, {
        section_discriminator: SHOP,
        topic_discriminators: [NEWS],
        channel_discriminator: CH_EMAIL,
      });
      await db.query(
        `update exports set request = jsonb_set(request::jsonb, '{topic_discriminators}', '["${V}.topics.user-created.gone"]')::json where account_id = $1::bigint`,
        [a.accountId],
      );
      return url;
    });
    await whenReady(a, pollUrl);
    expect((await download(a, pollUrl)).header).toEqual(['exportKey', 'Email']);
  });

  it("EXP-32, EXP-33, AUTH-17: an unknown id is 410 (v2: 404), and so is another account's export", async () => {
    const a = await account();
    const other = await account();
    for (const id of ['0b7c2a8e-1111-4c3b-9d2e-5f6a7b8c9d0e', 'not-an-id', '42']) {
      expectProblem(
        await server.request('GET', `/audience/profiles/reports/${id}`, { token: a.token }),
        410,
        'AUD-1902',
      );
      expectProblem(
        await server.request('GET', `/v2/audience/profiles/reports/${id}`, { token: a.token }),
        404,
        'AUD-1903',
      );
    }
    const pollUrl = await requestExport(other, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    await whenReady(other, pollUrl);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902');
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 404, 'AUD-1903');
  });

  it('EXP-36: Accept-Encoding gzip gives Content-Encoding gzip, which decompresses to the file; without it the file is not compressed', async () => {
    const pollUrl = await requestExport(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
      attributes: [{ field_name: 'points', attribute_version_id: shop.v.points }],
    });
    await whenReady(shop, pollUrl);
    const auth = { authorization: `Bearer ${shop.token}` };
    const gzipped = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'gzip, deflate' });
    const plain = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'identity' });
    const refused = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'gzip;q=0' });
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toBe(CSV);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(refused.headers['content-encoding']).toBeUndefined();
    expect(zlib.gunzipSync(gzipped.body).toString()).toBe(plain.body.toString());
    expect(refused.body.toString()).toBe(plain.body.toString());
    expect(parseCsv(plain.body)).toHaveLength(7);
    // A count's result too.
    const countUrl = await requestExport(
      shop,
      { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL },
      'consents/count',
    );
    await whenReady(shop, countUrl);
    const count = await rawGet(pollPath(countUrl), { ...auth, 'accept-encoding': 'gzip' });
    expect(count.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(zlib.gunzipSync(count.body).toString())).toEqual({ profile_count: 6, total_profile_count: 6 });
  });
});

describe('access and limits', () => {
  it('EXP-41: a key restricted to some sections is refused data exports, counts and polls (403)', async () => {
    const a = await account();
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    expect(
      expectProblem(
        await server.request('POST', '/audience/profiles/reports/consents', { token: restricted, body }),
        403,
        'AUD-1107',
      ),
    ).toContain(BLOG);
    expectProblem(
      await server.request('POST', '/audience/profiles/reports/consents/count', { token: restricted, body }),
      403,
      'AUD-1107',
    );
    await expectNothingQueued(a);
    const pollUrl = await requestExport(a, body);
    await whenReady(a, pollUrl);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: restricted }), 403, 'AUD-1107');
    expectProblem(await server.request('GET', v2(pollUrl), { token: restricted }), 403, 'AUD-1107');
  });

  it('LIM-04: at most profile_export_requests_per_second export requests (1 by default); beyond, 429 with Retry-After and nothing queued', async () => {
    const a = await account({ ...NO_LIMITS, profile_export_requests_per_second: 1 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    await requestExport(a, body);
    const refused = await server.request('POST', '/audience/profiles/reports/consents/count', { token: a.token, body });
    expectProblem(refused, 429, 'AUD-1002');
    expect(refused.headers.get('retry-after')).toBe('1');
    const { rows } = await db.query('select count(*)::int as n from exports where account_id = $1::bigint', [
      a.accountId,
    ]);
    expect(rows[0].n).toBe(1);
    server.clock.advance(1000);
    await requestExport(a, body, 'consents/count');
  });

  it('LIM-04: export requests refused for their input (400) spend none of the 1 a second', async () => {
    const a = await account({ ...NO_LIMITS, profile_export_requests_per_second: 1 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    const post = (b: unknown) =>
      server.request('POST', '/audience/profiles/reports/consents/count', { token: a.token, body: b });
    expectProblem(await post({ ...body, topic_discriminators: [] }), 400);
    expectProblem(await post({ ...body, section_discriminator: 42 }), 400);
    await requestExport(a, body, 'consents/count');
    expectProblem(await post(body), 429, 'AUD-1002');
    server.clock.advance(1000);
  });

  it('LIM-06: at most export_downloads_per_minute polls (60 by default); beyond, 429', async () => {
    const a = await account({ ...NO_LIMITS, export_downloads_per_minute: 60 });
    const pollUrl = await requestExport(a, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    let served = 0;
    for (let i = 0; i < 60; i++)
      if ((await server.request('GET', v2(pollUrl), { token: a.token })).status < 300) served++;
    expect(served).toBe(60);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 429, 'AUD-1002');
    server.clock.advance(60_000);
    expect((await server.request('GET', v2(pollUrl), { token: a.token })).status).toBeLessThan(300);
  });

  it('LIM-11: at most pending_exports exports in progress per account; beyond, 429 and nothing queued', async () => {
    const a = await account({ ...NO_LIMITS, pending_exports: 2 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    await withoutWorker(async () => {
      await requestExport(a, body);
      await requestExport(a, body, 'consents/count');
      const refused = await server.request('POST', '/audience/profiles/reports/consents', { token: a.token, body });
      expect(expectProblem(refused, 429, 'AUD-1905')).toMatch(/at most 2/);
      const { rows } = await db.query(
        'select (select count(*) from exports where account_id = $1::bigint)::int as exports, (select count(*) from jobs where account_id = $1::bigint)::int as jobs',
        [a.accountId],
      );
      expect(rows[0]).toEqual({ exports: 2, jobs: 2 });
    });
    // Once they are ready, the places are free again.
    const { rows } = await db.query('select export_id::text from exports where account_id = $1::bigint', [a.accountId]);
    for (const r of rows) await whenReady(a, `${server.url}/audience/profiles/reports/${r.export_id}`);
    await requestExport(a, body);
  });
});

// Last: it moves the clock a day on, past the life of every token issued before.
describe('expiry', () => {
  it('EXP-32, EXP-33, EXP-35, ERR-16: in progress 404 (v2 202); ready 200 any number of times for a day; then 410 in both forms, and the sweeper removes the file', async () => {
    const a = await account();
    await person(a, 'ann@example.com', { consents: [[NEWS, CH_EMAIL, 'opt-in']] });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    const pollUrl = await withoutWorker(async () => {
      const url = await requestExport(a, body);
      expect(expectProblem(await server.request('GET', pollPath(url), { token: a.token }), 404, 'AUD-1901')).toMatch(
        /in progress/,
      );
      const inProgress = await server.request('GET', v2(url), { token: a.token });
      expect(inProgress.status).toBe(202);
      expect(inProgress.text).toBe('');
      return url;
    });
    await whenReady(a, pollUrl);
    const first = await download(a, pollUrl);
    expect(first.rows.map((r) => r[1])).toEqual(['ann@example.com']);
    const id = pollPath(pollUrl).split('/').pop()!;
    const file = path.join(server.services.config.dataDir, 'files', 'exports', a.accountId, `${id}.csv.gz`);
    expect(fs.existsSync(file)).toBe(true);
    server.clock.advance(DAY - 1000);
    expect(await download(a, pollUrl)).toEqual(first);
    expect((await server.request('GET', v2(pollUrl), { token: a.token })).status).toBe(200);
    server.clock.advance(1000);
    // Tokens live a day too: a new one.
    a.token = await server.token(await server.createKey(a.accountId));
    expect(expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902')).toMatch(
      /no longer available/,
    );
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 410, 'AUD-1902');
    // The sweeper's job is due a day after the export became ready, by the database's clock, which the test clock does not move.
    const { rowCount } = await db.query(
      "update jobs set run_at = now() where account_id = $1::bigint and kind = 'export-sweep'",
      [a.accountId],
    );
    expect(rowCount).toBe(1);
    for (let i = 0; i < 200 && fs.existsSync(file); i++) await sleep(25);
    expect(fs.existsSync(file)).toBe(false);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902');
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 410, 'AUD-1902');
  });
});

describe('in an S3-compatible bucket', () => {
  let onS3: TestServer;
  serverOnS3(
    () => server,
    (s) => {
      onS3 = s;
    },
  );

  it('the file is streamed into the bucket and served from there', async () => {
    const { accountId, token } = await onS3.login(MANIFEST, NO_LIMITS);
    await ok(
      onS3.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, {
        token,
        body: { profile_key: 'ann@example.com' },
      }),
      201,
    );
    await ok(
      onS3.request('POST', `/v2/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${SHOP}/consents`, {
        token,
        body: { topic_discriminator: NEWS, channel_discriminator: CH_EMAIL, type: 'opt-in', reason: 'test' },
      }),
      201,
    );
    const created = await ok(
      onS3.request('POST', '/audience/profiles/reports/consents', {
        token,
        body: { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL },
      }),
      201,
    );
    const path = new URL(created.body.poll_url).pathname;
    let res = await onS3.request('GET', path, { token });
    for (let i = 0; i < 400 && res.status === 404; i++) {
      await sleep(25);
      res = await onS3.request('GET', path, { token });
    }
    expect(res.status, res.text).toBe(200);
    const [header, ...rows] = parseCsv(res.text) as string[][];
    expect(header).toEqual(['exportKey', 'Email']);
    expect(rows.map((r) => r[1])).toEqual(['ann@example.com']);
    expect(await onS3.services.files.exists(`exports/${accountId}/${path.split('/').pop()}.csv.gz`)).toBe(true);
  });
});

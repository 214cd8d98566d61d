import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  CH_EMAIL,
  CH_SMS,
  CRM,
  DAILY,
  EXPORT,
  exportHelpers,
  MEMBERS,
  NEWS,
  pollPath,
  SHOP,
  SMS_OFFERS,
  V,
  VIP,
} from '../../test/exports.ts';
import { maySend } from '../consents/consents.ts';
import { locate } from '../profiles/locate.ts';
import { accountScope } from '../services.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const { account, ok, requestExport, whenReady, download, holds, shopAccount } = exportHelpers(() => ({
  server,
  db,
}));

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
    if (
      await maySend(server.services.pool, scope, canonicalId, {
        topic_discriminator: topic,
        channel_discriminator: channel,
        section_discriminator: SHOP,
      })
    )
      return true;
  return false;
}

/** The people of the shared account: who matches which segment, and who may be sent to. */
let shop: Account;

beforeAll(async () => {
  shop = await shopAccount();
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

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { type Account, BIG, CH_EMAIL, CRM, DAILY, exportHelpers, NEWS, SHOP, VIP } from '../../test/exports.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const { account, ok, requestExport, whenReady, download, expectNothingQueued, holds } = exportHelpers(() => ({
  server,
  db,
}));

async function exportFile(a: Account, body: unknown, kind = 'consents') {
  const pollUrl = await requestExport(a, body, kind);
  await whenReady(a, pollUrl);
  return download(a, pollUrl);
}

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
      'AUD-1923',
      /either segment_discriminators or segment_definitions/,
    ],
    [
      'EXP-18 no segment named',
      (a) => ({ ...base(a), segments: { timezone: 'UTC', segment_definitions: {} } }),
      400,
      'AUD-1924',
      /segments\.segment_definitions: name at least one segment/,
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

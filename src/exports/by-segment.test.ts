import { parse as parseCsv } from 'csv-parse/sync';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { type Account, BIG, EMAIL, exportHelpers, pollPath, SHOP, V, VIP } from '../../test/exports.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const { account, ok, person, whenReady, rawGet, download, expectNothingQueued, holds } = exportHelpers(() => ({
  server,
  db,
}));

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
      'AUD-1714',
      /segment_discriminator or segment_definition/,
    ],
    [
      'EXP-21 both segment_discriminator and segment_definition',
      () => ({ ...base, segment: { ...base.segment, segment_definition: 'section(1)' } }),
      400,
      'AUD-1714',
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

import { once } from 'node:events';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { parse as parseCsv } from 'csv-parse/sync';
import ExcelJS from 'exceljs';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  CH_EMAIL,
  CSV,
  EMAIL,
  exportHelpers,
  MANIFEST,
  MEMBERS,
  NEWS,
  NO_LIMITS,
  pollPath,
  SHOP,
  sleep,
  V,
  VIP,
} from '../../test/exports.ts';
import { readWhen, STATE_BOUND_MS, until } from '../../test/until.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { jsonFromCsv, ThreadSlots, XLSX_TYPE, xlsxFromCsv } from './formats.ts';

// The Excel and JSON forms of the CSV exports (SPEC §4.7, EXP-38, EXP-39; docs/exports.md "Excel
// and JSON forms"): through the real HTTP interface, each read back (the workbook with exceljs) and
// compared row by row with the CSV of the same export; and the streaming writer itself.

const NOTE = `${V}.attributes.user-created.note`;
const [shopSection, ...otherSections] = MANIFEST.sections!;
const NOTES_MANIFEST: Manifest = {
  ...MANIFEST,
  sections: [
    { ...shopSection, attributes: [...shopSection.attributes!, { name: 'Note', versions: [{ type: ['Text'] }] }] },
    ...otherSections,
  ],
};
/** Texts a spreadsheet could get wrong: separators, quotes, line breaks, leading zeros, a formula, letters beyond ASCII. */
const NOTES = ['plain', 'comma, "quoted"', 'two\nlines', '0042', '=1+1', 'ünïcødé ✓ 日本', ' padded '];

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});
const { account, ok, person, requestExport, whenReady, rawGet } = exportHelpers(() => ({ server, db }));

/** A ready export's answer to a GET with these headers: status, headers, body bytes as sent. */
async function get(a: Account, pollUrl: string, headers: Record<string, string> = {}) {
  const res = await rawGet(pollPath(pollUrl), { authorization: `Bearer ${a.token}`, ...headers });
  expect(res.status, res.body.toString()).toBe(200);
  return res;
}

/** The rows of a workbook's sheets, read back with exceljs: each sheet's rows as text cells, an empty cell as "". */
async function sheets(bytes: Buffer): Promise<string[][][]> {
  const workbook = new ExcelJS.Workbook();
  await workbook.xlsx.load(bytes as unknown as ArrayBuffer);
  return workbook.worksheets.map((sheet) => {
    const width = sheet.getRow(1).cellCount;
    const rows: string[][] = [];
    sheet.eachRow({ includeEmpty: true }, (row) => {
      rows.push(
        Array.from({ length: width }, (_, i) => {
          const value = row.getCell(i + 1).value;
          return value === null || value === undefined ? '' : String(value);
        }),
      );
    });
    return rows;
  });
}

let shop: Account;
beforeAll(async () => {
  shop = await account(NO_LIMITS, NOTES_MANIFEST);
  for (const [i, note] of NOTES.entries()) {
    const email = `p${i}@example.com`;
    await person(shop, email, {
      points: i * 60,
      member: i % 2 === 0,
      vip: i % 3 === 0,
      consents: i % 2 === 0 ? [[NEWS, CH_EMAIL, 'opt-in']] : [],
    });
    await ok(
      server.request('PATCH', `/v2/audience/keyspaces/${EMAIL}/profiles/${email}/sections/${SHOP}/attributes`, {
        token: shop.token,
        body: { [NOTE]: note },
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      204,
    );
  }
  // Two profiles sharing a note, for the duplicate export; and one with no values (empty cells).
  await person(shop, 'twin@example.com', { points: 1 });
  await ok(
    server.request('PATCH', `/v2/audience/keyspaces/${EMAIL}/profiles/twin@example.com/sections/${SHOP}/attributes`, {
      token: shop.token,
      body: { [NOTE]: 'plain' },
      headers: { 'content-type': 'application/merge-patch+json' },
    }),
    204,
  );
  await person(shop, 'blank@example.com');
});

describe('Excel form of the CSV exports', () => {
  const columns = () => ({
    attributes: [
      { field_name: 'note', attribute_version_id: shop.v.note },
      { field_name: 'points', attribute_version_id: shop.v.points },
    ],
    tags: [{ field_name: 'vip', tag_discriminator: VIP }],
  });
  const consentExport = () => ({
    section_discriminator: SHOP,
    topic_discriminators: [NEWS],
    channel_discriminator: CH_EMAIL,
    segments: { timezone: 'UTC', segment_discriminators: { big: BIG, members: MEMBERS }, filter: 'big | !big' },
    ...columns(),
  });

  it("EXP-38: Accept of the spreadsheet type gives an .xlsx whose rows, read back, are the CSV's of the same export row by row, for the consent, duplicate and segment exports", async () => {
    const sectionId = (
      await ok(server.request('GET', '/audience/sections', { token: shop.token }), 200)
    ).body.items.find((s: { discriminator: string }) => s.discriminator === SHOP).id;
    const kinds: [string, Record<string, unknown>][] = [
      ['consents', consentExport()],
      [
        'duplicates',
        { section_discriminator: SHOP, find_duplicates_by_attribute_version_id: shop.v.note, ...columns() },
      ],
      [
        'segments',
        {
          section_discriminator: SHOP,
          segment: { timezone: 'UTC', segment_definition: `section(${sectionId}).attribute(${shop.v.points}).gte(0)` },
          ...columns(),
        },
      ],
    ];
    for (const [kind, body] of kinds) {
      const created = await ok(
        server.request('POST', `/audience/profiles/reports/${kind}`, { token: shop.token, body }),
        201,
      );
      const pollUrl = created.body.poll_url ?? created.body.file_download_url;
      await whenReady(shop, pollUrl);
      const csv = await get(shop, pollUrl);
      expect(csv.headers['content-type']).toBe(CSV);
      const rows = parseCsv(csv.body) as string[][];
      const xlsx = await get(shop, pollUrl, { accept: XLSX_TYPE });
      expect(xlsx.headers['content-type'], kind).toBe(XLSX_TYPE);
      expect(xlsx.headers['content-encoding']).toBeUndefined();
      expect(xlsx.headers.vary).toBe('accept, accept-encoding');
      // A zip: its local file header.
      expect(xlsx.body.subarray(0, 4)).toEqual(Buffer.from([0x50, 0x4b, 0x03, 0x04]));
      const workbook = await sheets(xlsx.body);
      expect(workbook, kind).toEqual([rows]);
      expect(rows.length, kind).toBeGreaterThan(2);
      // The texts come through as they are, not as numbers or formulas.
      if (kind !== 'duplicates')
        expect(
          workbook[0].map((r) => r[1]),
          kind,
        ).toEqual(expect.arrayContaining(NOTES));
    }
  });

  it('EXP-36, EXP-38: with Accept-Encoding gzip the workbook comes gzip-compressed and decompresses to the same rows', async () => {
    const pollUrl = await requestExport(shop, consentExport());
    await whenReady(shop, pollUrl);
    const plain = await get(shop, pollUrl, { accept: XLSX_TYPE });
    const gzipped = await get(shop, pollUrl, { accept: XLSX_TYPE, 'accept-encoding': 'gzip' });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toBe(XLSX_TYPE);
    expect(await sheets(zlib.gunzipSync(gzipped.body))).toEqual(await sheets(plain.body));
  });

  it('EXP-37, EXP-38: Accept chooses by weight among CSV and Excel; anything else, or a tie, gets the CSV', async () => {
    const pollUrl = await requestExport(shop, consentExport());
    await whenReady(shop, pollUrl);
    const typeFor = async (accept: string) => (await get(shop, pollUrl, { accept })).headers['content-type'];
    expect(await typeFor(`text/csv;q=0.5, ${XLSX_TYPE}`)).toBe(XLSX_TYPE);
    expect(await typeFor(`application/*`)).toBe(XLSX_TYPE);
    expect(await typeFor(`${XLSX_TYPE};q=0.2, text/*;q=0.9`)).toBe(CSV);
    expect(await typeFor(`${XLSX_TYPE};q=0`)).toBe(CSV);
    expect(await typeFor('*/*')).toBe(CSV);
    expect(await typeFor(`text/csv, ${XLSX_TYPE}`)).toBe(CSV);
    // Clients send Accept: application/json on every call; the consent export has no JSON form.
    expect(await typeFor('application/json')).toBe(CSV);
  });

  it('EXP-40: the event export is JSON whatever Accept asks', async () => {
    const created = await ok(
      server.request('POST', '/audience/profiles/exports', {
        token: shop.token,
        body: { attributes: [{ section_discriminator: SHOP, attribute_version_id: shop.v.note }] },
      }),
      201,
    );
    await whenReady(shop, created.body.file_download_url);
    const res = await get(shop, created.body.file_download_url, { accept: XLSX_TYPE });
    expect(res.headers['content-type']).toMatch(/^application\/json\b/);
    expect(Object.keys(JSON.parse(res.body.toString()))).toHaveLength(NOTES.length + 2);
  });
});

describe('JSON form of the segment export (beta)', () => {
  it('EXP-39: Accept: application/json gives the rows as an array of objects, each cell by its column, as the CSV of the same export holds them', async () => {
    const created = await ok(
      server.request('POST', '/audience/profiles/reports/segments', {
        token: shop.token,
        body: {
          section_discriminator: SHOP,
          segment: { timezone: 'UTC', segment_discriminator: MEMBERS },
          attributes: [
            { field_name: 'note', attribute_version_id: shop.v.note },
            { field_name: 'birthday', attribute_version_id: shop.v.birthday },
          ],
          tags: [{ field_name: 'vip', tag_discriminator: VIP }],
        },
      }),
      201,
    );
    const pollUrl = created.body.file_download_url;
    await whenReady(shop, pollUrl);
    const [header, ...rows] = parseCsv((await get(shop, pollUrl)).body) as string[][];
    const json = await get(shop, pollUrl, { accept: 'application/json' });
    expect(json.headers['content-type']).toMatch(/^application\/json\b/);
    const items = JSON.parse(json.body.toString()) as Record<string, string>[];
    expect(items).toEqual(rows.map((row) => Object.fromEntries(header.map((column, i) => [column, row[i]]))));
    expect(items).toHaveLength(Math.ceil(NOTES.length / 2));
    const gzipped = await get(shop, pollUrl, { accept: 'application/json', 'accept-encoding': 'gzip' });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(zlib.gunzipSync(gzipped.body).toString())).toEqual(items);
  });
});

describe('the streaming workbook writer', () => {
  /** A stored CSV file (gzip-compressed) of `count` rows made as they are read, and how many have been read. */
  function storedCsv(count: number) {
    const progress = { rows: 0 };
    const text = (async function* () {
      yield 'exportKey,points,note\r\n';
      for (let i = 0; i < count; i++) {
        progress.rows++;
        yield `key-${i},${i},note number ${i}\r\n`;
      }
    })();
    const source = Readable.from(text);
    const stored = source.pipe(zlib.createGzip());
    return { stored, source, progress };
  }

  it('adds rows only as fast as the workbook is read: unread, the reading of the CSV stops; closed, the CSV is closed', async () => {
    const { stored, source, progress } = storedCsv(2_000_000);
    const out = xlsxFromCsv(stored);
    // Stalled: the rows' source holds a full buffer that nothing takes, and no row came over half a
    // second. A workbook thread that a busy machine starves stalls it too, and goes on later: what
    // is checked is how far the CSV was read, not that no row comes after. The zip holds some tens
    // of MB before it stops taking rows (docs/exports.md "Memory"), a hundred thousand rows or so here.
    const stalled = await readWhen(
      'the reading of the CSV stalled',
      async () => {
        const rows = progress.rows;
        await sleep(500);
        return { rows, full: source.readableLength >= source.readableHighWaterMark && progress.rows === rows };
      },
      (r) => r.full,
      STATE_BOUND_MS,
    );
    expect(stalled.rows).toBeGreaterThan(0);
    expect(progress.rows).toBeLessThan(500_000);
    const closed = new Promise((resolve) => stored.once('close', resolve));
    out.destroy();
    await closed;
    expect(stored.destroyed).toBe(true);
  });

  it('goes on on a new sheet with the header row when a sheet is full', async () => {
    const out = xlsxFromCsv(storedCsv(5).stored, 3);
    const bytes: Buffer[] = [];
    for await (const chunk of out) bytes.push(chunk as Buffer);
    const header = ['exportKey', 'points', 'note'];
    const row = (i: number) => [`key-${i}`, String(i), `note number ${i}`];
    expect(await sheets(Buffer.concat(bytes))).toEqual([
      [header, row(0), row(1)],
      [header, row(2), row(3)],
      [header, row(4)],
    ]);
  });

  it('runs at most as many workbook threads at once as it has slots: the others wait, and one closed while waiting never starts', async () => {
    const slots = new ThreadSlots(1);
    const first = xlsxFromCsv(storedCsv(2_000_000).stored, undefined, slots);
    const second = xlsxFromCsv(storedCsv(5).stored, undefined, slots);
    const third = xlsxFromCsv(storedCsv(5).stored, undefined, slots);
    await once(first, 'readable');
    expect([slots.running, slots.waiting]).toEqual([1, 2]);
    third.destroy();
    first.destroy();
    const bytes: Buffer[] = [];
    for await (const chunk of second) bytes.push(chunk as Buffer);
    const row = (i: number) => [`key-${i}`, String(i), `note number ${i}`];
    expect(await sheets(Buffer.concat(bytes))).toEqual([
      [['exportKey', 'points', 'note'], row(0), row(1), row(2), row(3), row(4)],
    ]);
    // The second's thread ends after its last bytes; the third then takes the slot and gives it up unstarted.
    await until('the slots given back', () => slots.running === 0, STATE_BOUND_MS);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('fails the workbook when the stored file cannot be read', async () => {
    const out = xlsxFromCsv(Readable.from([Buffer.from('not gzip at all')]));
    await expect(
      (async () => {
        for await (const _ of out) {
          /* read to the end */
        }
      })(),
    ).rejects.toThrow(/header|gzip|incorrect/i);
  });

  it('fails the JSON form when the stored file cannot be read', async () => {
    const out = jsonFromCsv(Readable.from([Buffer.from('not gzip at all')]));
    await expect(
      (async () => {
        for await (const _ of out) {
          /* read to the end */
        }
      })(),
    ).rejects.toThrow(/header|gzip|incorrect/i);
  });
});

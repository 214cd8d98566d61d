import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { readCsv } from './csv.ts';

/** The records of `text` read in chunks of `size` bytes, with their lines. */
async function read(text: string, size: number): Promise<[string[], number][]> {
  const bytes = Buffer.from(text);
  async function* chunks() {
    for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
  }
  const out: [string[], number][] = [];
  for await (const records of readCsv(chunks(), ',')) for (const { record, line } of records) out.push([record, line]);
  return out;
}

/** What csv-parse read with the options imports used before readCsv, the line being the record's first. */
function csvParse(text: string): [string[], number][] {
  let doubleCounted = 0;
  const records: { record: string[]; info: { lines: number } }[] = parse(text, {
    bom: true,
    delimiter: ',',
    relax_column_count: true,
    relax_quotes: true,
    skip_empty_lines: true,
    info: true,
    trim: false,
  }) as unknown as { record: string[]; info: { lines: number } }[];
  return records.map(({ record, info }) => {
    const breaks = record.reduce((n, cell) => n + (cell.match(/\r\n|\r|\n/g)?.length ?? 0), 0);
    doubleCounted += record.reduce((n, cell) => n + (cell.match(/\r\n/g)?.length ?? 0), 0);
    return [record, info.lines - doubleCounted - breaks];
  });
}

describe('readCsv (docs/imports.md "The file")', () => {
  it('IMP-27 reads quoted fields, a BOM, CRLF, empty lines and quotes in data, each record with its first line', async () => {
    const text =
      '\uFEFFemail,name\r\n"a@x.example","Ann, ""the"" first"\r\n\r\nb@x.example,"two\r\nlines"\r\nc"d@x.example,"q"uoted\r\n';
    for (const size of [1, 2, 5, 1000]) {
      expect(await read(text, size)).toEqual([
        [['email', 'name'], 1],
        [['a@x.example', 'Ann, "the" first'], 2],
        [['b@x.example', 'two\r\nlines'], 4],
        [['c"d@x.example', '"q"uoted'], 6],
      ]);
    }
  });

  it('IMP-27 fails a file that ends inside a quoted field', async () => {
    await expect(read('a,b\n"open,b\n', 4)).rejects.toMatchObject({ code: 'CSV_QUOTE_NOT_CLOSED' });
  });

  it('IMP-27 reads random files as csv-parse did, whatever the chunks', async () => {
    let seed = 17;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let file = 0; file < 3000; file++) {
      const eol = ['\n', '\r\n', '\r'][file % 3];
      const alphabet = ['a', 'ø', ' ', ',', ',', '"', '"', eol];
      let text = (file % 2 ? '\uFEFF' : '') + 'h,i' + eol;
      for (let i = random(30); i > 0; i--) text += alphabet[random(alphabet.length)];
      let expected: [string[], number][] | string;
      try {
        expected = csvParse(text);
      } catch (err) {
        expected = (err as { code: string }).code;
      }
      for (const size of [1, 3, 64]) {
        const got = await read(text, size).catch((err: { code: string }) => err.code);
        expect(got, JSON.stringify(text)).toEqual(expected);
      }
    }
  });
});

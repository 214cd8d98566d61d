import { once, type EventEmitter } from 'node:events';
import { PassThrough, pipeline, Readable } from 'node:stream';
import zlib from 'node:zlib';
import { parse } from 'csv-parse';
import type ExcelJS from 'exceljs';

/**
 * The forms a stored export file is sent in (SPEC §4.7; docs/exports.md "Excel and JSON forms"):
 * the CSV as stored, or an Excel workbook or a JSON array of the same rows, produced from it while
 * it is sent, streamed (never whole in memory).
 */

/** SPEC §4.7 (EXP-37): CSV with a header row. */
export const CSV_TYPE = 'text/csv;charset=UTF-8;header=present';
/** SPEC §4.7 (EXP-38): Excel. */
export const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
/** SPEC §4.7 (EXP-39, EXP-40): the JSON form of the segment export, and the event export's file. */
export const JSON_TYPE = 'application/json';

/** Excel's largest sheet: its header row and 1,048,575 rows of the file; the rows go on on a new sheet. */
const EXCEL_SHEET_ROWS = 1_048_576;
/** The JSON form is handed on in pieces of about this many characters, not one per row. */
const PIECE = 64 * 1024;

/** The records of a stored (gzip-compressed) CSV file, its header row first; a failing read fails the iteration. */
function csvRecords(stored: Readable): AsyncIterable<string[]> {
  const records = parse();
  pipeline(stored, zlib.createGunzip(), records, () => {});
  return records;
}

/** What ExcelJS writes a sheet's XML into: a Writable of the zip, whose state says when it is full. */
type ZipInput = EventEmitter & { _writableState: { needDrain: boolean } };

/**
 * The zip's input of a sheet being written. ExcelJS (4.4) hands a sheet's XML to the zip through
 * a StreamBuf that writes to it without waiting, so rows added faster than the zip compresses them,
 * or than the client reads the zip, pile up in memory (142 MB for a million rows read by a fast
 * client, 217 MB by one reading 2 MB/s, against 19 and 32 MB paced: docs/exports.md "Memory"). Reached through ExcelJS's internals, for
 * want of another way; undefined if ExcelJS stops having it (formats.test.ts then fails).
 */
function zipInputOf(sheet: ExcelJS.Worksheet): ZipInput | undefined {
  const input = (sheet as unknown as { stream?: { pipes?: Partial<ZipInput>[] } }).stream?.pipes?.[0];
  return input?._writableState ? (input as ZipInput) : undefined;
}

/**
 * The rows of a stored CSV file as an Excel workbook (EXP-38), written with ExcelJS's streaming
 * writer as the file is read: every cell as text, as in the CSV (so leading zeros, long ids and
 * phone numbers stay as they are), an empty cell left empty; the header row on every sheet. Rows
 * are added only as fast as the zip takes them, and the reading stops when the answer is closed.
 * `sheetRows` is Excel's limit; a test gives a smaller one.
 */
export function xlsxFromCsv(stored: Readable, sheetRows = EXCEL_SHEET_ROWS): Readable {
  const out = new PassThrough();
  const closed = new AbortController();
  out.once('close', () => closed.abort());
  // A closed answer stops the loop with an AbortError (and the loop's end stops the read); a failing read fails the answer.
  writeWorkbook(csvRecords(stored), out, sheetRows, closed.signal).catch((err: Error) => {
    if (!closed.signal.aborted) out.destroy(err);
  });
  return out;
}

/** Writes the records (header first) as a workbook into `out`, waiting for the zip whenever it is full; `signal` stops the wait. */
async function writeWorkbook(records: AsyncIterable<string[]>, out: PassThrough, sheetRows: number, signal: AbortSignal): Promise<void> {
  // Loaded by the first Excel download, not at start: ExcelJS and its zip weigh several MB in every API thread.
  const { default: excel } = await import('exceljs');
  const workbook = new excel.stream.xlsx.WorkbookWriter({ stream: out, useSharedStrings: false, useStyles: false });
  let header: string[] | undefined;
  let sheet: ExcelJS.Worksheet | undefined;
  let sheets = 0;
  let rows = 0;
  const startSheet = () => {
    sheet?.commit();
    sheets++;
    sheet = workbook.addWorksheet(sheets === 1 ? 'export' : `export ${sheets}`);
    sheet.addRow(header ?? []).commit();
    rows = 1;
    return sheet;
  };
  for await (const record of records) {
    if (header === undefined) {
      header = record;
      continue;
    }
    const current = sheet === undefined || rows === sheetRows ? startSheet() : sheet;
    current.addRow(record.map((cell) => (cell === '' ? null : cell))).commit();
    rows++;
    const input = zipInputOf(current);
    if (input?._writableState.needDrain) await once(input, 'drain', { signal });
  }
  // A file of no rows is still a workbook, with its header row.
  (sheet ?? startSheet()).commit();
  await workbook.commit();
}

/**
 * The rows of a stored CSV file as a JSON array of objects, each cell by its column's name, as
 * text as in the CSV (EXP-39), written as the file is read.
 */
export function jsonFromCsv(stored: Readable): Readable {
  return Readable.from(jsonArray(csvRecords(stored)));
}

async function* jsonArray(records: AsyncIterable<string[]>): AsyncGenerator<string> {
  let header: string[] | undefined;
  let text = '[';
  let first = true;
  for await (const record of records) {
    if (header === undefined) {
      header = record;
      continue;
    }
    const columns = header;
    text += (first ? '' : ',') + JSON.stringify(Object.fromEntries(record.map((cell, i) => [columns[i], cell])));
    first = false;
    if (text.length >= PIECE) {
      yield text;
      text = '';
    }
  }
  yield `${text}]`;
}

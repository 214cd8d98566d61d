import { once, type EventEmitter } from 'node:events';
import os from 'node:os';
import { PassThrough, pipeline, Readable } from 'node:stream';
import { pipeline as pipelined } from 'node:stream/promises';
import type { ReadableStream as WebReadable, WritableStream as WebWritable } from 'node:stream/web';
import { Worker as Thread } from 'node:worker_threads';
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
  // Nothing to do with an error here: pipeline fails every stream with it, `records` too, whose
  // iteration (the caller's) then throws it.
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
 * The heap of a thread that writes a workbook. ExcelJS allocates several objects per cell that die
 * at once; with the API thread's defaults V8 let them pile up to 411 MB of process for a million rows
 * (docs/exports.md "Memory"). Capped, the same workbook is written in about the same time with a
 * live heap under 20 MB, and a conversion that would exceed the cap fails its download, not the process.
 */
const WORKBOOK_HEAP = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 96 };

/** What a workbook thread (xlsx-thread.ts) is given: the stored file's bytes in, the workbook's out. */
export interface WorkbookJob {
  stored: WebReadable<Uint8Array>;
  out: WebWritable<Uint8Array>;
  sheetRows: number;
}

/**
 * A count of threads that may run at once; a call beyond it waits for one to end. Each workbook
 * thread may use its capped heap (WORKBOOK_HEAP, about 100 MB), so without a bound, downloads of
 * Excel forms started together could take the process's memory; beyond it they wait in turn.
 */
export class ThreadSlots {
  readonly size: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.size = size;
  }

  /** Threads running, and calls waiting for one to end. */
  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves when a thread may start; its `release` must then be called once, when it has ended. */
  async acquire(): Promise<() => void> {
    if (this.#running < this.size) this.#running++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The slot passes to the next waiting call, if any, without being counted free in between.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    };
  }
}

/** How long a workbook thread asked to exit may take before it is terminated. */
const THREAD_EXIT_MS = 5000;

/** The workbook threads of the process at once: one per CPU, at least two and at most four. */
const workbookSlots = new ThreadSlots(Math.max(2, Math.min(4, os.availableParallelism())));

/**
 * The rows of a stored CSV file as an Excel workbook (EXP-38), written with ExcelJS's streaming
 * writer as the file is read, in a thread of its own with a small heap (WORKBOOK_HEAP), once one
 * of the `slots` is free: every cell as text, as in the CSV (so leading zeros, long ids and phone
 * numbers stay as they are), an empty cell left empty; the header row on every sheet. The file's
 * bytes and the workbook's cross to and from the thread as web streams, which carry the
 * back-pressure of the client's reading; the answer's close cancels them and the thread ends.
 * `sheetRows` is Excel's limit; a test gives a smaller one, and slots of its own.
 */
export function xlsxFromCsv(stored: Readable, sheetRows = EXCEL_SHEET_ROWS, slots = workbookSlots): Readable {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const out = Readable.fromWeb(readable as WebReadable<Uint8Array>);
  let thread: Thread | undefined;
  // A closed answer ends the thread and the file's reading here, since a cancel does not reliably
  // cross the thread from its end of the streams; one closed while waiting never starts its thread.
  // The thread is asked to exit, between two of its turns: terminate() stops it anywhere, and one
  // stopped inside the zip's zlib constructor aborted the whole process as the thread was cleaned up
  // (node_zlib.cc "close before init", seen in CI). terminate() stays as a last resort.
  out.once('close', () => {
    stored.destroy();
    if (!thread) return;
    const running = thread;
    running.postMessage('exit');
    const last = setTimeout(() => void running.terminate(), THREAD_EXIT_MS).unref();
    running.once('exit', () => clearTimeout(last));
  });
  void slots.acquire().then((release) => {
    if (out.destroyed) return release();
    const job: WorkbookJob = { stored: pulled(stored), out: writable, sheetRows };
    try {
      thread = new Thread(new URL('./xlsx-thread.ts', import.meta.url), {
        workerData: job,
        transferList: [job.stored, job.out],
        resourceLimits: WORKBOOK_HEAP,
      });
    } catch (err) {
      release();
      out.destroy(err as Error);
      return;
    }
    // A thread that dies (its heap cap, a bug) fails the answer.
    thread.once('error', (err) => out.destroy(err));
    thread.once('exit', release);
  });
  return out;
}

/**
 * A web stream of a Node stream's chunks that reads one only when the other side asks for it
 * (Readable.toWeb read ahead of the thread's reading, so a slow client left the whole file in memory).
 */
function pulled(stored: Readable): WebReadable<Uint8Array> {
  const chunks = stored[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await chunks.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value as Uint8Array);
      },
      cancel: () => void stored.destroy(),
    },
    { highWaterMark: 0 },
  ) as WebReadable<Uint8Array>;
}

/**
 * Writes the workbook of a stored CSV file into `out`, waiting for the zip whenever it is full; a
 * closed `out` stops the reading. Run by xlsx-thread.ts.
 */
export async function writeWorkbookOf(stored: Readable, out: PassThrough, sheetRows: number): Promise<void> {
  const closed = new AbortController();
  out.once('close', () => closed.abort());
  try {
    // The first failure, the stored file's (not gzip, not CSV) or the workbook's, is the catch's.
    await pipelined(stored, zlib.createGunzip(), parse(), (records: AsyncIterable<string[]>) =>
      writeWorkbook(records, out, sheetRows, closed.signal),
    );
  } catch (err) {
    if (!closed.signal.aborted) out.destroy(err as Error);
  }
}

/** Writes the records (header first) as a workbook into `out`, waiting for the zip whenever it is full; `signal` stops the wait. */
async function writeWorkbook(
  records: AsyncIterable<string[]>,
  out: PassThrough,
  sheetRows: number,
  signal: AbortSignal,
): Promise<void> {
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

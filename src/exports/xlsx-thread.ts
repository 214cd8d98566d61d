import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parentPort, workerData } from 'node:worker_threads';
import { writeWorkbookOf, type WorkbookJob } from './formats.ts';

// A thread that writes one workbook (xlsxFromCsv in formats.ts) and ends.
const job = workerData as WorkbookJob;
// Its answer closed (xlsxFromCsv): exit between two turns, never inside one. Unref'd, so that the
// thread still ends by itself when the workbook is written.
parentPort?.once('message', () => process.exit(0));
parentPort?.unref();
const out = new PassThrough();
// A failure of the workbook (writeWorkbookOf fails `out` with it) or of its way out fails the
// thread with it, which fails the answer (xlsxFromCsv).
await Promise.all([
  pipeline(out, Writable.fromWeb(job.out)),
  writeWorkbookOf(Readable.fromWeb(job.stored), out, job.sheetRows),
]);

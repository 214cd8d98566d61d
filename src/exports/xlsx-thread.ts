import { PassThrough, pipeline, Readable, Writable } from 'node:stream';
import { parentPort, workerData } from 'node:worker_threads';
import { writeWorkbookOf, type WorkbookJob } from './formats.ts';

// A thread that writes one workbook (xlsxFromCsv in formats.ts) and ends.
const job = workerData as WorkbookJob;
// Its answer closed (xlsxFromCsv): exit between two turns, never inside one. Unref'd, so that the
// thread still ends by itself when the workbook is written.
parentPort?.once('message', () => process.exit(0));
parentPort?.unref();
const out = new PassThrough();
pipeline(out, Writable.fromWeb(job.out), () => {});
await writeWorkbookOf(Readable.fromWeb(job.stored), out, job.sheetRows);

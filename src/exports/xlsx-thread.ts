import { PassThrough, pipeline, Readable, Writable } from 'node:stream';
import type { ReadableStream as WebReadable, WritableStream as WebWritable } from 'node:stream/web';
import { workerData } from 'node:worker_threads';
import { writeWorkbookOf, type WorkbookJob } from './formats.ts';

// A thread that writes one workbook (xlsxFromCsv in formats.ts) and ends.
const job = workerData as WorkbookJob;
const out = new PassThrough();
pipeline(out, Writable.fromWeb(job.out as unknown as WebWritable<Uint8Array>), () => {});
await writeWorkbookOf(Readable.fromWeb(job.stored as WebReadable<Uint8Array>), out, job.sheetRows);

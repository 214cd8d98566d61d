import { StringDecoder } from 'node:string_decoder';

/** A record of a CSV file and the line it starts on (the first line is 1). */
export interface CsvRecord {
  record: string[];
  line: number;
}

/** A fault of the file's CSV; its code starts with `CSV_`, like csv-parse's errors. */
export class CsvError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;

/**
 * The records of a CSV stream, in groups (those completed by each chunk read), as csv-parse read
 * them for imports with `bom`, `relax_column_count`, `relax_quotes` and `skip_empty_lines`: a UTF-8
 * BOM is skipped; records end at LF, CR LF or CR; a field that starts with a quote ends at the
 * quote before a delimiter or a line end (two quotes inside are one); any other quote is data, and
 * a quoted field followed by anything else keeps its quotes as data and goes on to the next
 * delimiter or line end; empty lines are skipped; records may have any number of fields. csv-parse took a sixth of
 * the worker's CPU in a 50 MB import, a function call per byte (docs/benchmarks.md "Imports");
 * this loop looks at each character once and slices fields out of the text.
 */
export async function* readCsv(source: AsyncIterable<Buffer>, delimiter: ',' | ';'): AsyncGenerator<CsvRecord[]> {
  const reader = new CsvReader(delimiter.charCodeAt(0));
  const decoder = new StringDecoder('utf8');
  let first = true;
  for await (const chunk of source) {
    let text = decoder.write(chunk);
    if (first && text.length > 0) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      first = false;
    }
    const records = reader.push(text, false);
    if (records.length > 0) yield records;
  }
  const records = reader.push(decoder.end(), true);
  if (records.length > 0) yield records;
}

/** The parser's state between chunks: the text of an unfinished record, and the line it starts on. */
class CsvReader {
  private readonly delimiter: number;
  private rest = '';
  private line = 1;
  /** Text waiting for more before the unfinished record is read again (so a long one is read a few times, not once per chunk). */
  private waiting: string[] = [];
  private waitingLength = 0;

  constructor(delimiter: number) {
    this.delimiter = delimiter;
  }

  /** Takes the next text of the file (`end`: the last); answers the records it completed. */
  push(next: string, end: boolean): CsvRecord[] {
    this.waiting.push(next);
    this.waitingLength += next.length;
    if (!end && this.waitingLength < this.rest.length) return [];
    const text = this.rest + this.waiting.join('');
    this.waiting = [];
    this.waitingLength = 0;
    const records: CsvRecord[] = [];
    const done = this.read(text, end, records);
    this.rest = text.slice(done);
    if (end && this.rest.length > 0)
      throw new CsvError(
        'CSV_QUOTE_NOT_CLOSED',
        `Quote Not Closed: the parsing is finished with an opening quote at line ${this.line}`,
      );
    return records;
  }

  /** Reads the complete records of `text` into `records`; answers where the first incomplete one starts. */
  private read(text: string, end: boolean, records: CsvRecord[]): number {
    const length = text.length;
    const delimiter = this.delimiter;
    let pos = 0;
    for (;;) {
      // Empty lines.
      while (pos < length) {
        const c = text.charCodeAt(pos);
        if (c === LF) {
          pos++;
        } else if (c === CR) {
          if (pos + 1 === length && !end) return pos;
          pos += text.charCodeAt(pos + 1) === LF ? 2 : 1;
        } else {
          break;
        }
        this.line++;
      }
      if (pos >= length) return pos;
      const start = pos;
      let lines = 0;
      const record: string[] = [];
      let complete = false;
      // One field per turn, starting at pos.
      for (;;) {
        let fieldEnd = -1;
        let value: string | undefined;
        let prefix = '';
        if (text.charCodeAt(pos) === QUOTE) {
          let q = pos + 1;
          let parts: string[] | undefined;
          let from = q;
          for (;;) {
            const close = text.indexOf('"', q);
            if (close === -1 || (close + 1 === length && !end)) return start;
            if (text.charCodeAt(close + 1) === QUOTE) {
              (parts ??= []).push(text.slice(from, close + 1));
              q = from = close + 2;
              continue;
            }
            const piece = text.slice(from, close);
            value = parts ? parts.join('') + piece : piece;
            q = close + 1;
            break;
          }
          lines += countLines(text, pos, q);
          const after = q < length ? text.charCodeAt(q) : -1;
          if (after === delimiter || after === LF || after === CR || after === -1) {
            fieldEnd = q;
          } else {
            // A quoted field followed by more: its quotes are data, and it goes on to the delimiter or line end.
            prefix = `"${value}"`;
            value = undefined;
            pos = q;
          }
        }
        if (value === undefined) {
          let i = pos;
          while (i < length) {
            const c = text.charCodeAt(i);
            if (c === delimiter || c === LF || c === CR) break;
            i++;
          }
          if (i === length && !end) return start;
          value = prefix + text.slice(pos, i);
          fieldEnd = i;
        }
        record.push(value);
        pos = fieldEnd;
        const c = pos < length ? text.charCodeAt(pos) : -1;
        if (c === delimiter) {
          pos++;
          continue;
        }
        if (c === CR) {
          if (pos + 1 === length && !end) return start;
          pos += text.charCodeAt(pos + 1) === LF ? 2 : 1;
        } else if (c === LF) {
          pos++;
        }
        complete = true;
        break;
      }
      if (complete) {
        records.push({ record, line: this.line });
        this.line += lines + 1;
      }
    }
  }
}

/** Line breaks in text[from, to): CR LF, LF and CR each count one. */
function countLines(text: string, from: number, to: number): number {
  let lines = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c === LF) lines++;
    else if (c === CR) {
      lines++;
      if (text.charCodeAt(i + 1) === LF) i++;
    }
  }
  return lines;
}

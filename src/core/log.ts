import fs from 'node:fs';
import os from 'node:os';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export const REDACTED = '[redacted]';

/**
 * What every line of the process's log carries after its time: pino's own default, set here so
 * that the request log, which writes its lines itself (src/http/logging.ts), writes the same.
 */
export const LOG_BASE = { pid: process.pid, hostname: os.hostname() };

/**
 * A logger of the program (JSON lines, pino) at `level`, to `stream` (standard output by default).
 * `redact` guards what log calls might pass: credentials in headers or bodies, and the `detail` of
 * database errors, which quotes the values of a violated constraint. The HTTP transport adds the
 * serializers of its requests and answers (src/http/logging.ts); the worker thread logs its jobs.
 */
export function createLogger(
  level: string,
  stream?: DestinationStream,
  serializers: LoggerOptions['serializers'] = {},
): Logger {
  const options: LoggerOptions = {
    level,
    base: LOG_BASE,
    serializers,
    redact: {
      paths: [
        'headers.authorization',
        'headers.cookie',
        '*.headers.authorization',
        '*.headers.cookie',
        'client_secret',
        '*.client_secret',
        'err.detail',
      ],
      censor: REDACTED,
    },
  };
  return stream ? pino(options, stream) : pino(options);
}

/** How the log's lines are written: JSON lines, or readable lines for a person at a terminal. */
export type LogFormat = 'json' | 'text';

/** pino's levels by number, as the readable line names them. */
const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
/** Terminal colours of the level names (dim below info, yellow, red, white on red); none for info. */
const LEVEL_COLOURS: Record<number, string> = { 10: '2', 20: '2', 40: '33', 50: '31', 60: '37;41' };

/** A field's value as the readable line shows it: a plain word as it is, anything else as JSON. */
const shown = (value: unknown) =>
  typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);

/**
 * One JSON line of the log as a line for a person: the local time, the level, the message, then
 * the other fields as `name=value`, and an error's stack below, indented. A request line reads
 * `GET /path 200 AUD-1 3.2 ms`. The same fields as the JSON line, which the logger and the request
 * log have already redacted (src/http/logging.ts): nothing is added but the layout. The pid and
 * host name of every line are left out; a line that is not JSON is shown as it came.
 */
export function readableLine(json: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json);
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const { level, time, msg, pid: _pid, hostname: _hostname, err, ...rest } = entry;
  const at = new Date(typeof time === 'number' ? time : Date.now());
  const two = (n: number) => String(n).padStart(2, '0');
  const clock = `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
  const name = (LEVEL_NAMES[level as number] ?? String(level)).padEnd(5);
  const code = LEVEL_COLOURS[level as number];
  let text = typeof msg === 'string' ? msg : '';
  const req = rest.req as { method?: string; url?: string; route?: unknown } | undefined;
  const res = rest.res as { statusCode?: number; code?: string; account?: string } | undefined;
  if (msg === 'request completed' && req && res && typeof rest.responseTime === 'number') {
    text = `${req.method} ${req.url} ${res.statusCode}${res.code ? ` ${res.code}` : ''} ${rest.responseTime.toFixed(1)} ms`;
    const { route: _route, method: _method, url: _url, ...client } = req;
    const { statusCode: _status, code: _code, ...answer } = res;
    delete rest.req;
    delete rest.res;
    delete rest.responseTime;
    Object.assign(rest, answer, client);
  }
  const fields = Object.entries(rest)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}=${shown(value)}`)
    .join(' ');
  const error = err as { stack?: string; message?: string; type?: string } | undefined;
  const below = error
    ? `\n    ${(error.stack ?? `${error.type ?? 'Error'}: ${error.message}`).replace(/\n/g, '\n    ')}`
    : '';
  const head = colour && code ? `\x1b[${code}m${name}\x1b[0m` : name;
  return `${clock} ${head} ${text}${fields ? `  ${fields}` : ''}${below}\n`;
}

/**
 * The destination of a log in `format`: for `text`, a stream that writes each JSON line pino (or
 * the request log) gives it to standard output as a readable line, synchronously (a write(2) on
 * the thread, as the request log's); coloured unless NO_COLOR is set. Undefined for `json`: the
 * logger's own destination.
 */
export function logDestination(format: LogFormat): DestinationStream | undefined {
  if (format === 'json') return undefined;
  const colour = !process.env.NO_COLOR;
  return {
    write(lines: string) {
      const text = lines
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => readableLine(line, colour))
        .join('');
      const bytes = Buffer.from(text);
      for (let written = 0; written < bytes.length;) {
        try {
          written += fs.writeSync(1, bytes, written);
        } catch (err) {
          // A terminal in non-blocking mode: wait for it, as pino's synchronous destination does.
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
          Atomics.wait(PAUSE, 0, 0, 1);
        }
      }
    },
  };
}
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

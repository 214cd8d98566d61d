import fs from 'node:fs';
import {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type LogFn } from 'pino';
import { createLogger as createProgramLogger, LOG_BASE, REDACTED } from '../core/log.ts';
import type { ProblemCode } from '../core/problems.ts';

// Path parameters whose values are personal data or credentials: profile keys (email addresses and
// phone numbers), addresses, and the signed tokens of tracking links, each of which names its
// recipient. Only their values are left out: the route's own words stay.
const PERSONAL_PARAMS = new Set(['profile_key', 'address', 'token']);
// A path no route matched has no pattern to go by: the segment after `profiles/` or `addresses/`,
// and the address of a suppression path (`suppressions/<channel>/<address>`), are left out.
const KEY_SEGMENT = /(\/(?:profiles|addresses)\/)[^/?#]+|(\/suppressions\/[^/?#]+\/)[^/?#]+/g;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return text;
  }
}

/**
 * A request URL as the log keeps it, without profile keys, addresses or secrets. With the route's
 * pattern (`/audience/profiles/:profile_key/segments`), the segments of personal path parameters
 * are left out, and the query keeps the names of the route's own parameters (`known`), each with
 * its value left out, and nothing of any other (a client's unknown parameter may be anything, an
 * address too). Without a route, the path loses what may be a key, and the query is left out.
 */
export function redactUrl(url: string, route?: string, known: ReadonlySet<string> = new Set()): string {
  const at = url.indexOf('?');
  const path = at < 0 ? url : url.slice(0, at);
  if (route === undefined)
    return path.replace(
      KEY_SEGMENT,
      (_match, before: string | undefined, suppressions: string | undefined) => `${before ?? suppressions}${REDACTED}`,
    );
  const pattern = route.split('/');
  const segments = path.split('/');
  // A trailing slash is the same route (ignoreTrailingSlash).
  if (segments.length === pattern.length + 1 && segments.at(-1) === '') segments.pop();
  const kept =
    segments.length === pattern.length
      ? segments
          .map((segment, i) =>
            pattern[i].startsWith(':') && PERSONAL_PARAMS.has(pattern[i].slice(1)) ? REDACTED : segment,
          )
          .join('/')
      : redactUrl(path);
  if (at < 0) return kept;
  const names = url
    .slice(at + 1)
    .split('&')
    .map((pair) => decoded(pair.split('=', 1)[0]))
    .filter((name) => known.has(name));
  return names.length === 0 ? kept : `${kept}?${names.map((name) => `${name}=${REDACTED}`).join('&')}`;
}

const problemCodes = new WeakMap<FastifyReply, ProblemCode>();

/** Notes the error code a reply answers with, for its log line. */
export function noteProblem(reply: FastifyReply, code: ProblemCode): void {
  problemCodes.set(reply, code);
}

/** The account a request acts for: its bearer token's, or the operator route's `account_id`. */
function accountOf(request: FastifyRequest): string | undefined {
  return request.caller?.accountId ?? (request.params as { account_id?: string } | undefined)?.account_id;
}

/**
 * The process's logger for HTTP (src/core/log.ts), to standard output, written synchronously: one
 * write(2) on the event loop, where pino's default hands each line to a thread of libuv's pool, a
 * hand-over that cost more than the write. The request lines come in batches (`registerRequestLog`).
 */
export function createLogger(level: string, stream?: DestinationStream): FastifyBaseLogger {
  const destination = stream ?? pino.destination({ dest: 1, sync: true });
  const logger = createProgramLogger(level, destination, {
    // For the lines Fastify still writes with a request or an answer (a reply that failed after its
    // headers): the same redaction as the request line's.
    req: (request: FastifyRequest) => ({
      method: request.method,
      url: redactUrl(request.url, request.is404 ? undefined : request.routeOptions?.url, queryNames(request)),
      route: request.routeOptions?.url,
    }),
    res: (reply: FastifyReply) => ({ statusCode: reply.statusCode, code: problemCodes.get(reply) }),
  });
  destinations.set(logger, destination);
  return logger;
}

/** The stream of each logger `createLogger` made, which the request log writes its lines into. */
const destinations = new WeakMap<FastifyBaseLogger, DestinationStream>();

/** The query parameters a route declares. */
function queryNames(request: FastifyRequest): ReadonlySet<string> {
  const query = request.routeOptions?.schema?.querystring as { properties?: Record<string, unknown> } | undefined;
  return new Set(Object.keys(query?.properties ?? {}));
}

/**
 * Fastify's two lines of a request (`incoming request`, `request completed`) are left out: the
 * request log writes one line per request at its answer (`registerRequestLog`). Its other lines
 * (a reply that failed after its headers, a serializer's failure) stay.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}
  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) super.requestCompleted(error, request, reply);
  }
}

/**
 * A request's logger, made (a pino child bound to the request id) only when something logs
 * through it: the error handler's 500 does; most requests log nothing but their line, and making
 * a child for each cost more than writing that line.
 */
class RequestLogger {
  #made: FastifyBaseLogger | undefined;
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  constructor(parent: FastifyBaseLogger, bindings: Bindings) {
    this.#parent = parent;
    this.#bindings = bindings;
  }
  #logger(): FastifyBaseLogger {
    return (this.#made ??= this.#parent.child(this.#bindings));
  }
  get level(): string {
    return this.#made?.level ?? this.#parent.level;
  }
  set level(level: string) {
    this.#logger().level = level;
  }
  fatal: LogFn = (...args: Parameters<LogFn>) => this.#logger().fatal(...args);
  error: LogFn = (...args: Parameters<LogFn>) => this.#logger().error(...args);
  warn: LogFn = (...args: Parameters<LogFn>) => this.#logger().warn(...args);
  info: LogFn = (...args: Parameters<LogFn>) => this.#logger().info(...args);
  debug: LogFn = (...args: Parameters<LogFn>) => this.#logger().debug(...args);
  trace: LogFn = (...args: Parameters<LogFn>) => this.#logger().trace(...args);
  silent: LogFn = () => {};
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }
}

/** The options of the Fastify instance for the request log (see `registerRequestLog`). */
export const requestLogOptions = {
  logController: new OneLinePerRequest(),
  childLoggerFactory: (logger: FastifyBaseLogger, bindings: Bindings) =>
    new RequestLogger(logger, bindings) as unknown as FastifyBaseLogger,
};

/** What the log keeps of a route, worked out at its first request. */
interface RouteLabel {
  route: string | undefined;
  /** `,"route":"…"` as the line writes it, or nothing. */
  routeJson: Buffer;
  /** The query parameters the route declares. */
  known: ReadonlySet<string>;
  /** Whether the route's path is kept as it came: no personal parameter, no wildcard. */
  plainPath: boolean;
}

// The fixed parts of a request line, and their length with room for its numbers.
const PART = {
  method: Buffer.from(',"req":{"method":'),
  url: Buffer.from(',"url":'),
  status: Buffer.from('},"res":{"statusCode":'),
  code: Buffer.from(',"code":'),
  account: Buffer.from(',"account":'),
  responseTime: Buffer.from('},"responseTime":'),
  end: Buffer.from(',"msg":"request completed"}\n'),
};
const LINE_BYTES = 200 + Object.values(PART).reduce((n, part) => n + part.length, 0);

/** What writes the request lines of each app that are still in a batch, at the process's exit. */
const unwritten = new Set<() => void>();
process.on('exit', () => unwritten.forEach((write) => write()));

/** How long the first request line of a batch waits for others, and how much a batch holds at most. */
export const BATCH_MS = 100;
const BATCH_BYTES = 64 * 1024;

function labelOf(route: string | undefined, known: ReadonlySet<string>): RouteLabel {
  const parameters = (route ?? '').split('/').filter((segment) => segment.startsWith(':') || segment.includes('*'));
  return {
    route,
    routeJson: Buffer.from(field('route', route)),
    known,
    plainPath: route !== undefined && parameters.every((p) => !p.includes('*') && !PERSONAL_PARAMS.has(p.slice(1))),
  };
}

/**
 * The request lines waiting to be written, as UTF-8 in a buffer of BATCH_BYTES, which goes to the
 * stream's file in one write(2) once full or when asked. Each line is written into the buffer
 * piece by piece as it is made: its fixed parts (a route's, a connection's) as bytes encoded once,
 * its numbers as digits, its strings as JSON. Made as one string, a line was about twenty pieces
 * joined, then flattened and encoded: 3.4 µs a request in the hook, against 2.0 this way
 * (docs/benchmarks.md "Request log"). A stream without a file (a test's) is written the text.
 */
class LineBatch {
  readonly #stream: DestinationStream & { fd?: unknown };
  readonly #standard = Buffer.allocUnsafe(BATCH_BYTES);
  #buffer = this.#standard;
  #length = 0;
  constructor(stream: DestinationStream) {
    this.#stream = stream;
  }
  get empty(): boolean {
    return this.#length === 0;
  }
  /** Makes room for a line of at most `bytes`; a line longer than a batch gets a buffer of its own until the next write. */
  room(bytes: number): void {
    if (bytes <= this.#buffer.length - this.#length) return;
    this.write();
    if (bytes > BATCH_BYTES) this.#buffer = Buffer.allocUnsafe(bytes);
  }
  bytes(bytes: Uint8Array): void {
    this.#buffer.set(bytes, this.#length);
    this.#length += bytes.length;
  }
  /** A string as JSON: most are printable ASCII without quotes or backslashes, copied as they are. */
  string(text: string): void {
    const buffer = this.#buffer;
    let at = this.#length;
    buffer[at++] = QUOTE;
    for (let i = 0; i < text.length; i++) {
      const unit = text.charCodeAt(i);
      if (unit < 0x20 || unit > 0x7e || unit === QUOTE || unit === BACKSLASH) {
        this.#length += buffer.write(JSON.stringify(text), this.#length);
        return;
      }
      buffer[at++] = unit;
    }
    buffer[at++] = QUOTE;
    this.#length = at;
  }
  /** A whole number of at least 0, in digits. */
  integer(value: number): void {
    const buffer = this.#buffer;
    let digits = 1;
    for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits++;
    let at = this.#length + digits;
    this.#length = at;
    let rest = value;
    do {
      buffer[--at] = ZERO + (rest % 10);
      rest = Math.floor(rest / 10);
    } while (rest > 0);
  }
  /** Milliseconds to the microsecond (`12.345`), without the float's own digits: those cost a conversion. */
  milliseconds(value: number): void {
    const micros = Number.isFinite(value) && value > 0 ? Math.round(value * 1000) : 0;
    this.integer(Math.floor(micros / 1000));
    const fraction = micros % 1000;
    const buffer = this.#buffer;
    buffer[this.#length] = DOT;
    buffer[this.#length + 1] = ZERO + Math.floor(fraction / 100);
    buffer[this.#length + 2] = ZERO + (Math.floor(fraction / 10) % 10);
    buffer[this.#length + 3] = ZERO + (fraction % 10);
    this.#length += 4;
  }
  write(): void {
    if (this.#length === 0) return;
    const bytes = this.#buffer.subarray(0, this.#length);
    this.#length = 0;
    this.#buffer = this.#standard;
    const fd = this.#stream.fd;
    if (typeof fd !== 'number') return void this.#stream.write(bytes.toString());
    for (let written = 0; written < bytes.length;) {
      try {
        written += fs.writeSync(fd, bytes, written);
      } catch (err) {
        // Standard output may be a pipe in non-blocking mode: wait for its reader, as pino's
        // synchronous destination does.
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        Atomics.wait(PAUSE, 0, 0, 1);
      }
    }
  }
}
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
const [QUOTE, BACKSLASH, ZERO, DOT] = [34, 92, 48, 46];

/** `,"name":value` of a line, or nothing when the value is undefined. */
const field = (name: string, value: string | number | undefined) =>
  value === undefined ? '' : `,"${name}":${JSON.stringify(value)}`;

/** The client fields of a connection's last request line, with the headers they came from. */
interface ClientFields {
  host: string | undefined;
  forwardedHost: string | string[] | undefined;
  forwardedFor: string | string[] | undefined;
  userAgent: string | undefined;
  json: Buffer;
}
const clients = new WeakMap<object, ClientFields>();

/**
 * `,"host":…,"remoteAddress":…,"remotePort":…,"userAgent":…` of a request line. A keep-alive
 * connection sends the same headers request after request: the fields are worked out again only
 * when a header they come from differs from the connection's last request.
 */
function clientOf(request: FastifyRequest): Buffer {
  const { headers, socket } = request;
  const last = socket ? clients.get(socket) : undefined;
  if (
    last &&
    last.host === headers.host &&
    last.userAgent === headers['user-agent'] &&
    last.forwardedFor === headers['x-forwarded-for'] &&
    last.forwardedHost === headers['x-forwarded-host']
  )
    return last.json;
  const json = Buffer.from(
    `${field('host', request.host)}${field('remoteAddress', request.ip)}${field('remotePort', socket?.remotePort)}${field('userAgent', headers['user-agent'])}`,
  );
  if (socket)
    clients.set(socket, {
      host: headers.host,
      forwardedHost: headers['x-forwarded-host'],
      forwardedFor: headers['x-forwarded-for'],
      userAgent: headers['user-agent'],
      json,
    });
  return json;
}

/**
 * The request log: one line per request, `request completed`, written at its answer, at `info`.
 * `req` has the method, the URL as kept (`redactUrl`), the route's pattern, host, client address
 * and port, and User-Agent; `res` the status, the error code of a problem, and the account the
 * request was for; `responseTime` its milliseconds. The line is the JSON pino would write (level,
 * time, the process's bindings, `msg`), written as text into the logger's own stream: through
 * pino's serializers and redaction paths the line took about half again as much CPU time
 * (docs/benchmarks.md "Request log"). Every value is one the line itself chose and had redacted,
 * so those paths, which would find nothing there, are not needed.
 */
export function registerRequestLog(app: FastifyInstance, logger: FastifyBaseLogger): void {
  // The level is the process's, set at its start: above `info` (or `silent`) there is no line to write.
  if (!(pino.levels.values[app.log.level] <= pino.levels.values.info)) return;
  const stream = destinations.get(logger);
  if (!stream)
    throw new Error('The request log writes into the stream of a logger of createLogger (src/http/logging.ts)');
  // The process's bindings as pino writes them after the time: `,"pid":…,"hostname":"…"`.
  const afterTime = `,${JSON.stringify(LOG_BASE).slice(1, -1)}`;
  const head = Buffer.from(`{"level":${pino.levels.values.info},"time":`);
  const reqId = Buffer.from(`${afterTime},"reqId":`);
  // The lines are written together, BATCH_MS after the first of a batch or once it is full: a
  // write per turn of the event loop was still a write every few requests under load. At the
  // app's close they are written at once, and at the process's exit (SIGTERM, an uncaught
  // exception) too.
  const batch = new LineBatch(stream);
  let due: NodeJS.Timeout | undefined;
  const write = () => {
    clearTimeout(due);
    due = undefined;
    batch.write();
  };
  unwritten.add(write);
  app.addHook('onClose', async () => {
    write();
    unwritten.delete(write);
  });
  const labels = new WeakMap<object, RouteLabel>();
  app.addHook('onResponse', (request, reply, done) => {
    const { config, url: route } = request.routeOptions;
    let label = labels.get(config);
    if (!label) labels.set(config, (label = labelOf(route, queryNames(request))));
    const url =
      label.plainPath && !request.is404 && !request.url.includes('?')
        ? request.url
        : redactUrl(request.url, request.is404 ? undefined : label.route, label.known);
    const client = clientOf(request);
    const code = problemCodes.get(reply);
    const account = accountOf(request);
    const { id, method } = request;
    // Each string takes at most six bytes a character in JSON (`\u001f`), the rest is as given.
    batch.room(
      LINE_BYTES +
        label.routeJson.length +
        client.length +
        6 * (id.length + method.length + url.length + (code?.length ?? 0) + (account?.length ?? 0)),
    );
    if (batch.empty) due = setTimeout(write, BATCH_MS).unref();
    batch.bytes(head);
    batch.integer(Date.now());
    batch.bytes(reqId);
    batch.string(id);
    batch.bytes(PART.method);
    batch.string(method);
    batch.bytes(PART.url);
    batch.string(url);
    batch.bytes(label.routeJson);
    batch.bytes(client);
    batch.bytes(PART.status);
    batch.integer(reply.statusCode);
    if (code !== undefined) {
      batch.bytes(PART.code);
      batch.string(code);
    }
    if (account !== undefined) {
      batch.bytes(PART.account);
      batch.string(account);
    }
    batch.bytes(PART.responseTime);
    batch.milliseconds(reply.elapsedTime);
    batch.bytes(PART.end);
    done();
  });
}

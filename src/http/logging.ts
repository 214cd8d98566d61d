import fs from 'node:fs';
import {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type LogFn } from 'pino';
import { createLogger as createProgramLogger, REDACTED } from '../core/log.ts';
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
  return createProgramLogger(level, stream ?? pino.destination({ dest: 1, sync: true }), {
    // For the lines Fastify still writes with a request or an answer (a reply that failed after its
    // headers): the same redaction as the request line's.
    req: (request: FastifyRequest) => ({
      method: request.method,
      url: redactUrl(request.url, request.is404 ? undefined : request.routeOptions?.url, queryNames(request)),
      route: request.routeOptions?.url,
    }),
    res: (reply: FastifyReply) => ({ statusCode: reply.statusCode, code: problemCodes.get(reply) }),
  });
}

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
  routeJson: string;
  /** The query parameters the route declares. */
  known: ReadonlySet<string>;
  /** Whether the route's path is kept as it came: no personal parameter, no wildcard. */
  plainPath: boolean;
}

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
    routeJson: field('route', route),
    known,
    plainPath: route !== undefined && parameters.every((p) => !p.includes('*') && !PERSONAL_PARAMS.has(p.slice(1))),
  };
}

/**
 * The request lines waiting to be written, as UTF-8 in a buffer of BATCH_BYTES: each line is
 * encoded as it is added, while it is fresh, and the buffer goes to the stream's file in one
 * write(2) once full or when asked. Kept as one string instead, the batch was a rope of thousands
 * of pieces that the write flattened and encoded at once, two-fifths of a line's cost
 * (docs/benchmarks.md "Request log"). A stream without a file (a test's) is written the string.
 */
class LineBatch {
  readonly #stream: DestinationStream & { fd?: unknown };
  readonly #buffer = Buffer.allocUnsafe(BATCH_BYTES);
  #length = 0;
  constructor(stream: DestinationStream) {
    this.#stream = stream;
  }
  get empty(): boolean {
    return this.#length === 0;
  }
  add(line: string): void {
    // A UTF-16 unit is at most 3 bytes of UTF-8.
    if (line.length * 3 > BATCH_BYTES - this.#length) {
      this.write();
      if (line.length * 3 > BATCH_BYTES) return void this.#stream.write(line);
    }
    this.#length += this.#buffer.write(line, this.#length);
  }
  write(): void {
    if (this.#length === 0) return;
    const bytes = this.#buffer.subarray(0, this.#length);
    this.#length = 0;
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

/** `,"name":value` of a line, or nothing when the value is undefined. */
const field = (name: string, value: string | number | undefined) =>
  value === undefined ? '' : `,"${name}":${JSON.stringify(value)}`;

/** The client fields of a connection's last request line, with the headers they came from. */
interface ClientFields {
  host: string | undefined;
  forwardedHost: string | string[] | undefined;
  forwardedFor: string | string[] | undefined;
  userAgent: string | undefined;
  json: string;
}
const clients = new WeakMap<object, ClientFields>();

/**
 * `,"host":…,"remoteAddress":…,"remotePort":…,"userAgent":…` of a request line. A keep-alive
 * connection sends the same headers request after request: the fields are worked out again only
 * when a header they come from differs from the connection's last request.
 */
function clientOf(request: FastifyRequest): string {
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
  const json = `${field('host', request.host)}${field('remoteAddress', request.ip)}${field('remotePort', socket?.remotePort)}${field('userAgent', headers['user-agent'])}`;
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
export function registerRequestLog(app: FastifyInstance): void {
  // The level is the process's, set at its start: above `info` (or `silent`) there is no line to write.
  if (!(pino.levels.values[app.log.level] <= pino.levels.values.info)) return;
  const stream = (app.log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  // The process's bindings as pino writes them after the time: `,"pid":…,"hostname":"…"`.
  const afterTime = (app.log as unknown as Record<symbol, string>)[pino.symbols.chindingsSym];
  const head = `{"level":${pino.levels.values.info},"time":`;
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
    if (batch.empty) due = setTimeout(write, BATCH_MS).unref();
    batch.add(
      `${head}${Date.now()}${afterTime},"reqId":${JSON.stringify(request.id)},"req":{"method":"${request.method}","url":${JSON.stringify(url)}${label.routeJson}` +
        `${clientOf(request)}},` +
        `"res":{"statusCode":${reply.statusCode}${field('code', problemCodes.get(reply))}${field('account', accountOf(request))}},"responseTime":${reply.elapsedTime},"msg":"request completed"}\n`,
    );
    done();
  });
}

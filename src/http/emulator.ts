import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { MovableClock } from '../core/clock.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { JobRecord } from '../jobs/queue.ts';
import { inNamespace, type OutboundRecorder } from '../outbound/recorder.ts';
import { sendProblem } from './problems.ts';

/**
 * The emulator's part of the HTTP transport (docs/emulator.md): the faults it injects and the log
 * of the requests it received. Both are hooks on every route but the control API's own, in memory,
 * bounded, and exist only in `audience emulate` (buildApp registers them when given an emulator).
 */

/** The control API's path prefix: never faulted, never logged. */
export const CONTROL_PREFIX = '/_emulator';

/** The header that turns the strict mode on (`true`) or off (`false`) for one request. */
export const STRICT_HEADER = 'x-audience-strict';

/** A fault: the next `times` requests of `method` on a path matching `path` are delayed, refused, or dropped. */
export interface FaultSpec {
  /** Only requests of this namespace (docs/emulator.md "Namespaces"); every request when absent. */
  namespace?: string;
  /** A path, `*` standing for any characters (`/audience/profiles/*`); the query is not part of it. */
  path: string;
  /** Any method when absent. */
  method?: string;
  times: number;
  /** Wait this long before answering (then answer as the fault says, or normally). */
  delay_ms?: number;
  /** Answer this status instead of serving the request: 429 (with Retry-After), 500, 502, 503 or 504. */
  status?: FaultStatus;
  /** Seconds of the Retry-After header of a 429 or 503 (1 by default for a 429). */
  retry_after?: number;
  /** Close the connection without an answer. */
  drop?: boolean;
  /**
   * Serve the request, then spoil its answer's body: `malformed` (its first half only, with a
   * matching Content-Length: not JSON), `truncated` (the Content-Length of the whole, half of it
   * sent, then the connection closed), `slow` (the second half `body_delay_ms` after the first).
   */
  body?: BodyFault;
  /** The wait of a `slow` body between its halves; 1000 by default. */
  body_delay_ms?: number;
  /** Apply to each matching request with this probability (1 by default); a request spared does not spend it. */
  probability?: number;
}

export const FAULT_STATUSES = [429, 500, 502, 503, 504] as const;
export type FaultStatus = (typeof FAULT_STATUSES)[number];
export const BODY_FAULTS = ['malformed', 'truncated', 'slow'] as const;
export type BodyFault = (typeof BODY_FAULTS)[number];

export interface Fault extends FaultSpec {
  id: number;
  /** Requests it still applies to. */
  remaining: number;
}

/** A received request as the log keeps it: credentials masked, bodies up to `BODY_KEPT` bytes. */
export interface LoggedRequest {
  id: number;
  /** By the emulator's clock. */
  at: string;
  method: string;
  path: string;
  query: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed body (JSON or form); absent for a body not parsed (a file upload) or one too large to keep. */
  body?: unknown;
  status: number;
  /** Set when the fault of this id answered it (delayed, refused or dropped). */
  fault?: number;
  /** The namespace whose credentials the request carried. */
  namespace?: string;
}

/** Requests kept, the oldest going first; bodies kept up to this size (as JSON text). */
const REQUESTS_KEPT = 1000;
const BODY_KEPT = 64 * 1024;
const MASKED = '[masked]';
/** Body fields that are credentials: the log shows that they were sent, not their value. */
const SECRET_FIELDS = new Set(['client_secret', 'password']);

const globOf = (pattern: string) =>
  new RegExp(
    `^${pattern
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}/?$`,
  );

const pathOf = (request: FastifyRequest) => request.url.split('?')[0];

/**
 * The namespaces of an emulator (docs/emulator.md "Namespaces"): accounts made for one test each,
 * so that test workers share one emulator. Known by account and by API key, so that a request is
 * attributed to its namespace by its token's account or, asking for a token, by its client_id.
 */
export class Namespaces {
  private readonly byClient = new Map<string, string>();
  private readonly accounts = new Set<string>();

  add(accountId: string, clientId: string): void {
    this.accounts.add(accountId);
    this.byClient.set(clientId, accountId);
  }

  has(accountId: string): boolean {
    return this.accounts.has(accountId);
  }

  /** The namespace of a request: its caller's account, or the account of the client_id it asks a token for. */
  of(request: FastifyRequest): string | undefined {
    const account = request.caller?.accountId;
    if (account !== undefined) return this.accounts.has(account) ? account : undefined;
    const clientId = (request.body as { client_id?: unknown } | undefined)?.client_id;
    return typeof clientId === 'string' ? this.byClient.get(clientId) : undefined;
  }

  clear(): void {
    this.byClient.clear();
    this.accounts.clear();
  }
}

/** The faults and the request log of one emulator. */
export class EmulatorTraffic {
  private faults: (Fault & { matches: RegExp })[] = [];
  private requests: LoggedRequest[] = [];
  /** Each namespace's own log, kept beside the whole one so that other namespaces' traffic does not push it out. */
  private readonly byNamespace = new Map<string, LoggedRequest[]>();
  private nextFault = 1;
  private nextRequest = 1;
  private readonly clock: MovableClock;
  readonly namespaces: Namespaces;

  constructor(clock: MovableClock, namespaces: Namespaces) {
    this.clock = clock;
    this.namespaces = namespaces;
  }

  addFault(spec: FaultSpec): Fault {
    const fault = { ...spec, id: this.nextFault++, remaining: spec.times };
    this.faults.push({ ...fault, matches: globOf(spec.path) });
    return fault;
  }

  /** The faults of a namespace, or every fault. */
  listFaults(namespace?: string): Fault[] {
    return this.faults.filter(inNamespace(namespace)).map(({ matches: _, ...fault }) => fault);
  }

  /** Removes the faults of a namespace, or every fault. */
  clearFaults(namespace?: string): void {
    const of = inNamespace(namespace);
    this.faults = this.faults.filter((f) => !of(f));
  }

  /** The first fault of `namespace` (those of none: null) that applies to the request, spent once. */
  private takeFault(request: FastifyRequest, namespace: string | null): Fault | undefined {
    const path = pathOf(request);
    const fault = this.faults.find(
      (f) =>
        f.remaining > 0 &&
        (f.namespace ?? null) === namespace &&
        (!f.method || f.method.toUpperCase() === request.method) &&
        f.matches.test(path) &&
        (f.probability === undefined || Math.random() < f.probability),
    );
    if (!fault) return undefined;
    fault.remaining--;
    if (fault.remaining === 0) this.faults = this.faults.filter((f) => f !== fault);
    return fault;
  }

  /** The log (a namespace's own, or the whole), oldest first, filtered: a method, a path pattern (`*` as in faults), requests from a time or after an id. */
  listRequests(filter: {
    namespace?: string;
    method?: string;
    path?: string;
    since?: string;
    after?: number;
    limit: number;
  }): LoggedRequest[] {
    const matches = filter.path ? globOf(filter.path) : undefined;
    const since = filter.since ? Date.parse(filter.since) : undefined;
    const log = filter.namespace === undefined ? this.requests : (this.byNamespace.get(filter.namespace) ?? []);
    return log
      .filter(
        (r) =>
          (!filter.method || r.method === filter.method.toUpperCase()) &&
          (!matches || matches.test(r.path)) &&
          (since === undefined || Date.parse(r.at) >= since) &&
          (filter.after === undefined || r.id > filter.after),
      )
      .slice(-filter.limit);
  }

  /** Forgets a namespace's requests, or every request. */
  clearRequests(namespace?: string): void {
    if (namespace === undefined) {
      this.requests = [];
      this.byNamespace.clear();
      return;
    }
    this.byNamespace.delete(namespace);
    this.requests = this.requests.filter((r) => r.namespace !== namespace);
  }

  private log(request: FastifyRequest, status: number, fault?: number): void {
    const headers = { ...request.headers };
    if (headers.authorization) headers.authorization = headers.authorization.replace(/^(\S+\s+).*$/, `$1${MASKED}`);
    const entry: LoggedRequest = {
      id: this.nextRequest++,
      at: new Date(this.clock.read()).toISOString(),
      method: request.method,
      path: pathOf(request),
      query: { ...(request.query as Record<string, unknown>) },
      headers,
      status,
      ...(fault === undefined ? {} : { fault }),
    };
    const body = masked(request.body);
    if (body !== undefined && JSON.stringify(body).length <= BODY_KEPT) entry.body = body;
    const namespace = this.namespaces.of(request);
    if (namespace !== undefined) {
      entry.namespace = namespace;
      const own = this.byNamespace.get(namespace) ?? [];
      this.byNamespace.set(namespace, own);
      keep(own, entry);
    }
    keep(this.requests, entry);
  }

  /**
   * Registers the hooks: the fault of a request first (before authentication, as a proxy or an
   * overloaded server answers; a namespace's faults once the request's credentials say whose it
   * is), then its entry in the log once answered.
   */
  register(app: FastifyInstance): void {
    const controlled = (request: FastifyRequest) => request.url.startsWith(CONTROL_PREFIX);
    const apply = async (request: FastifyRequest, reply: FastifyReply, fault: Fault) => {
      request.fault = fault.id;
      if (fault.delay_ms) await new Promise((r) => setTimeout(r, fault.delay_ms));
      if (fault.drop) {
        this.log(request, 0, fault.id);
        reply.hijack();
        request.raw.socket.destroy();
        return reply;
      }
      if (fault.body) request.bodyFault = { kind: fault.body, delayMs: fault.body_delay_ms ?? 1000 };
      if (fault.status === undefined) return;
      const detail = `The emulator answered ${fault.status} to this request (fault ${fault.id})`;
      const retryAfter = fault.retry_after ?? (fault.status === 429 ? 1 : undefined);
      const headers: Record<string, string> = retryAfter === undefined ? {} : { 'retry-after': String(retryAfter) };
      const code = STATUS_CODES[fault.status];
      return sendProblem(reply, new Problem(code, detail, headers));
    };
    app.addHook('onRequest', async (request, reply) => {
      if (controlled(request)) return;
      const fault = this.takeFault(request, null);
      if (fault) return apply(request, reply, fault);
    });
    app.addHook('preHandler', async (request, reply) => {
      if (controlled(request) || request.fault !== undefined) return;
      const namespace = this.namespaces.of(request);
      const fault = namespace === undefined ? undefined : this.takeFault(request, namespace);
      if (fault) return apply(request, reply, fault);
    });
    // A body fault spoils the answer once it is written (the request itself was served, or refused by the fault).
    app.addHook('onSend', async (request, reply, payload) => {
      if (!request.bodyFault || controlled(request)) return payload;
      const text = typeof payload === 'string' ? Buffer.from(payload) : Buffer.isBuffer(payload) ? payload : undefined;
      // A streamed answer (a file) is left whole: the fault spoils answers written at once.
      if (!text) return payload;
      const half = text.subarray(0, Math.floor(text.length / 2));
      const { kind, delayMs } = request.bodyFault;
      if (kind === 'malformed') {
        reply.header('content-length', String(half.length));
        return half;
      }
      reply.header('content-length', String(text.length));
      // A connection closed mid-answer never reaches onResponse: the log has the answer's entry now.
      if (kind === 'truncated') {
        this.log(request, reply.statusCode, request.fault);
        request.logged = true;
      }
      const rest = text.subarray(half.length);
      return Readable.from(
        (async function* () {
          yield half;
          if (kind === 'truncated') throw new Error(`the emulator's body fault closes the connection mid-answer`);
          await new Promise((r) => setTimeout(r, delayMs));
          yield rest;
        })(),
      );
    });
    app.addHook('onResponse', async (request, reply) => {
      if (!controlled(request) && !request.logged) this.log(request, reply.statusCode, request.fault);
    });
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The emulator's fault that answered this request, if one did. */
    fault?: number;
    /** How a fault spoils this request's answer body. */
    bodyFault?: { kind: BodyFault; delayMs: number };
    /** Whether the request log has this request already. */
    logged?: boolean;
  }
}

/** The problem a status fault answers: the rate limit's, an internal error, the database's absence, a proxy's. */
const STATUS_CODES: Record<FaultStatus, ProblemCode> = {
  429: 'AUD-1002',
  500: 'AUD-4',
  502: 'AUD-2206',
  503: 'AUD-2',
  504: 'AUD-2207',
};

/** Appends an entry to a log, the oldest going beyond REQUESTS_KEPT. */
function keep(log: LoggedRequest[], entry: LoggedRequest): void {
  log.push(entry);
  if (log.length > REQUESTS_KEPT) log.shift();
}

/** A body with its credential fields masked, at any depth. */
function masked(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(masked);
  if (body === null || typeof body !== 'object' || Buffer.isBuffer(body)) return body;
  return Object.fromEntries(
    Object.entries(body).map(([k, v]) => [k, SECRET_FIELDS.has(k) && v !== undefined ? MASKED : masked(v)]),
  );
}

/** The account `audience emulate` makes ready, and what a client needs to use it. */
export interface ReadyAccount {
  account_id: string;
  client_id: string;
  client_secret: string;
  vendor: string;
  region: string;
  /** The operator token of /admin. */
  admin_token: string;
}

/** What the control API acts on (src/emulate.ts builds it). */
export interface Emulator {
  clock: MovableClock;
  traffic: EmulatorTraffic;
  /** The outbound calls the service made (callbacks, mail …) and the faults injected into them. */
  outbound: OutboundRecorder;
  account: ReadyAccount;
  /** Back to the initial state (or to a saved snapshot): the database, files, caches, rate limits, clock, faults, log, namespaces. */
  reset(snapshot?: string): Promise<void>;
  saveSnapshot(name: string): Promise<void>;
  snapshots(): Promise<string[]>;
  /** A new namespace: an account of the ready account's manifest and seed, with a key of its own. */
  createNamespace(): Promise<ReadyAccount>;
  /** Runs every job due by the emulator's clock (of one namespace's account, or of all), until none is left; answers how many ran. */
  runJobs(namespace?: string): Promise<number>;
  /** The jobs of the queue (waiting, running, failed) of a namespace's account, or of all, oldest first. */
  listJobs(namespace?: string): Promise<JobRecord[]>;
  /**
   * Runs the job of this id now, due or not; false when there is no such waiting job. `hold`: the
   * job begins (an import or export is in_progress) and waits before it reads its account until
   * `releaseJob`; the call answers once it waits.
   */
  runJob(jobId: string, options: { namespace?: string; hold?: boolean }): Promise<boolean>;
  /** Lets a held job go on, and answers once it ended; false when no job of this id is held. */
  releaseJob(jobId: string): Promise<boolean>;
  /** Unknown top-level fields of bodies are refused (400 naming the field) rather than ignored, unless a request's header says otherwise. */
  readonly strict: boolean;
  /** Whether jobs run by themselves shortly after they are due (automatic), or only when asked (manual). */
  jobsMode: 'automatic' | 'manual';
  /**
   * While the emulator saves its initial state and starts its job worker, just after it listens:
   * every request waits for it. Undefined once done.
   */
  starting?: Promise<void>;
}

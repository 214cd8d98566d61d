import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
/**
 * `import { startEmulator } from '@audience/testing'`: the emulator (docs/emulator.md) for a test
 * suite. It runs `audience emulate` in a process of its own (its database and its port too), waits
 * for it to serve, and answers its address, the ready account and a client of the control API.
 * This module imports nothing of the service, so a test suite loads none of it; it is built to
 * JavaScript for Node.js 20 and later (the emulator itself runs on the Node.js its program pins).
 */

/** The ready account of the emulator, and the operator token. */
export interface EmulatorAccount {
  accountId: string;
  clientId: string;
  clientSecret: string;
  /** The vendor word of built-in identifiers (`com.<vendor>1.…`). */
  vendor: string;
  region: string;
  adminToken: string;
}

/** A fault of the requests on a path (docs/emulator.md "Faults"). */
export interface Fault {
  /** A path, `*` standing for any characters (`/audience/profiles/*`); the query is not part of it. */
  path: string;
  /** Any method when absent. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** How many requests it applies to; 1 when absent. */
  times?: number;
  /** Wait this long before answering (then answer as the fault says, or normally). */
  delay_ms?: number;
  /** Answer this status instead of serving the request (a problem document; 429 with Retry-After). */
  status?: 429 | 500 | 502 | 503 | 504;
  /** Seconds of the Retry-After header of a 429 or 503 (1 by default for a 429). */
  retry_after?: number;
  /** Close the connection without an answer. */
  drop?: boolean;
  /** Spoil the answer's body: its first half only (`malformed`), half then a closed connection (`truncated`), its halves `body_delay_ms` apart (`slow`). */
  body?: 'malformed' | 'truncated' | 'slow';
  body_delay_ms?: number;
  /** Apply to each matching request with this probability (1 by default). */
  probability?: number;
}

/** A fault as the emulator keeps it. */
export type AppliedFault = Fault & { id: number; times: number; remaining: number; namespace?: string };

/** A request the emulator received, credentials masked. */
export interface LoggedRequest {
  id: number;
  /** By the emulator's clock. */
  at: string;
  method: string;
  path: string;
  query: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed body (JSON or form); absent for a file upload or a body over 64 KB. */
  body?: unknown;
  /** 0 for a dropped connection. */
  status: number;
  /** The fault that applied. */
  fault?: number;
  /** The namespace whose credentials the request carried. */
  namespace?: string;
}

/** A call the service made to a target outside it, with its answer (docs/emulator.md "Outbound calls"). */
export interface OutboundCall {
  id: number;
  at: string;
  /** `callback`, `mail` … */
  kind: string;
  method: string;
  /** A URL; a recipient's address. */
  target: string;
  body: unknown;
  /** The headers the call's kind added (a webhook's id, timestamp and signature). */
  headers?: Record<string, string>;
  answer: { status?: number; body?: string; error?: string };
  duration_ms: number;
  fault?: number;
  /** The namespace the call was made for. */
  namespace?: string;
}

/** An attempt of a webhook delivery (docs/emulator.md "Webhook deliveries"). */
export interface WebhookDelivery {
  /** The outbound call the attempt is. */
  id: number;
  at: string;
  /** The endpoint. */
  url: string;
  /** The `webhook-id` header: the same for every attempt of one delivery. */
  event_id: string;
  /** `consent.changed` … */
  type: string;
  /** `webhook-id`, `webhook-timestamp`, `webhook-signature`. */
  headers: Record<string, string>;
  /** The signed body: `type`, `timestamp`, `data`. */
  body: { type: string; timestamp: string; data: Record<string, unknown> };
  answer: { status?: number; body?: string; error?: string };
  duration_ms: number;
  fault?: number;
  namespace?: string;
}

/** A fault of outbound calls: refuse the connection, wait, or answer a status in the target's place. */
export interface OutboundFault {
  kind?: string;
  /** A URL or an address, `*` standing for any characters. */
  target?: string;
  /** 1 when absent. */
  times?: number;
  delay_ms?: number;
  /** 200 to 599. */
  status?: number;
  refuse?: boolean;
  probability?: number;
}

/** An outbound fault as the emulator keeps it. */
export type AppliedOutboundFault = OutboundFault & { id: number; times: number; remaining: number; namespace?: string };

/** The codes of the control API's refusals (docs/errors.md). */
export type EmulatorProblemCode =
  | 'AUD-0'
  | 'AUD-1'
  | 'AUD-1003'
  | 'AUD-2201'
  | 'AUD-2202'
  | 'AUD-2203'
  | 'AUD-2204'
  | 'AUD-2205'
  | 'AUD-2208'
  | (string & {});

/** A refusal of the control API: its problem document's code, status and detail. */
export class EmulatorError extends Error {
  /** `AUD-2201` … from the problem document's `type`; `undefined` when the answer was no problem document. */
  readonly code: EmulatorProblemCode | undefined;
  readonly status: number;
  readonly detail: string;
  /** The method and path of the control request. */
  readonly request: string;

  constructor(request: string, status: number, text: string) {
    let problem: { type?: string; detail?: string } = {};
    try {
      problem = JSON.parse(text) as typeof problem;
    } catch {
      // Not a problem document: the text is the detail.
    }
    const detail = problem.detail ?? text;
    super(`${request}: ${status} ${detail}`);
    this.name = 'EmulatorError';
    this.code = problem.type?.split('/').pop();
    this.status = status;
    this.detail = detail;
    this.request = request;
  }
}

/** A message a transactional send sent, decoded, with its links. */
export interface MailMessage {
  message_id: string;
  transaction_id: string | null;
  created_at: string;
  from: string;
  to: string[];
  subject: string;
  text: string | null;
  html: string | null;
  links: string[];
  unsubscribe: string | null;
}

export type JobsMode = 'automatic' | 'manual';

/** A job of the emulator's queue. */
export interface QueuedJob {
  job_id: string;
  /** `import`, `export`, `send` … */
  kind: string;
  state: 'waiting' | 'running' | 'failed';
  attempts: number;
  created_at: string;
  run_at: string;
  last_error: string | null;
  payload: unknown;
}

export interface ClockState {
  now: string;
  frozen: boolean;
  jobs_run?: number;
}

/** The control API (`/_emulator/…`) as functions. */
export interface EmulatorControl {
  /** Back to the state the emulator started in, or to a snapshot saved with `snapshot`. */
  reset(snapshot?: string): Promise<void>;
  /** Saves the current state (data and files) under `name`, for `reset(name)`. */
  snapshot(name: string): Promise<void>;
  snapshots: {
    /** The names of the saved snapshots. */
    list(): Promise<string[]>;
  };
  clock: {
    now(): Promise<ClockState>;
    /** Sets the time (`frozen` stops it there); the jobs due by then run before it answers. */
    set(at: Date | string, options?: { frozen?: boolean }): Promise<ClockState>;
    /** Moves the time forward; the jobs due by then run before it answers. */
    advance(seconds: number): Promise<ClockState>;
  };
  jobs: {
    /** Runs every job due (imports, exports, mail) until none is left; answers how many ran. */
    run(): Promise<number>;
    /** The jobs of the queue, oldest first, and whether they run by themselves. */
    list(): Promise<{ mode: JobsMode; items: QueuedJob[] }>;
    /** Runs one waiting job now, due or not. */
    runOne(jobId: string): Promise<void>;
    /**
     * Begins one waiting job and holds it before it reads its account (an import or an export is
     * `in_progress` then) until `release(jobId)`, so that a poll loop sees queued, in_progress, done.
     */
    hold(jobId: string): Promise<void>;
    /** Lets a held job go on; resolves once it ended. */
    release(jobId: string): Promise<void>;
    /** `manual`: jobs wait until they are run; `automatic`: they run shortly after they are due. A reset brings back the start's. */
    setMode(mode: JobsMode): Promise<void>;
  };
  faults: {
    add(fault: Fault): Promise<AppliedFault>;
    list(): Promise<AppliedFault[]>;
    clear(): Promise<void>;
  };
  requests: {
    /** Oldest first; `limit`: the last n (1 to 1000). */
    list(filter?: {
      method?: string;
      path?: string;
      since?: Date | string;
      after?: number;
      limit?: number;
    }): Promise<LoggedRequest[]>;
    clear(): Promise<void>;
  };
  mail: {
    /** Newest first; `limit`: at most n (100 by default, up to 1000). */
    list(filter?: { to?: string; limit?: number }): Promise<MailMessage[]>;
  };
  /** The calls the service made to targets outside it (callbacks, mail, webhook deliveries), and faults injected into them. */
  outbound: {
    list(filter?: { kind?: string; target?: string; after?: number; limit?: number }): Promise<OutboundCall[]>;
    clear(): Promise<void>;
    faults: {
      add(fault: OutboundFault): Promise<AppliedOutboundFault>;
      list(): Promise<AppliedOutboundFault[]>;
      clear(): Promise<void>;
    };
  };
  webhooks: {
    /** The webhook deliveries attempted, oldest first: to endpoints matching `url` (`*`: any characters), of an event `type`, after an id; `limit`: the last n (1 to 1000). */
    list(filter?: { url?: string; type?: string; after?: number; limit?: number }): Promise<WebhookDelivery[]>;
  };
  limits: {
    get(): Promise<Record<string, number | null>>;
    /** Sets limits of the ready account (null lifts one); `reset` brings back the emulator's. */
    set(limits: Record<string, number | null>): Promise<Record<string, number | null>>;
  };
}

/**
 * The control API of one namespace: its jobs, faults, request log, mail, outbound calls, webhook
 * deliveries and limits. The clock, the jobs' mode, snapshots and the reset are the emulator's.
 */
export interface NamespaceControl extends Pick<
  EmulatorControl,
  'faults' | 'requests' | 'mail' | 'outbound' | 'webhooks' | 'limits'
> {
  jobs: Omit<EmulatorControl['jobs'], 'setMode'>;
}

/**
 * A namespace (docs/emulator.md "Namespaces"): an account of the emulator's manifest and seed
 * made for one test, with its own key, so that test workers share one emulator. Make one per test.
 */
export interface Namespace {
  /** The namespace's id: its account's. */
  id: string;
  baseUrl: string;
  account: EmulatorAccount;
  control: NamespaceControl;
  /** Fetches an access token of the namespace's account (each call a new one). */
  token(): Promise<string>;
}

export interface Emulator {
  /** The address of the service, as clients call it. */
  baseUrl: string;
  account: EmulatorAccount;
  control: EmulatorControl;
  /** Fetches an access token of the ready account (each call a new one). */
  token(): Promise<string>;
  /** A new namespace for one test (`createNamespace(baseUrl)` from a process that did not start the emulator). */
  namespace(): Promise<Namespace>;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** The vendor word of the ready account's built-in identifiers (`VENDOR`). */
  vendor?: string;
  /** A fixture file: the ready account's manifest (docs/manifest.md) and seed data, instead of the demo's (docs/emulator.md "Fixtures"). */
  manifest?: string;
  /** More environment of the emulator (`DATABASE_URL` for a database on a server of yours, `LOG_LEVEL` …). */
  env?: Record<string, string>;
  /** `manual`: jobs wait until `control.jobs.run()` or `control.jobs.runOne(id)` (docs/emulator.md "Jobs"); `automatic` by default. */
  jobs?: 'automatic' | 'manual';
  /** Refuse unknown top-level fields of request bodies (400 naming the field) instead of ignoring them, as `serve` does. */
  strict?: boolean;
  /** The `audience` program to run; by default `AUDIENCE_COMMAND`, else the `bin/audience` of an `audience` package the working directory's project holds (or is), else `audience` on the PATH. */
  command?: string;
  /** Give up waiting for the start after this long (the first start on a machine prepares the database: seconds). */
  timeoutMs?: number;
}

/** The `audience` program `startEmulator` runs when not told (`StartOptions.command`). */
function emulatorProgram(): string {
  if (process.env.AUDIENCE_COMMAND) return process.env.AUDIENCE_COMMAND;
  try {
    const manifest = createRequire(path.join(process.cwd(), 'package.json')).resolve('audience/package.json');
    return path.join(path.dirname(manifest), 'bin', 'audience');
  } catch {
    return 'audience';
  }
}

/** Starts an emulator and waits until it serves. */
export async function startEmulator(options: StartOptions = {}): Promise<Emulator> {
  const child = spawn(
    options.command ?? emulatorProgram(),
    [
      'emulate',
      ...(options.manifest ? ['--manifest', options.manifest] : []),
      ...(options.jobs === 'manual' ? ['--manual-jobs'] : []),
      ...(options.strict ? ['--strict'] : []),
    ],
    {
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        ...(options.vendor ? { VENDOR: options.vendor } : {}),
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const output: string[] = [];
  child.stderr!.on('data', (d) => output.push(String(d)));
  const ready = await new Promise<Record<string, string>>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      reject(new Error(`the emulator did not start within ${options.timeoutMs ?? 60_000} ms:\n${output.join('')}`));
    }, options.timeoutMs ?? 60_000);
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (!line.includes('"emulator":"ready"')) return output.push(line + '\n');
      clearTimeout(timer);
      resolve(JSON.parse(line));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the emulator exited (code ${code}) before serving:\n${output.join('')}`));
    });
  });
  const baseUrl = ready.url;
  const account: EmulatorAccount = {
    accountId: ready.account_id,
    clientId: ready.client_id,
    clientSecret: ready.client_secret,
    vendor: ready.vendor,
    region: ready.region,
    adminToken: ready.admin_token,
  };
  return {
    baseUrl,
    account,
    control: controlClient(baseUrl),
    token: () => tokenOf(baseUrl, account),
    namespace: () => createNamespace(baseUrl),
    stop: () => stopProcess(child),
  };
}

async function tokenOf(baseUrl: string, account: EmulatorAccount): Promise<string> {
  const res = await fetch(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: account.clientId,
      client_secret: account.clientSecret,
    }),
  });
  if (!res.ok) throw new EmulatorError('POST /oauth/token', res.status, await res.text());
  return ((await res.json()) as { access_token: string }).access_token;
}

/**
 * A new namespace of the emulator at `baseUrl`: what each test of parallel workers makes, the
 * emulator started once (a global setup) and its address passed to the workers.
 */
export async function createNamespace(baseUrl: string): Promise<Namespace> {
  const res = await fetch(`${baseUrl}/_emulator/namespaces`, { method: 'POST' });
  const text = await res.text();
  if (!res.ok) throw new EmulatorError('POST /_emulator/namespaces', res.status, text);
  const made = JSON.parse(text) as Record<string, string>;
  const account: EmulatorAccount = {
    accountId: made.account_id,
    clientId: made.client_id,
    clientSecret: made.client_secret,
    vendor: made.vendor,
    region: made.region,
    adminToken: made.admin_token,
  };
  const { faults, requests, mail, outbound, webhooks, limits, jobs } = controlOf(baseUrl, made.namespace);
  const { setMode: _, ...namespaceJobs } = jobs;
  return {
    id: made.namespace,
    baseUrl,
    account,
    control: { faults, requests, mail, outbound, webhooks, limits, jobs: namespaceJobs },
    token: () => tokenOf(baseUrl, account),
  };
}

/** A client of the control API of the emulator at `baseUrl` (one started otherwise: a container). */
export function controlClient(baseUrl: string): EmulatorControl {
  return controlOf(baseUrl);
}

/** The control API, its calls scoped to `namespace` when given. */
function controlOf(baseUrl: string, namespace?: string): EmulatorControl {
  const ns = { namespace };
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${baseUrl}/_emulator${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new EmulatorError(`${method} /_emulator${path}`, res.status, text);
    return (text ? JSON.parse(text) : undefined) as T;
  };
  const iso = (at: Date | string) => (at instanceof Date ? at.toISOString() : at);
  return {
    reset: (snapshot) => call('POST', '/reset', snapshot === undefined ? undefined : { snapshot }),
    snapshot: (name) => call('PUT', `/snapshots/${encodeURIComponent(name)}`),
    snapshots: { list: async () => (await call<{ items: string[] }>('GET', '/snapshots')).items },
    clock: {
      now: () => call('GET', '/clock'),
      set: (at, options = {}) => call('PUT', '/clock', { now: iso(at), ...options }),
      advance: (seconds) => call('POST', '/clock/advance', { seconds }),
    },
    jobs: {
      run: async () => (await call<{ jobs_run: number }>('POST', `/jobs/run${queryOf(ns)}`)).jobs_run,
      list: () => call('GET', `/jobs${queryOf(ns)}`),
      runOne: async (jobId) => {
        await call('POST', `/jobs/${encodeURIComponent(jobId)}/run${queryOf(ns)}`);
      },
      hold: async (jobId) => {
        await call('POST', `/jobs/${encodeURIComponent(jobId)}/run${queryOf(ns)}`, { hold: true });
      },
      release: async (jobId) => {
        await call('POST', `/jobs/${encodeURIComponent(jobId)}/release`);
      },
      setMode: async (mode) => {
        await call('PUT', '/jobs', { mode });
      },
    },
    faults: {
      add: (fault) => call('POST', '/faults', { ...fault, ...ns }),
      list: async () => (await call<{ items: AppliedFault[] }>('GET', `/faults${queryOf(ns)}`)).items,
      clear: () => call('DELETE', `/faults${queryOf(ns)}`),
    },
    requests: {
      list: async (filter = {}) =>
        (await call<{ items: LoggedRequest[] }>('GET', `/requests${queryOf({ ...filter, ...ns })}`)).items,
      clear: () => call('DELETE', `/requests${queryOf(ns)}`),
    },
    mail: {
      list: async (filter = {}) =>
        (await call<{ items: MailMessage[] }>('GET', `/mail${queryOf({ ...filter, ...ns })}`)).items,
    },
    outbound: {
      list: async (filter = {}) =>
        (await call<{ items: OutboundCall[] }>('GET', `/outbound${queryOf({ ...filter, ...ns })}`)).items,
      clear: () => call('DELETE', `/outbound${queryOf(ns)}`),
      faults: {
        add: (fault) => call('POST', '/outbound/faults', { ...fault, ...ns }),
        list: async () =>
          (await call<{ items: AppliedOutboundFault[] }>('GET', `/outbound/faults${queryOf(ns)}`)).items,
        clear: () => call('DELETE', `/outbound/faults${queryOf(ns)}`),
      },
    },
    webhooks: {
      list: async (filter = {}) =>
        (await call<{ items: WebhookDelivery[] }>('GET', `/webhooks${queryOf({ ...filter, ...ns })}`)).items,
    },
    limits: {
      get: () => call('GET', `/limits${queryOf(ns)}`),
      set: (limits) => call('PATCH', `/limits${queryOf(ns)}`, limits),
    },
  };
}

/** A filter as a query string (`?a=1&b=…`), dates as ISO times; empty without one. */
function queryOf(filter: Record<string, string | number | Date | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(filter))
    if (v !== undefined) query.set(k, v instanceof Date ? v.toISOString() : String(v));
  return query.size > 0 ? `?${query}` : '';
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

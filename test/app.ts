import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { readConfig, type Config } from '../src/config.ts';
import { buildApp, type App } from '../src/http/app.ts';
import { createLogger } from '../src/http/logging.ts';
import { createServices, type Services } from '../src/services.ts';
import { createPool } from '../src/store/pool.ts';
import { startWorker } from '../src/worker/worker.ts';
import type { Worker } from '../src/jobs/queue.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { createDatabase } from './databases.ts';
import { recordProblems } from './problem-codes.ts';
import { scratchFolder } from './scratch.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/** A clock the test moves by hand. */
export class TestClock {
  now = Date.now();
  readonly read = () => this.now;
  advance(ms: number): void {
    this.now += ms;
  }
}

let database: { name: string; url: Promise<string> } | undefined;

/** This test file's own database, cloned from the migrated template. */
export function testDatabase(): Promise<string> {
  if (!database) {
    const name = `test_${crypto.randomBytes(6).toString('hex')}`;
    database = { name, url: createDatabase(inject('databaseUrl'), name, 'audience_template') };
  }
  return database.url;
}

/**
 * The name of this test file's database, once it was asked for, which the next file will not
 * share: test/drop-database.ts drops it when the file ends. The test files of a run share this
 * module (vitest.config.ts: isolate false), so each file's first call makes a database of its own.
 */
export function takeTestDatabaseName(): string | undefined {
  const name = database?.name;
  database = undefined;
  return name;
}

/**
 * The URL of a server's own connections. Under AUDIENCE_TEST_SINGLE_SHARD (npm run test:citus),
 * Citus fails any statement of theirs that it would run as more than one task: each request of
 * one account must run on one node. The tests' own reads across the database use other connections.
 */
function serviceUrl(url: string): string {
  if (!process.env.AUDIENCE_TEST_SINGLE_SHARD) return url;
  const u = new URL(url);
  u.searchParams.set('options', '-c citus.multi_task_query_log_level=error');
  return u.toString();
}

export interface Response {
  status: number;
  headers: Headers;
  /** Parsed JSON when the answer is JSON, else the text. */
  body: any;
  text: string;
}

export interface Credentials {
  accountId: string;
  clientId: string;
  clientSecret: string;
}

/** A running server on a loopback port, its services, and helpers to call it. */
export class TestServer {
  readonly url: string;
  readonly app: App;
  readonly services: Services;
  readonly clock: TestClock;
  private readonly pool: pg.Pool;

  private constructor(url: string, app: App, services: Services, clock: TestClock, pool: pg.Pool) {
    this.url = url;
    this.app = app;
    this.services = services;
    this.clock = clock;
    this.pool = pool;
  }

  /**
   * Starts a server; with `worker`, also a worker that runs jobs (imports). Its log (silent unless
   * `env` sets LOG_LEVEL) goes to `log`, or to standard output. It serves the test file's database
   * unless `database` names another one, already migrated (test/citus.test.ts: databases of a test's own).
   * `down` says why it no longer serves, as the program's does (/healthz).
   */
  static async start(
    env: Record<string, string> = {},
    options: {
      worker?: boolean;
      log?: { write(line: string): void };
      database?: string;
      down?: () => string | undefined;
    } = {},
  ): Promise<TestServer> {
    // Files (import uploads) go to a folder of this server's own, removed with the test file, unless the test names one.
    const dataDir = env.DATA_DIR ?? (await scratchFolder('audience-files-'));
    const config: Config = readConfig({ LOG_LEVEL: 'silent', ...env, DATA_DIR: dataDir });
    const pool = createPool(serviceUrl(options.database ?? (await testDatabase())), 10);
    const clock = new TestClock();
    const services = await createServices(config, pool, clock.read, {
      adminToken: crypto.randomBytes(16).toString('hex'),
      // Servers of one test file share their database, so they share the secret of its locked identities.
      serverSecret: env.SERVER_SECRET ?? 'test-server-secret',
    });
    const app = await buildApp(services, { logger: createLogger(config.logLevel, options.log), down: options.down });
    recordProblems(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address() as { port: number };
    const server = new TestServer(`http://127.0.0.1:${address.port}`, app, services, clock, pool);
    if (options.worker) server.worker = await startWorker(services, (err) => console.error('job failed', err));
    return server;
  }

  /** The worker, when started. */
  worker: Worker | undefined;

  async close(): Promise<void> {
    await this.app.close();
    await this.worker?.stop();
    await this.services.close();
    await this.pool.end();
  }

  /** Calls the server. `body` is sent as JSON unless `raw` is given. */
  async request(
    method: string,
    path: string,
    options: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.url + path, { method, headers, body });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    return {
      status: res.status,
      headers: res.headers,
      text,
      body: /json/.test(type) && text ? JSON.parse(text) : text,
    };
  }

  /** Calls the operator API. */
  admin(method: string, path: string, body?: unknown): Promise<Response> {
    return this.request(method, path, { token: this.services.adminToken, body });
  }

  /** A new account through the operator API, with `manifest` applied and one API key. */
  async createAccount(
    manifest: Manifest = {},
    options: { region?: string; limits?: Record<string, number | null> } = {},
  ): Promise<Credentials> {
    const account = await this.admin('POST', '/admin/accounts', { name: `test ${crypto.randomUUID()}`, ...options });
    if (account.status !== 201) throw new Error(`account: ${account.text}`);
    const applied = await this.admin('PUT', `/admin/accounts/${account.body.id}/manifest`, manifest);
    if (applied.status !== 200) throw new Error(`manifest: ${applied.text}`);
    return { accountId: account.body.id, ...(await this.createKey(account.body.id)) };
  }

  async createKey(
    accountId: string,
    body: Record<string, unknown> = {},
  ): Promise<{ clientId: string; clientSecret: string }> {
    const key = await this.admin('POST', `/admin/accounts/${accountId}/keys`, body);
    if (key.status !== 201) throw new Error(`key: ${key.text}`);
    return { clientId: key.body.client_id, clientSecret: key.body.client_secret };
  }

  /** An access token for the credentials. */
  async token(credentials: { clientId: string; clientSecret: string }): Promise<string> {
    const res = await this.request('POST', '/oauth/token', {
      body: {
        grant_type: 'client_credentials',
        client_id: credentials.clientId,
        client_secret: credentials.clientSecret,
      },
    });
    if (res.status !== 200) throw new Error(`token: ${res.text}`);
    return res.body.access_token;
  }

  /** A new account (rate limits lifted unless given) and a token for it. */
  async login(
    manifest: Manifest = {},
    limits: Record<string, number | null> = { requests_per_second: null, token_requests_per_minute: null },
  ): Promise<Credentials & { token: string }> {
    const credentials = await this.createAccount(manifest, { limits });
    return { ...credentials, token: await this.token(credentials) };
  }
}

/**
 * The set-up of a test file over a server and its database: starts a TestServer (`env` and
 * `worker` as TestServer.start) and a pool of a few connections on the file's database before its
 * tests, hands both to `ready`, and closes them after its tests.
 */
export function serverWithPool(
  options: { env?: Record<string, string>; worker?: boolean; connections?: number },
  ready: (server: TestServer, db: pg.Pool) => void,
): void {
  let server: TestServer | undefined;
  let db: pg.Pool | undefined;
  beforeAll(async () => {
    server = await TestServer.start(options.env, { worker: options.worker });
    db = createPool(await testDatabase(), options.connections ?? 2);
    ready(server, db);
  });
  afterAll(async () => {
    await server?.close();
    await db?.end();
  });
}

/** One section with a bit of everything, for definition tests. */
export const SHOP: Manifest = {
  sections: [
    {
      name: 'Shop',
      ecommerce_connected: false,
      attributes: [
        {
          name: 'Points',
          versions: [{ type: ['Number'], deprecated_at: '2026-01-01T00:00:00Z' }, { type: ['Number with decimal'] }],
        },
        { name: 'Secret', hidden: true, versions: [{ type: ['Text'] }] },
        { name: 'Basket value', ecommerce: true, versions: [{ type: ['Number'] }] },
      ],
      tags: [{ name: 'VIP' }, { name: 'Hidden', hidden: true }],
      events: [
        {
          name: 'Page view',
          discriminator: 'com.vendor1.events.page-view',
          versions: [
            {
              type: ['activityId', 'device', 'id', 'location', 'title', 'url'].map((name) => ({ name, type: 'Text' })),
            },
          ],
        },
      ],
      topic_folders: [{ name: 'News' }, { name: 'Weekly', parent: 'com.vendor1.topic-folders.user-created.news' }],
      topics: [
        { name: 'Weekly news', folder: 'com.vendor1.topic-folders.user-created.weekly' },
        { name: 'SMS offers', channel: 'com.vendor1.channels.sms' },
      ],
    },
  ],
  segments: [
    {
      name: 'Big spenders',
      section: 'com.vendor1.sections.user-created.shop',
      versions: [
        { query: 'section({section}).attribute({attribute:com.vendor1.attributes.user-created.points@2}).gt(100)' },
      ],
    },
  ],
};

/**
 * Asserts a problem document of SPEC §7 (ERR-01..04, ERR-09): the status, the media type, integer
 * `status` (and `status_code`) equal to it, a title, a detail and an `AUD-<n>` type — `code` when
 * given. Returns the detail.
 */
export function expectProblem(res: Response, status: number, code?: string): string {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type') ?? '').toMatch(/^application\/problem\+json\b/);
  expect(Number.isInteger(res.body.status)).toBe(true);
  expect(res.body.status).toBe(status);
  expect(res.body.title).toEqual(expect.stringMatching(/\S/));
  expect(res.body.detail).toEqual(expect.stringMatching(/\S/));
  expect(res.body.type).toMatch(/\/AUD-\d+$/);
  if (code !== undefined) expect(res.body.type).toBe(`/errors/${code}`);
  if ('status_code' in res.body) expect(res.body.status_code).toBe(status);
  return res.body.detail;
}

/**
 * The value of a metric in Prometheus text: the sum over its series whose labels include `labels`;
 * undefined when it has none.
 */
export function metric(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const seen = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => seen[k] === v)) sum = (sum ?? 0) + Number(match[3]);
  }
  return sum;
}

/**
 * `audience worker` in a process of its own, on this test file's database and the files of
 * `dataDir` (those of the test's server); it serves its health and metrics on `port` (metrics
 * token `worker-metrics`). Its output is added to `output`. A test kills it as it likes.
 */
export async function startWorkerProcess(
  dataDir: string,
  port: number,
  output: string[],
  env: Record<string, string> = {},
): Promise<ChildProcess> {
  const child = spawn(path.join(ROOT, 'node_modules/.bin/node'), ['src/main.js', 'worker'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      DATABASE_URL: await testDatabase(),
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      SERVER_SECRET: 'test-server-secret',
      METRICS_TOKEN: 'worker-metrics',
      LOG_LEVEL: 'warn',
      DEMO_ACCOUNT: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => output.push(String(d)));
  child.stderr!.on('data', (d) => output.push(String(d)));
  return child;
}

/** Kills a child process with `signal` (if it still runs) and waits until it has exited. */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

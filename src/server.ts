import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { adminTokenOf, secretOf, type Config } from './config.ts';
import { systemClock } from './core/clock.ts';
import { flushCompileCache } from './core/compile-cache.ts';
import { settleWhenIdle } from './core/heap.ts';
import * as accounts from './accounts/accounts.ts';
import { forgetDeletedAccountsFiles } from './accounts/delete.ts';
import { writeAccountManifest, type AccountManifest } from './accounts/manifest.ts';
import type { Manifest } from './definitions/schemas.ts';
import { buildApp, type App } from './http/app.ts';
import { logDestination } from './core/log.ts';
import { createLogger } from './http/logging.ts';
import { checkFileStore, openFileStore, SWEEP_EVERY_MS } from './files/store.ts';
import { startWorkerThread, type WorkerThread } from './worker/thread.ts';
import { createServices, type Services } from './services.ts';
import { startEmbeddedDatabase, type EmbeddedDatabase, type Supervision } from './store/embedded.ts';
import { migrate } from './store/migrate.ts';
import { createPool, withTransaction, type Queryable } from './store/pool.ts';
import type { LimitOverrides } from './core/limits.ts';

export const DEMO_MANIFEST = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'manifests', 'demo.json');
// Serialises the first-start demo account between processes sharing one database.
const DEMO_LOCK = 7_418_303;

/**
 * The database of the configuration: `DATABASE_URL`, or the embedded one in the data directory,
 * started again when it dies while `supervise` is given.
 */
export async function openDatabase(
  config: Config,
  supervise?: Supervision,
): Promise<{ pool: pg.Pool; url: string; embedded: EmbeddedDatabase | undefined }> {
  const embedded = config.databaseUrl
    ? undefined
    : await startEmbeddedDatabase(path.join(config.dataDir, 'postgres'), { supervise });
  const url = config.databaseUrl ?? embedded!.url;
  const pool = createPool(url, 20);
  if (config.databaseUrl) await reachDatabase(pool, config.databaseUrl);
  return { pool, url, embedded };
}

/** Connects once, so that a database that cannot be reached fails the start naming DATABASE_URL (without its password). */
async function reachDatabase(pool: pg.Pool, url: string): Promise<void> {
  try {
    await pool.query('select 1');
  } catch (err) {
    await pool.end();
    throw new Error(`DATABASE_URL ${withoutPassword(url)} cannot be reached: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** A new account of `manifest` with one API key, in the caller's transaction: what the demo and the emulator's ready account are. */
export async function createAccountWithKey(
  tx: Queryable,
  services: Services,
  manifest: AccountManifest,
  options: { keyName: string; limits?: LimitOverrides },
): Promise<{ account_id: string; client_id: string; client_secret: string }> {
  const { vendor, region } = services.config;
  const created = await accounts.createAccount(tx, services.feed, vendor, {
    name: manifest.account?.name ?? 'Demo',
    region,
    limits: options.limits,
  });
  await writeAccountManifest(
    tx,
    { feed: services.feed, vendor, serverSecret: services.serverSecret },
    { accountId: created.id, manifest, now: new Date(services.clock()) },
  );
  const key = await services.apiKeys.createApiKey(tx, created.id, { name: options.keyName });
  return { account_id: created.id, client_id: key.client_id, client_secret: key.client_secret };
}

/** The demo account's manifest (manifests/demo.json). */
export async function demoManifest(): Promise<Manifest> {
  return JSON.parse(await fs.readFile(DEMO_MANIFEST, 'utf8')) as Manifest;
}

/** On a database without accounts: the demo account of manifests/demo.json and an API key for it. */
export async function createDemoAccount(
  services: Services,
): Promise<{ account_id: string; client_id: string; client_secret: string } | undefined> {
  const manifest = await demoManifest();
  return withTransaction(services.pool, async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [DEMO_LOCK]);
    if ((await accounts.countAccounts(tx)) > 0) return undefined;
    return createAccountWithKey(tx, services, manifest, { keyName: 'demo' });
  });
}

/** A database URL as the log shows it: without its password. */
function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    parsed.searchParams.delete('password');
    return parsed.toString();
  } catch {
    return 'DATABASE_URL (not shown: it is not a URL)';
  }
}

/** Where this process finds its database, files and secrets, for the start-up log: places, never a secret. */
export async function whereThingsAre(config: Config): Promise<Record<string, string>> {
  const demo = path.join(config.dataDir, 'demo-credentials.json');
  const hasDemo = await fs.access(demo).then(
    () => true,
    () => false,
  );
  const { files } = config;
  return {
    database: config.databaseUrl
      ? withoutPassword(config.databaseUrl)
      : `embedded, in ${path.join(config.dataDir, 'postgres')}`,
    files: files
      ? `bucket ${files.bucket}${files.prefix ? `/${files.prefix}` : ''} at ${files.endpoint}`
      : path.join(config.dataDir, 'files'),
    adminToken: config.adminToken ? 'ADMIN_TOKEN (environment)' : path.join(config.dataDir, 'admin-token'),
    serverSecret: config.serverSecret ? 'SERVER_SECRET (environment)' : path.join(config.dataDir, 'server-secret'),
    ...(hasDemo ? { demoCredentials: demo } : {}),
    region: config.region,
    vendor: config.vendor,
    publicUrl: config.publicUrl,
  };
}

/**
 * Creates DATA_DIR one level at a time and makes a folder in it. fs.mkdir's recursive form loops
 * forever, silently, where a folder cannot be made under one that exists (a path under /proc), so
 * the start would hang instead of failing; after this check every later folder in it can be made.
 */
async function makeDataDir(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !(await exists(at)); at = path.dirname(at)) missing.unshift(at);
  try {
    for (const level of missing) await fs.mkdir(level).catch(unlessExists);
    await fs.rmdir(await fs.mkdtemp(path.join(dir, '.start-check-')));
  } catch (err) {
    throw new Error(`DATA_DIR ${dir} cannot be used: ${(err as Error).message}`, { cause: err });
  }
}

/** Whether a path exists (or is there but cannot be looked at: a later step says why). */
function exists(at: string): Promise<boolean> {
  return fs.stat(at).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'ENOENT',
  );
}

/** Ignores EEXIST: another process made the folder meanwhile. */
function unlessExists(err: NodeJS.ErrnoException): void {
  if (err.code !== 'EEXIST') throw err;
}

/**
 * Fails when the port is taken, before anything is created: a start that would end there must not
 * leave a data directory, a database or a demo account behind. (A program that takes the port
 * between this check and the listen still fails the start, which then stops what it started.)
 */
async function checkPortFree(host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`PORT ${port} is in use on ${host} (EADDRINUSE): stop the program there, or set another PORT`)
          : err,
      ),
    );
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** `audience serve`: the API and the worker in this process (or one of them), until SIGTERM or SIGINT. */
export async function serve(
  config: Config,
  roles: { api: boolean; worker: boolean } = { api: true, worker: true },
): Promise<void> {
  const logger = createLogger(config.logLevel, logDestination(config.logFormat));
  if (config.port !== 0) await checkPortFree(config.host, config.port);
  await makeDataDir(config.dataDir);
  await checkFileStore(openFileStore(config), config.files ? 'FILES_URL' : 'DATA_DIR/files');
  // What this start has started, stopped in the reverse order on SIGTERM or when a later step
  // fails (a port in use): a failed start leaves no database running without its program.
  const started: (() => Promise<unknown>)[] = [];
  const stopStarted = async () => {
    for (const stop of started.splice(0).reverse())
      await stop().catch((err) => logger.error({ err }, 'stopping failed'));
  };
  // Why the process no longer serves (it is stopping, or its database is gone for good): /healthz
  // answers 503 with it, so that a liveness probe sees it.
  let down: string | undefined;
  let embedded: EmbeddedDatabase | undefined;
  // Stops in order (HTTP, jobs, the database) and exits: 0 on a signal, 1 when the database is gone.
  const shutDown = async (why: string, code: number) => {
    if (down) return;
    down = why;
    embedded?.stopping();
    await stopStarted();
    logger.info({ code }, 'stopped');
    process.exit(code);
  };
  const supervision: Supervision = {
    log: (level, fields, msg) => logger[level](fields, msg),
    gaveUp: (err) => {
      logger.fatal(
        { err },
        'the embedded database cannot come back: exiting for a supervisor to start the program again',
      );
      void shutDown('its embedded database could not be started again', 1);
    },
  };
  try {
    const { pool, url, embedded: own } = await openDatabase(config, supervision);
    embedded = own;
    if (own) started.push(() => own.stop());
    started.push(() => pool.end());
    await migrate(pool);
    const inUse = await accounts.vendorWordInUse(pool);
    if (inUse !== undefined && inUse !== config.vendor)
      logger.warn(
        { vendor: config.vendor, accountsVendor: inUse },
        `VENDOR is "${config.vendor}" but the accounts were made with "${inUse}": integrations sending com.${inUse}1.… identifiers find none of the new accounts' built-in ones; start with VENDOR=${inUse} unless that is meant`,
      );
    const adminToken = (await adminTokenOf(config, { create: true }))!;
    const serverSecret = (await secretOf(config, config.serverSecret, 'server-secret', { create: true }))!;
    const services = await createServices(config, pool, systemClock, { adminToken, serverSecret });
    started.push(() => services.close());
    // What killed processes left in the file store (a part of an upload, the files of an account
    // whose delete died before them: personal data) goes now, and later leftovers on each sweep.
    const sweep = async () => {
      const removed = await services.files.sweep();
      if (removed > 0) logger.info({ files: removed }, 'removed the partial files of interrupted writes');
      const forgotten = await forgetDeletedAccountsFiles(pool, services.files);
      if (forgotten > 0) logger.info({ folders: forgotten }, 'removed the files of deleted accounts');
    };
    await sweep();
    const sweeping = setInterval(
      () => void sweep().catch((err) => logger.error({ err }, 'file sweep failed')),
      SWEEP_EVERY_MS,
    );
    sweeping.unref();
    started.push(async () => clearInterval(sweeping));
    logger.info(
      { roles: Object.keys(roles).filter((r) => roles[r as keyof typeof roles]), ...(await whereThingsAre(config)) },
      'starting',
    );
    if (config.demoAccount) {
      const demo = await createDemoAccount(services);
      if (demo) {
        const file = path.join(config.dataDir, 'demo-credentials.json');
        await fs.mkdir(config.dataDir, { recursive: true });
        await fs.writeFile(file, JSON.stringify(demo, null, 2) + '\n', { mode: 0o600 });
        // Its secret stays in the file: standard output ends up in log stores.
        logger.info(
          { account: demo.account_id, file },
          'demo account created; its client_id and client_secret are in the file',
        );
      }
    }
    const log = (msg: string, err?: unknown) => logger.error({ err }, msg);
    // The worker thread (its own isolate: 0.3–0.8 s of CPU to start) starts once the API listens,
    // unless it is all this process does: jobs wait in the database meanwhile, and the API is
    // ready a thread's start sooner. A scrape of /metrics meanwhile waits for its counters.
    let worker: Promise<WorkerThread> | undefined;
    const startWorker = () =>
      (worker = startWorkerThread({ config, databaseUrl: url, secrets: { adminToken, serverSecret } }, log).then(
        (thread) => {
          started.push(() => thread.stop());
          return thread;
        },
      ));
    if (roles.worker && !roles.api) await startWorker();
    // A worker process serves health and metrics too: its container's health check and its job
    // counters (durations, import rows) need an address.
    const app: App = await buildApp(services, {
      logger,
      operationsOnly: !roles.api,
      threadMetrics: roles.worker ? async () => (await worker?.catch(() => undefined))?.metrics() ?? [] : undefined,
      down: () => down,
    });
    started.push(() => app.close());
    await app.ready();
    // The start-up's garbage goes at the first quiet moment once it serves, and again whenever it
    // goes quiet after load (src/core/heap.ts).
    const stopSettling = settleWhenIdle();
    started.push(async () => stopSettling());
    await app.listen({ port: config.port, host: config.host });
    if (roles.api)
      logger.info(
        {
          docs: `${config.publicUrl}/docs`,
          openapi: `${config.publicUrl}/openapi.json`,
          console: `${config.publicUrl}/console`,
        },
        `listening: the HTTP interface is described at ${config.publicUrl}/docs, the console is at ${config.publicUrl}/console`,
      );
    // A thread that cannot start (its database is away) is tried again a second later, as one that
    // died is (src/worker/thread.ts); the API serves meanwhile and /readyz says why.
    const startAfterListen = () =>
      void startWorker().catch((err) => {
        if (down) return;
        log('worker thread did not start; trying again in a second', err);
        setTimeout(startAfterListen, 1000).unref();
      });
    if (roles.worker && roles.api) startAfterListen();
    // What the start compiled is kept for the next one (src/core/compile-cache.ts).
    flushCompileCache();
  } catch (err) {
    await stopStarted();
    throw err;
  }
  const stop = (signal: string) => {
    if (down) return;
    logger.info({ signal }, 'draining in-flight requests and the running job');
    void shutDown('it is stopping', 0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

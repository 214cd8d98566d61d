import crypto from 'node:crypto';
import type pg from 'pg';
import { openFileStore, type FileStore } from './files/store.ts';
import type { UploadSigner } from './files/upload-form.ts';
import { Outbound } from './outbound/outbound.ts';
import type { OutboundTap } from './outbound/recorder.ts';
import type { Config } from './config.ts';
import type { Clock } from './core/clock.ts';
import { AccountDirectory } from './accounts/accounts.ts';
import { DefinitionsCache } from './definitions/definitions.ts';
import type { ApiKeys } from './api-keys/api-keys.ts';
import { ChangeFeed } from './store/changes.ts';
import { MemoryBuckets, RedisBuckets, type Buckets } from './core/rate-limits.ts';
import type { AccountScope, Caller } from './core/scope.ts';
import { Metrics } from './core/metrics.ts';
import { openMailer, type Mailer } from './transactional/mailer.ts';

/**
 * The long-lived parts every thread of a process has: what jobs need. The worker thread has only
 * these (src/worker/thread-entry.ts).
 */
export interface ThreadServices {
  config: Config;
  pool: pg.Pool;
  clock: Clock;
  feed: ChangeFeed;
  accounts: AccountDirectory;
  definitions: DefinitionsCache;
  /** Key of the hashes of locked identities. */
  serverSecret: string;
  /** Uploaded and produced files. */
  files: FileStore;
  /** What this thread counts (src/core/metrics.ts). */
  metrics: Metrics;
  /** HTTP calls to addresses that clients choose (export callbacks), through the address filter. */
  outbound: Outbound;
  /** Where transactional mail goes: the SMTP server of SMTP_URL, or the built-in outbox. */
  mailer: Mailer;
  close(): Promise<void>;
}

/** The long-lived parts of one process, shared by the HTTP routes and the CLI. */
export interface Services extends ThreadServices {
  apiKeys: ApiKeys;
  buckets: Buckets;
  /** The operator token guarding /admin. */
  adminToken: string;
  /** The token that reads /metrics: METRICS_TOKEN, or the operator token. */
  metricsToken: string;
  /** Signs and checks the upload forms of imports. */
  uploads: UploadSigner;
}

/** The parts of a thread that runs jobs only: its change feed, caches, file store, outbound calls and metrics. */
export async function createThreadServices(
  config: Config,
  pool: pg.Pool,
  clock: Clock,
  secrets: { serverSecret: string },
  options: { outboundTap?: OutboundTap } = {},
): Promise<ThreadServices> {
  const feed = new ChangeFeed(pool);
  await feed.start();
  const tap = options.outboundTap;
  const outbound = new Outbound({ allowPrivate: config.callbacksAllowPrivate, tap });
  const mailer = openMailer({ smtpUrl: config.smtpUrl, dkim: config.dkim }, pool, tap);
  return {
    config,
    pool,
    clock,
    feed,
    serverSecret: secrets.serverSecret,
    metrics: new Metrics(),
    files: openFileStore(config),
    accounts: new AccountDirectory(pool, feed),
    definitions: new DefinitionsCache(pool, feed),
    outbound,
    mailer,
    async close() {
      await mailer.close();
      await outbound.close();
      await feed.close();
    },
  };
}

/**
 * Every part, for the thread that serves HTTP. API keys and tokens (with jose) and upload forms are
 * loaded here, so that a thread that only runs jobs does not load them (about 2 MB).
 */
export async function createServices(
  config: Config,
  pool: pg.Pool,
  clock: Clock,
  secrets: { adminToken: string; serverSecret: string },
  options: { outboundTap?: OutboundTap } = {},
): Promise<Services> {
  const base = await createThreadServices(config, pool, clock, secrets, options);
  const [{ ApiKeys }, { UploadSigner }] = await Promise.all([
    import('./api-keys/api-keys.ts'),
    import('./files/upload-form.ts'),
  ]);
  const apiKeys = new ApiKeys({
    pool,
    feed: base.feed,
    clock,
    region: config.region,
    serverSecret: secrets.serverSecret,
  });
  // A start that fails here (a SERVER_SECRET that opens no signing key) leaves no listener behind.
  await apiKeys.ensureSigningKey().catch(async (err) => {
    await base.close();
    throw err;
  });
  const buckets = config.redisUrl ? await RedisBuckets.connect(config.redisUrl, clock) : new MemoryBuckets(clock);
  const uploads = new UploadSigner({
    accessKey: 'audience',
    secret: crypto.createHmac('sha256', secrets.serverSecret).update('uploads').digest('hex'),
    region: config.region,
    url: `${config.publicUrl}/files/uploads`,
  });
  return {
    ...base,
    apiKeys,
    buckets,
    uploads,
    adminToken: secrets.adminToken,
    metricsToken: config.metricsToken ?? secrets.adminToken,
    async close() {
      await buckets.close();
      await base.close();
    },
  };
}

/**
 * The scope of a domain operation on an account: at the start of a request (with its caller) or
 * of a job (without one). Throws when the account no longer exists.
 */
export async function accountScope(
  services: ThreadServices,
  accountId: string,
  caller?: Caller,
): Promise<AccountScope> {
  const account = await services.accounts.get(accountId);
  if (!account) throw new Error(`account ${accountId} no longer exists`);
  const defs = await services.definitions.get(accountId);
  return {
    accountId,
    defs,
    limits: account.limits,
    secret: services.serverSecret,
    now: new Date(services.clock()),
    ...(caller ? { caller } : {}),
  };
}

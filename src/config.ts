import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import tty from 'node:tty';
import { parseFilesUrl, type S3Location } from './files/location.ts';
import type { LogFormat } from './core/log.ts';
import type { DkimKey } from './transactional/mailer.ts';

/** Every setting of the program, read once from the environment (README "Configuration"). */
export interface Config {
  port: number;
  host: string;
  /** Unset: the embedded PostgreSQL in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  /** The vendor word of built-in identifiers (`com.<vendor>1.…`) and of the `x-<vendor>-auth` header. */
  vendor: string;
  /** The region this process serves (SPEC §1.8): tokens of other regions are refused. */
  region: string;
  publicUrl: string;
  /** FILES_URL: the bucket that keeps files. Unset: the folder `dataDir/files`. */
  files: S3Location | undefined;
  /** SMTP_URL: the server transactional mail is sent through. Unset: the built-in outbox (docs/mail.md). */
  smtpUrl: string | undefined;
  /** DKIM_DOMAIN, DKIM_SELECTOR and DKIM_PRIVATE_KEY (or DKIM_PRIVATE_KEY_FILE): every message is signed when set. */
  dkim: DkimKey | undefined;
  /** TRACKING_URL: the base of the open, click and unsubscribe links in messages. Unset: the public URL. */
  trackingUrl: string;
  redisUrl: string | undefined;
  logLevel: string;
  /** LOG_FORMAT: readable lines (`text`) when standard output is a terminal, else JSON lines. */
  logFormat: LogFormat;
  /** Unset: generated once into `dataDir/admin-token`. */
  adminToken: string | undefined;
  /** The token that reads /metrics; unset: the operator token. */
  metricsToken: string | undefined;
  /** Key of the hashes that keep locked identities (SPEC §3.2). Unset: generated once into `dataDir/server-secret`. */
  serverSecret: string | undefined;
  /** Create the demo account when the database holds no account. */
  demoAccount: boolean;
  /** CALLBACKS_ALLOW_PRIVATE: let callbacks reach loopback and private addresses (development and tests only; docs/security.md). */
  callbacksAllowPrivate: boolean;
}

/** The DKIM settings: all three or none, so that a half-configured key is an error at start, not unsigned mail. */
function readDkim(env: NodeJS.ProcessEnv): DkimKey | undefined {
  const file = env.DKIM_PRIVATE_KEY_FILE || undefined;
  if (file && env.DKIM_PRIVATE_KEY) throw new Error('Give DKIM_PRIVATE_KEY or DKIM_PRIVATE_KEY_FILE, not both');
  let privateKey = env.DKIM_PRIVATE_KEY || undefined;
  if (file) {
    try {
      privateKey = fs.readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`DKIM_PRIVATE_KEY_FILE: cannot read ${file}: ${(err as Error).message}`);
    }
  }
  const domainName = env.DKIM_DOMAIN || undefined;
  const keySelector = env.DKIM_SELECTOR || undefined;
  if (!privateKey && !domainName && !keySelector) return undefined;
  if (!privateKey || !domainName || !keySelector)
    throw new Error(
      'DKIM signing needs DKIM_DOMAIN, DKIM_SELECTOR and DKIM_PRIVATE_KEY (or DKIM_PRIVATE_KEY_FILE) together',
    );
  if (!/-----BEGIN (RSA )?PRIVATE KEY-----/.test(privateKey))
    throw new Error('DKIM_PRIVATE_KEY must be a PEM private key (-----BEGIN PRIVATE KEY-----)');
  return { domainName, keySelector, privateKey };
}

/** An http(s) base address without its trailing slashes; throws naming the variable. */
function baseUrl(name: string, value: string): string {
  if (!/^https?:\/\/[^/]/.test(value) || !URL.canParse(value))
    throw new Error(`${name} must be an http or https address, got "${value}"`);
  return value.replace(/\/+$/, '');
}

/**
 * DATABASE_URL: a postgres:// or postgresql:// URL. pg reads anything else as a host name or a
 * socket (localhost:5432 became a connection to 127.0.0.1:5432 of database "localhost:5432"). The
 * value is not echoed: it may hold a password.
 */
function databaseUrl(value: string | undefined): string | undefined {
  if (!value) return undefined;
  if (!/^postgres(ql)?:\/\//.test(value) || !URL.canParse(value))
    throw new Error(
      'DATABASE_URL must be a postgres:// or postgresql:// URL (postgres://USER:PASSWORD@HOST:5432/DATABASE), got a value of another form',
    );
  return value;
}

export const REGIONS = ['eu', 'apac'] as const;

/** Every environment variable the program reads, its default and what it sets: `audience serve --help` lists them (README "Configuration" says more). */
export const ENVIRONMENT: readonly [name: string, fallback: string, meaning: string][] = [
  ['PORT', '8080', 'HTTP port'],
  ['HOST', '0.0.0.0', 'address to listen on; 127.0.0.1 keeps the service to this machine'],
  [
    'DATABASE_URL',
    'unset',
    'PostgreSQL 15 or later, or a Citus coordinator; unset: the embedded one in DATA_DIR/postgres',
  ],
  ['DATA_DIR', './data', 'embedded database, files, generated operator token and server secret, demo credentials'],
  ['VENDOR', 'vendor', 'the vendor word of built-in identifiers (com.<VENDOR>1.…); set it before the first start'],
  ['REGION', 'eu', 'the region this process serves: eu or apac'],
  ['PUBLIC_URL', 'http://localhost:$PORT', 'the address clients reach this service at'],
  ['ADMIN_TOKEN', 'generated', 'the operator token of /admin; unset: generated into DATA_DIR/admin-token'],
  ['METRICS_TOKEN', 'the operator token', 'the bearer token that reads /metrics'],
  [
    'SERVER_SECRET',
    'generated',
    "key of locked identities' hashes, the same in every process; unset: DATA_DIR/server-secret",
  ],
  ['REDIS_URL', 'unset', 'share rate-limit budgets between API processes'],
  ['LOG_LEVEL', 'info', 'silent, warn, info or debug'],
  [
    'LOG_FORMAT',
    'text on a terminal, else json',
    'json: a JSON object a line (files, pipes, log stores); text: readable lines',
  ],
  ['DEMO_ACCOUNT', 'true', 'false: no demo account on an empty database'],
  [
    'FILES_URL',
    'unset',
    'an S3-compatible bucket for files: https://KEY:SECRET@host/bucket[/prefix]; unset: DATA_DIR/files',
  ],
  ['SMTP_URL', 'unset', 'the SMTP server of transactional mail; unset: the built-in outbox'],
  ['DKIM_DOMAIN, DKIM_SELECTOR, DKIM_PRIVATE_KEY(_FILE)', 'unset', 'sign every message with DKIM: all or none'],
  ['TRACKING_URL', 'PUBLIC_URL', 'the base of open, click and unsubscribe links in messages'],
  ['CALLBACKS_ALLOW_PRIVATE', 'false', 'true lets callbacks reach private addresses: development and tests only'],
  ['AUDIENCE_URL', 'http://127.0.0.1:$PORT', 'where the operator commands reach the server'],
  [
    'AUDIENCE_EMULATOR_CACHE',
    '~/.cache/audience/emulator',
    'emulate only: where the migrated database each emulator copies is prepared once',
  ],
];

/** Reads the configuration from `env`; throws naming the variable at fault. */
export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`PORT must be a port number, got "${env.PORT}"`);
  const vendor = env.VENDOR ?? 'vendor';
  if (!/^[a-z][a-z0-9-]*$/.test(vendor)) throw new Error(`VENDOR must be a lower-case word, got "${vendor}"`);
  const region = env.REGION ?? 'eu';
  if (!(REGIONS as readonly string[]).includes(region))
    throw new Error(`REGION must be one of ${REGIONS.join(', ')}, got "${region}"`);
  // A switch that lowers a guard takes exactly "true": a typo must not open it, nor be ignored.
  const allowPrivate = env.CALLBACKS_ALLOW_PRIVATE ?? 'false';
  if (allowPrivate !== 'true' && allowPrivate !== 'false')
    throw new Error(`CALLBACKS_ALLOW_PRIVATE must be true or false, got "${allowPrivate}"`);
  const smtpUrl = env.SMTP_URL || undefined;
  if (smtpUrl && !/^smtps?:\/\/[^/]/.test(smtpUrl))
    throw new Error(`SMTP_URL must be smtp://[user:password@]host[:port] or smtps://…, got a URL of another form`);
  // Readable lines for a person at a terminal; JSON lines for files, pipes and log stores.
  const logFormat = env.LOG_FORMAT || (tty.isatty(1) ? 'text' : 'json');
  if (logFormat !== 'json' && logFormat !== 'text')
    throw new Error(`LOG_FORMAT must be json or text, got "${logFormat}"`);
  const publicUrl = (env.PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, '');
  return {
    port,
    host: env.HOST ?? '0.0.0.0',
    databaseUrl: databaseUrl(env.DATABASE_URL),
    dataDir: path.resolve(env.DATA_DIR ?? './data'),
    vendor,
    region,
    publicUrl,
    files: env.FILES_URL ? parseFilesUrl(env.FILES_URL) : undefined,
    smtpUrl,
    dkim: readDkim(env),
    trackingUrl: env.TRACKING_URL ? baseUrl('TRACKING_URL', env.TRACKING_URL) : publicUrl,
    redisUrl: env.REDIS_URL || undefined,
    logLevel: env.LOG_LEVEL ?? 'info',
    logFormat,
    adminToken: env.ADMIN_TOKEN || undefined,
    metricsToken: env.METRICS_TOKEN || undefined,
    serverSecret: env.SERVER_SECRET || undefined,
    demoAccount: (env.DEMO_ACCOUNT ?? 'true') !== 'false',
    callbacksAllowPrivate: allowPrivate === 'true',
  };
}

/** A secret given in the environment, or read from `DATA_DIR/<file>`; with `create`, generated there once (mode 0600). */
export async function secretOf(
  config: Config,
  given: string | undefined,
  file: string,
  { create }: { create: boolean },
): Promise<string | undefined> {
  if (given) return given;
  const at = path.join(config.dataDir, file);
  try {
    return (await fsp.readFile(at, 'utf8')).trim();
  } catch {
    if (!create) return undefined;
    await fsp.mkdir(config.dataDir, { recursive: true });
    // Taken here: importing node:crypto costs a command of the command line 30 ms of CPU.
    const { randomBytes } = process.getBuiltinModule('node:crypto');
    // 'wx': when two processes start together, the first one's secret wins.
    await fsp.writeFile(at, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' }).catch(() => {});
    return (await fsp.readFile(at, 'utf8')).trim();
  }
}

/** ADMIN_TOKEN, or the operator token generated once into the data directory. */
export function adminTokenOf(config: Config, options: { create: boolean }): Promise<string | undefined> {
  return secretOf(config, config.adminToken, 'admin-token', options);
}

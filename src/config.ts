import path from 'node:path';
import { parseFilesUrl, type S3Location } from './files/s3.ts';

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
  smtpUrl: string | undefined;
  redisUrl: string | undefined;
  logLevel: string;
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

export const REGIONS = ['eu', 'apac'] as const;

/** Reads the configuration from `env`; throws naming the variable at fault. */
export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, got "${env.PORT}"`);
  const vendor = env.VENDOR ?? 'vendor';
  if (!/^[a-z][a-z0-9-]*$/.test(vendor)) throw new Error(`VENDOR must be a lower-case word, got "${vendor}"`);
  const region = env.REGION ?? 'eu';
  if (!(REGIONS as readonly string[]).includes(region)) throw new Error(`REGION must be one of ${REGIONS.join(', ')}, got "${region}"`);
  // A switch that lowers a guard takes exactly "true": a typo must not open it, nor be ignored.
  const allowPrivate = env.CALLBACKS_ALLOW_PRIVATE ?? 'false';
  if (allowPrivate !== 'true' && allowPrivate !== 'false') throw new Error(`CALLBACKS_ALLOW_PRIVATE must be true or false, got "${allowPrivate}"`);
  return {
    port,
    host: env.HOST ?? '0.0.0.0',
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: path.resolve(env.DATA_DIR ?? './data'),
    vendor,
    region,
    publicUrl: (env.PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, ''),
    files: env.FILES_URL ? parseFilesUrl(env.FILES_URL) : undefined,
    smtpUrl: env.SMTP_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    logLevel: env.LOG_LEVEL ?? 'info',
    adminToken: env.ADMIN_TOKEN || undefined,
    metricsToken: env.METRICS_TOKEN || undefined,
    serverSecret: env.SERVER_SECRET || undefined,
    demoAccount: (env.DEMO_ACCOUNT ?? 'true') !== 'false',
    callbacksAllowPrivate: allowPrivate === 'true',
  };
}

import fs from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { expect } from 'vitest';
import { expectProblem as expectProblemDocument, serverWithPool, TestServer, type Response } from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';

// What the tests of imports (src/imports/imports-*.test.ts) share: their server (with its worker),
// a connection of its own to its database, the names and manifests they use, and the requests
// that create, upload and follow an import.

export let server: TestServer;
export let db: pg.Pool;

/** Starts the test file's server (with its worker) and connection, before its tests. */
export function importsServer(): void {
  serverWithPool({ worker: true, connections: 3 }, (s, d) => {
    server = s;
    db = d;
  });
}

export const V = 'com.vendor1';
export const S = `${V}.sections.user-created.shop`;
export const BLOG = `${V}.sections.user-created.blog`;
export const EMAIL = `${V}.keyspaces.email`;
export const MOBILE = `${V}.keyspaces.mobile`;
export const CRM = `${V}.keyspaces.crm-id`;
export const PARTNER = `${V}.integrations.keyspaces.5f2b9c1e.partner`;
export const LOYALTY = `${V}.integrations.keyspaces.0a1b2c3d.loyalty`;
export const CH_EMAIL = `${V}.channels.email`;
export const CH_SMS = `${V}.channels.sms`;
export const WEEKLY = `${V}.topics.user-created.weekly-news`;
export const SMS_OFFERS = `${V}.topics.user-created.sms-offers`;
export const MAIL_OFFERS = `${V}.topics.user-created.email-offers`;
export const VIP = `${V}.tags.user-created.vip`;
export const STAFF = `${V}.tags.user-created.staff`;
export const MB = 1024 * 1024;
export const FORM_FIELDS = [
  'key',
  'success_action_status',
  'policy',
  'content-type',
  'x-store-meta-id',
  'x-store-algorithm',
  'x-store-credential',
  'x-store-date',
  'x-store-signature',
];
/** Limits lifted for the tests that are not about them. */
export const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  import_requests_per_minute: null,
  pending_imports: null,
};

/** An account with channel-specific topics, keyspaces with and without manage_subscriptions, and read-only types. */
export const MANIFEST: Manifest = {
  keyspaces: [
    { discriminator: PARTNER, name: 'Partner id', manage_subscriptions: false },
    { discriminator: LOYALTY, name: 'Loyalty id', manage_subscriptions: true },
  ],
  sections: [
    {
      name: 'Shop',
      attributes: [
        {
          name: 'Points',
          versions: [{ type: ['Number'], deprecated_at: '2026-01-01T00:00:00Z' }, { type: ['Number with decimal'] }],
        },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
        { name: 'Last seen', versions: [{ type: ['Timestamp'] }] },
        { name: 'Member', versions: [{ type: ['True/False'] }] },
        {
          name: 'Score',
          keyspace_permissions: { [EMAIL]: ['read'], [CRM]: ['read', 'write'] },
          versions: [{ type: ['Text'] }],
        },
      ],
      tags: [{ name: 'VIP' }, { name: 'Staff', keyspace_permissions: { [EMAIL]: ['read'], [CRM]: ['read', 'write'] } }],
      topics: [
        { name: 'Weekly news' },
        { name: 'SMS offers', channel: CH_SMS },
        { name: 'Email offers', channel: CH_EMAIL },
      ],
    },
    { name: 'Blog', topics: [{ name: 'Digest' }] },
  ],
};

/** An account without channel-specific topics (version 1 may map several keyspaces). */
export const PLAIN: Manifest = {
  sections: [
    {
      name: 'Shop',
      attributes: [{ name: 'Points', versions: [{ type: ['Number with decimal'] }] }],
      tags: [{ name: 'VIP' }],
      topics: [{ name: 'Weekly news' }],
    },
  ],
};

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Account {
  accountId: string;
  token: string;
  v: Record<string, string>;
}

/** A new account with the manifest, and the current version id of each attribute by its last name part ("firstname", "points" …). */
export async function account(
  manifest: Manifest = MANIFEST,
  limits: Record<string, number | null> = NO_LIMITS,
  on: TestServer = server,
): Promise<Account> {
  const { accountId, token } = await on.login(manifest, limits);
  const attributes = (await on.request('GET', `/audience/sections/${S}/attributes`, { token })).body.items as {
    discriminator: string;
    versions: { id: string }[];
  }[];
  const v = Object.fromEntries(attributes.map((a) => [a.discriminator.split('.').pop()!, a.versions.at(-1)!.id]));
  return { accountId, token, v };
}

/** A problem document (test/app.ts) whose detail matches `detail`. */
export function expectProblem(res: Response, status: number, detail?: RegExp): void {
  const text = expectProblemDocument(res, status);
  if (detail) expect(text).toMatch(detail);
}

export function create(
  a: Account,
  version: 1 | 2,
  body: unknown,
  section = S,
  on: TestServer = server,
): Promise<Response> {
  return on.request('POST', `${version === 2 ? '/v2' : ''}/audience/sections/${section}/imports`, {
    token: a.token,
    body,
  });
}

export async function created(a: Account, version: 1 | 2, body: unknown, on: TestServer = server): Promise<Created> {
  const res = await create(a, version, body, S, on);
  expect(res.status, res.text).toBe(201);
  return res.body;
}

export interface Created {
  import_id: string;
  file_upload_url: string;
  file_upload_body: Record<string, string>;
  file_upload_url_expires_at: string;
}

export async function asResponse(res: globalThis.Response): Promise<Response> {
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: /json/.test(res.headers.get('content-type') ?? '') && text ? JSON.parse(text) : text,
  };
}

export const uploadUrl = (c: Created, on: TestServer = server) => on.url + new URL(c.file_upload_url).pathname;

/**
 * The upload of ENDPOINTS.md "Imports" to the service at `baseUrl` (a test server's, an
 * emulator's): every form field in order (`fields` replacing some, `omit` leaving some out), then
 * the part `file` (first with `fileFirst`); no bearer token.
 */
export function sendImportFile(
  baseUrl: string,
  c: Pick<Created, 'file_upload_url' | 'file_upload_body'>,
  file: string,
  options: { fields?: Record<string, string>; omit?: string[]; fileFirst?: boolean } = {},
): Promise<globalThis.Response> {
  const form = new FormData();
  const append = () => form.append('file', new Blob([file], { type: 'text/csv' }), 'people.csv');
  if (options.fileFirst) append();
  for (const [k, v] of Object.entries({ ...c.file_upload_body, ...options.fields }))
    if (!options.omit?.includes(k)) form.append(k, v);
  if (!options.fileFirst) append();
  return fetch(baseUrl + new URL(c.file_upload_url).pathname, { method: 'POST', body: form });
}

/** sendImportFile to this file's server (or `on`), its answer read. */
export async function upload(
  c: Created,
  file: string,
  options: { fields?: Record<string, string>; omit?: string[]; fileFirst?: boolean; on?: TestServer } = {},
): Promise<Response> {
  return asResponse(await sendImportFile((options.on ?? server).url, c, file, options));
}

export function status(a: Account, importId: string, section = S, on: TestServer = server): Promise<Response> {
  return on.request('GET', `/audience/sections/${section}/imports/${importId}`, { token: a.token });
}

/** Polls the status until the import has ended (bounded). */
export async function finished(a: Account, importId: string, on: TestServer = server, tries = 600): Promise<any> {
  for (let i = 0; i < tries; i++) {
    const res = await status(a, importId, S, on);
    expect(res.status, res.text).toBe(200);
    if (res.body.result.status === 'completed' || res.body.result.status === 'error') return res.body;
    await sleep(50);
  }
  throw new Error(`import ${importId} did not end`);
}

/** Creates an import, uploads `csv` and waits for the end; checks that the counts add up. */
export async function runImport(a: Account, version: 1 | 2, body: unknown, csv: string): Promise<any> {
  const c = await created(a, version, body);
  const up = await upload(c, csv);
  expect(up.status, up.text).toBe(204);
  const done = await finished(a, c.import_id);
  expectCountsAddUp(done);
  return done;
}

export function expectCountsAddUp(s: any): void {
  const { result, report } = s;
  for (const n of [
    result.profiles_found,
    result.profiles_processed,
    result.profiles_failed,
    report.profiles_new,
    report.profiles_updated,
    report.profiles_not_changed,
    report.profiles_failed,
  ]) {
    expect(Number.isInteger(n)).toBe(true);
  }
  expect(result.profiles_processed + result.profiles_failed).toBe(result.profiles_found);
  expect(report.profiles_new + report.profiles_updated + report.profiles_not_changed).toBe(result.profiles_processed);
  expect(report.profiles_failed).toBe(result.profiles_failed);
  if (result.profiles_failed <= 1000) expect(report.failures).toHaveLength(result.profiles_failed);
}

export function attributesOf(a: Account, keyspace: string, key: string, section = S): Promise<Response> {
  return server.request(
    'GET',
    `/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/sections/${section}/attributes`,
    { token: a.token },
  );
}

export async function consentsOf(
  a: Account,
  keyspace: string,
  key: string,
): Promise<{ topic_discriminator: string; channel_discriminator: string; type: string; source: string }[]> {
  const res = await server.request(
    'GET',
    `/v2/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/sections/${S}/consents`,
    { token: a.token },
  );
  expect(res.status, res.text).toBe(200);
  return res.body.items;
}

export const v2 = (keyspace: string, column: string, rest: Record<string, unknown>) => ({
  keyspace_mapping: { keyspace_discriminator: keyspace, field_selector: column },
  ...rest,
});
export const attr = (field_selector: string, attribute_version_id: string) => ({
  field_selector,
  attribute_version_id,
});

/** Files under the account's import folder of a server's file store (including partial ones). */
export async function storedFiles(accountId: string, on: TestServer = server): Promise<string[]> {
  return fs.readdir(path.join(on.services.config.dataDir, 'files', 'imports', accountId)).catch(() => []);
}

/** Waits (bounded) until the account's import jobs are gone: a job ends a moment after its import has. */
export async function jobsEnded(a: Account): Promise<void> {
  for (
    let i = 0;
    i < 200 &&
    (await db.query(`select 1 from jobs where account_id = $1 and kind = 'import'`, [a.accountId])).rowCount! > 0;
    i++
  )
    await sleep(25);
}

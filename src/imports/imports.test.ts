import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectProblem as expectProblemDocument,
  metric,
  serverWithPool,
  startWorkerProcess,
  stopProcess,
  TestServer,
  type Response,
} from '../../test/app.ts';
import { serverOnS3, type S3 } from '../../test/s3.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { freePort } from '../store/embedded.ts';
import { BATCH_ROWS } from './ingest.ts';
import { MAX_ATTEMPTS } from '../jobs/queue.ts';
import { startWorker as startInProcessWorker } from '../worker/worker.ts';

const V = 'com.vendor1';
const S = `${V}.sections.user-created.shop`;
const BLOG = `${V}.sections.user-created.blog`;
const EMAIL = `${V}.keyspaces.email`;
const MOBILE = `${V}.keyspaces.mobile`;
const CRM = `${V}.keyspaces.crm-id`;
const PARTNER = `${V}.integrations.keyspaces.5f2b9c1e.partner`;
const LOYALTY = `${V}.integrations.keyspaces.0a1b2c3d.loyalty`;
const CH_EMAIL = `${V}.channels.email`;
const CH_SMS = `${V}.channels.sms`;
const WEEKLY = `${V}.topics.user-created.weekly-news`;
const SMS_OFFERS = `${V}.topics.user-created.sms-offers`;
const MAIL_OFFERS = `${V}.topics.user-created.email-offers`;
const VIP = `${V}.tags.user-created.vip`;
const STAFF = `${V}.tags.user-created.staff`;
const MB = 1024 * 1024;
const FORM_FIELDS = [
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
const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  import_requests_per_minute: null,
  pending_imports: null,
};

/** An account with channel-specific topics, keyspaces with and without manage_subscriptions, and read-only types. */
const MANIFEST: Manifest = {
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
const PLAIN: Manifest = {
  sections: [
    {
      name: 'Shop',
      attributes: [{ name: 'Points', versions: [{ type: ['Number with decimal'] }] }],
      tags: [{ name: 'VIP' }],
      topics: [{ name: 'Weekly news' }],
    },
  ],
};

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true, connections: 3 }, (s, d) => {
  server = s;
  db = d;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Account {
  accountId: string;
  token: string;
  v: Record<string, string>;
}

/** A new account with the manifest, and the current version id of each attribute by its last name part ("firstname", "points" …). */
async function account(
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
function expectProblem(res: Response, status: number, detail?: RegExp): void {
  const text = expectProblemDocument(res, status);
  if (detail) expect(text).toMatch(detail);
}

function create(a: Account, version: 1 | 2, body: unknown, section = S, on: TestServer = server): Promise<Response> {
  return on.request('POST', `${version === 2 ? '/v2' : ''}/audience/sections/${section}/imports`, {
    token: a.token,
    body,
  });
}

async function created(a: Account, version: 1 | 2, body: unknown, on: TestServer = server): Promise<Created> {
  const res = await create(a, version, body, S, on);
  expect(res.status, res.text).toBe(201);
  return res.body;
}

interface Created {
  import_id: string;
  file_upload_url: string;
  file_upload_body: Record<string, string>;
  file_upload_url_expires_at: string;
}

async function asResponse(res: globalThis.Response): Promise<Response> {
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: /json/.test(res.headers.get('content-type') ?? '') && text ? JSON.parse(text) : text,
  };
}

const uploadUrl = (c: Created, on: TestServer = server) => on.url + new URL(c.file_upload_url).pathname;

/** The upload of ENDPOINTS.md "Imports": every form field in order, then the part `file`; no bearer token. */
async function upload(
  c: Created,
  file: string,
  options: { fields?: Record<string, string>; omit?: string[]; fileFirst?: boolean; on?: TestServer } = {},
): Promise<Response> {
  const form = new FormData();
  const append = () => form.append('file', new Blob([file], { type: 'text/csv' }), 'people.csv');
  if (options.fileFirst) append();
  for (const [k, v] of Object.entries({ ...c.file_upload_body, ...options.fields }))
    if (!options.omit?.includes(k)) form.append(k, v);
  if (!options.fileFirst) append();
  return asResponse(await fetch(uploadUrl(c, options.on), { method: 'POST', body: form }));
}

function status(a: Account, importId: string, section = S, on: TestServer = server): Promise<Response> {
  return on.request('GET', `/audience/sections/${section}/imports/${importId}`, { token: a.token });
}

/** Polls the status until the import has ended (bounded). */
async function finished(a: Account, importId: string, on: TestServer = server, tries = 600): Promise<any> {
  for (let i = 0; i < tries; i++) {
    const res = await status(a, importId, S, on);
    expect(res.status, res.text).toBe(200);
    if (res.body.result.status === 'completed' || res.body.result.status === 'error') return res.body;
    await sleep(50);
  }
  throw new Error(`import ${importId} did not end`);
}

/** Creates an import, uploads `csv` and waits for the end; checks that the counts add up. */
async function runImport(a: Account, version: 1 | 2, body: unknown, csv: string): Promise<any> {
  const c = await created(a, version, body);
  const up = await upload(c, csv);
  expect(up.status, up.text).toBe(204);
  const done = await finished(a, c.import_id);
  expectCountsAddUp(done);
  return done;
}

function expectCountsAddUp(s: any): void {
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

function attributesOf(a: Account, keyspace: string, key: string, section = S): Promise<Response> {
  return server.request(
    'GET',
    `/audience/keyspaces/${keyspace}/profiles/${encodeURIComponent(key)}/sections/${section}/attributes`,
    { token: a.token },
  );
}

async function consentsOf(
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

const v2 = (keyspace: string, column: string, rest: Record<string, unknown>) => ({
  keyspace_mapping: { keyspace_discriminator: keyspace, field_selector: column },
  ...rest,
});
const attr = (field_selector: string, attribute_version_id: string) => ({ field_selector, attribute_version_id });

/** Files under the account's import folder of a server's file store (including partial ones). */
async function storedFiles(accountId: string, on: TestServer = server): Promise<string[]> {
  return fs.readdir(path.join(on.services.config.dataDir, 'files', 'imports', accountId)).catch(() => []);
}

describe('creating an import', () => {
  let a: Account;
  beforeAll(async () => {
    a = await account();
  });

  it('IMP-01 version 1 (keyspace_mappings) → 201 {import_id, file_upload_url, file_upload_body, file_upload_url_expires_at}', async () => {
    const res = await create(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: false }],
      attribute_mappings: [attr('first', a.v.firstname)],
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body).sort()).toEqual([
      'file_upload_body',
      'file_upload_url',
      'file_upload_url_expires_at',
      'import_id',
    ]);
    expect(res.body.import_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new URL(res.body.file_upload_url).pathname).toBe('/files/uploads');
    expect(typeof res.body.file_upload_body).toBe('object');
    expect(typeof res.body.file_upload_url_expires_at).toBe('string');
  });

  it('IMP-02 version 2 (keyspace_mapping) → 201 with the same shape', async () => {
    const res = await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual([
      'file_upload_body',
      'file_upload_url',
      'file_upload_url_expires_at',
      'import_id',
    ]);
    expect(res.body.import_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new URL(res.body.file_upload_url).pathname).toBe('/files/uploads');
  });

  it('IMP-03 file_upload_body holds the S3-style signed form fields (x-store-…) in order, with a signed policy of key, type, size and expiry', async () => {
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    const body = c.file_upload_body;
    expect(Object.keys(body)).toEqual(FORM_FIELDS);
    for (const v of Object.values(body)) expect(typeof v).toBe('string');
    expect(body.key).toContain(c.import_id);
    expect(body.success_action_status).toBe('204');
    expect(body['content-type']).toBe('text/csv');
    expect(body['x-store-algorithm']).toBe('AWS4-HMAC-SHA256');
    expect(body['x-store-credential']).toMatch(/^[^/]+\/\d{8}\/[^/]+\/s3\/aws4_request$/);
    expect(body['x-store-date']).toMatch(/^\d{8}T\d{6}Z$/);
    expect(body['x-store-signature']).toMatch(/^[0-9a-f]{64}$/);
    const policy = JSON.parse(Buffer.from(body.policy, 'base64').toString('utf8'));
    expect(policy.expiration).toBe(new Date(c.file_upload_url_expires_at).toISOString());
    expect(policy.conditions).toContainEqual({ key: body.key });
    expect(policy.conditions).toContainEqual(['content-length-range', 0, 50 * MB]);
    expect(policy.conditions).toContainEqual({ 'x-store-meta-id': body['x-store-meta-id'] });
  });

  it('IMP-04 file_upload_url_expires_at is 5 minutes after the request', async () => {
    const before = server.clock.now;
    const c = await created(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    });
    expect(c.file_upload_url_expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Date.parse(c.file_upload_url_expires_at) - before).toBe(5 * 60 * 1000);
  });

  it('IMP-12 an import request for an unknown section → 404 (both versions)', async () => {
    const unknown = `${V}.sections.user-created.nope`;
    expectProblem(
      await create(
        a,
        1,
        {
          keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
          attribute_mappings: [attr('first', a.v.firstname)],
        },
        unknown,
      ),
      404,
    );
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }), unknown),
      404,
    );
    expectProblem(
      await server.request('GET', `/audience/sections/${unknown}/imports/${crypto.randomUUID()}`, { token: a.token }),
      404,
    );
  });

  it('AUTH-09 creating and reading imports need the bearer token', async () => {
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    expectProblem(await server.request('POST', `/v2/audience/sections/${S}/imports`, { body }), 401);
    expectProblem(await server.request('POST', `/audience/sections/${S}/imports`, { body }), 401);
    expectProblem(await server.request('GET', `/audience/sections/${S}/imports/${crypto.randomUUID()}`), 401);
  });

  it('IMP-13 version 2 requires keyspace_mapping {keyspace_discriminator, field_selector}; missing → 400', async () => {
    const attributes = [attr('first', a.v.firstname)];
    expectProblem(await create(a, 2, { attribute_mappings: attributes }), 400, /keyspace_mapping/);
    expectProblem(
      await create(a, 2, { keyspace_mapping: { field_selector: 'email' }, attribute_mappings: attributes }),
      400,
      /keyspace_discriminator/,
    );
    expectProblem(
      await create(a, 2, { keyspace_mapping: { keyspace_discriminator: EMAIL }, attribute_mappings: attributes }),
      400,
      /field_selector/,
    );
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: '' },
        attribute_mappings: attributes,
      }),
      400,
    );
    // Version 2 has no keyspace_mappings (the version 1 form).
    expectProblem(
      await create(a, 2, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: attributes,
      }),
      400,
    );
    // An unknown keyspace.
    expectProblem(await create(a, 2, v2(`${V}.keyspaces.nope`, 'email', { attribute_mappings: attributes })), 404);
  });

  it('IMP-14 attribute_mappings: required, 1 to 100 items {field_selector, attribute_version_id}; empty → 400, over 100 → 413', async () => {
    expectProblem(await create(a, 2, v2(EMAIL, 'email', {})), 400, /attribute_mappings/);
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [] })), 400);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [],
      }),
      400,
    );
    const many = Array.from({ length: 101 }, (_, i) => attr(`c${i}`, a.v.firstname));
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: many })), 413);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: many,
      }),
      413,
    );
    expect((await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: many.slice(0, 100) }))).status).toBe(201);
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [{ field_selector: 'first' }] })),
      400,
      /attribute_version_id/,
    );
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [{ attribute_version_id: a.v.firstname }] })),
      400,
      /field_selector/,
    );
    // A version id the section does not define.
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('x', '999999999')] })), 400);
  });

  it('IMP-15 consent_mappings: at most 5 items, each a consents array of {resubscribe_if_opted_out, field_selector, channel_discriminator, topic_discriminator, type}; over 5 → 413', async () => {
    const consent = (topic: string, channel?: string) => ({
      resubscribe_if_opted_out: false,
      field_selector: 'c',
      topic_discriminator: topic,
      type: 'opt-in',
      ...(channel ? { channel_discriminator: channel } : {}),
    });
    const topics: [string, string][] = [
      [WEEKLY, CH_EMAIL],
      [WEEKLY, CH_SMS],
      [SMS_OFFERS, CH_SMS],
      [MAIL_OFFERS, CH_EMAIL],
    ];
    const five = [...topics.map(([t, c]) => ({ consents: [consent(t, c)] })), { consents: [] }];
    const ok = await create(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], consent_mappings: five }),
    );
    expect(ok.status, ok.text).toBe(201);
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [...five, { consents: [] }],
        }),
      ),
      413,
    );
    // Each item's shape is checked.
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ field_selector: 'c', type: 'opt-in' }] }],
        }),
      ),
      400,
      /topic_discriminator/,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ ...consent(WEEKLY, CH_EMAIL), resubscribe_if_opted_out: 'yes' }] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ ...consent(WEEKLY, CH_EMAIL), type: 'maybe' }] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent(`${V}.topics.user-created.nope`, CH_EMAIL)] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent(WEEKLY, `${V}.channels.nope`)] }],
        }),
      ),
      400,
    );
  });

  it('IMP-16 tag_mappings: at most 100 items {tag_discriminator}; over 100 → 413', async () => {
    const tags = (n: number) => Array.from({ length: n }, () => ({ tag_discriminator: VIP }));
    expect(
      (
        await create(
          a,
          2,
          v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: tags(100) }),
        )
      ).status,
    ).toBe(201);
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: tags(101) }),
      ),
      413,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: tags(101),
      }),
      413,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: [{}] }),
      ),
      400,
      /tag_discriminator/,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          tag_mappings: [{ tag_discriminator: `${V}.tags.user-created.nope` }],
        }),
      ),
      400,
    );
  });

  it('IMP-17 version 1: keyspace_mappings required with 1 to 10 items {keyspace_discriminator, field_selector, merge_profiles}; consent items carry address_field_selector', async () => {
    const attributes = [attr('first', a.v.firstname)];
    expectProblem(await create(a, 1, { attribute_mappings: attributes }), 400, /keyspace_mappings/);
    expectProblem(await create(a, 1, { keyspace_mappings: [], attribute_mappings: attributes }), 400);
    const eleven = Array.from({ length: 11 }, () => ({
      keyspace_discriminator: EMAIL,
      field_selector: 'email',
      merge_profiles: true,
    }));
    expectProblem(await create(a, 1, { keyspace_mappings: eleven, attribute_mappings: attributes }), 413);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: 'yes' }],
        attribute_mappings: attributes,
      }),
      400,
    );
    // Version 1 has no keyspace_mapping (the version 2 form).
    expectProblem(
      await create(a, 1, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: attributes,
      }),
      400,
    );
    const consent = {
      resubscribe_if_opted_out: true,
      field_selector: 'news',
      address_field_selector: 'mail',
      channel_discriminator: CH_EMAIL,
      topic_discriminator: WEEKLY,
      type: 'opt-in',
    };
    const ok = await create(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: false }],
      attribute_mappings: attributes,
      consent_mappings: [{ consents: [consent] }],
    });
    expect(ok.status, ok.text).toBe(201);
    // address_field_selector belongs to version 1 only.
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', { attribute_mappings: attributes, consent_mappings: [{ consents: [consent] }] }),
      ),
      400,
      /address_field_selector/,
    );
    // With a PLAIN account, ten keyspace mappings are accepted.
    const plain = await account(PLAIN);
    const ten = Array.from({ length: 10 }, (_, i) => ({
      keyspace_discriminator: i % 2 ? CRM : EMAIL,
      field_selector: `k${i}`,
      merge_profiles: false,
    }));
    expect(
      (await create(plain, 1, { keyspace_mappings: ten, attribute_mappings: [attr('first', plain.v.firstname)] }))
        .status,
    ).toBe(201);
  });

  it('IMP-18 an import through a keyspace whose manage_subscriptions is false → 403', async () => {
    const attributes = [attr('first', a.v.firstname)];
    for (const keyspace of [PARTNER, `${V}.keyspaces.web`, `${V}.keyspaces.export`]) {
      expectProblem(await create(a, 2, v2(keyspace, 'id', { attribute_mappings: attributes })), 403, /subscriptions/);
      expectProblem(
        await create(a, 1, {
          keyspace_mappings: [{ keyspace_discriminator: keyspace, field_selector: 'id' }],
          attribute_mappings: attributes,
        }),
        403,
        /subscriptions/,
      );
    }
    // An integration keyspace that manages subscriptions may be used.
    expect((await create(a, 2, v2(LOYALTY, 'id', { attribute_mappings: attributes }))).status).toBe(201);
  });

  it('IMP-19 an import writing an attribute or tag not writable through the selected keyspace → 403', async () => {
    // "Score" and "Staff" are read-only through the email keyspace, writable through the CRM keyspace.
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('score', a.v.score)] })),
      403,
      /score.*not writable/i,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('score', a.v.score)],
      }),
      403,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          tag_mappings: [{ tag_discriminator: STAFF }],
        }),
      ),
      403,
      /staff.*not writable/i,
    );
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: [{ tag_discriminator: STAFF }],
      }),
      403,
    );
    expect(
      (
        await create(
          a,
          2,
          v2(CRM, 'crm', {
            attribute_mappings: [attr('score', a.v.score)],
            tag_mappings: [{ tag_discriminator: STAFF }],
          }),
        )
      ).status,
    ).toBe(201);
  });

  it('IMP-20 version 1 with more than one keyspace mapping while channel-specific topics are enabled → 400', async () => {
    const two = [
      { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true },
      { keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: true },
    ];
    expectProblem(
      await create(a, 1, { keyspace_mappings: two, attribute_mappings: [attr('first', a.v.firstname)] }),
      400,
      /channel-specific/,
    );
    expect(
      (await create(a, 1, { keyspace_mappings: two.slice(0, 1), attribute_mappings: [attr('first', a.v.firstname)] }))
        .status,
    ).toBe(201);
    // Without channel-specific topics on the account, several mappings are fine.
    const plain = await account(PLAIN);
    expect(
      (await create(plain, 1, { keyspace_mappings: two, attribute_mappings: [attr('first', plain.v.firstname)] }))
        .status,
    ).toBe(201);
  });

  it('IMP-22 version 2 takes one keyspace only: no keyspace list, no merge_profiles', async () => {
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
      }),
      400,
    );
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true },
        attribute_mappings: [attr('first', a.v.firstname)],
      }),
      400,
      /merge_profiles/,
    );
  });

  it("IMP-23 version 2, channel-specific topic: channel_discriminator may be omitted; when given it must be the topic's channel, otherwise 400", async () => {
    const body = (channel?: string) =>
      v2(MOBILE, 'mobile', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'sms',
                topic_discriminator: SMS_OFFERS,
                type: 'opt-in',
                ...(channel ? { channel_discriminator: channel } : {}),
              },
            ],
          },
        ],
      });
    expect((await create(a, 2, body())).status).toBe(201);
    expect((await create(a, 2, body(CH_SMS))).status).toBe(201);
    expectProblem(await create(a, 2, body(CH_EMAIL)), 400, /channel/);
  });

  it('IMP-24 version 2, topic that is not channel-specific: channel_discriminator is required; missing → 400', async () => {
    const body = (channel?: string) =>
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                topic_discriminator: WEEKLY,
                type: 'opt-in',
                ...(channel ? { channel_discriminator: channel } : {}),
              },
            ],
          },
        ],
      });
    expectProblem(await create(a, 2, body()), 400, /channel_discriminator/);
    expect((await create(a, 2, body(CH_EMAIL))).status).toBe(201);
    expect((await create(a, 2, body(CH_SMS))).status).toBe(201);
  });

  it('IMP-32 two consent mappings for the same topic and channel in one request → 400', async () => {
    const consent = (field: string, channel?: string) => ({
      field_selector: field,
      topic_discriminator: SMS_OFFERS,
      type: 'opt-in',
      ...(channel ? { channel_discriminator: channel } : {}),
    });
    expectProblem(
      await create(
        a,
        2,
        v2(MOBILE, 'mobile', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent('a', CH_SMS)] }, { consents: [consent('b', CH_SMS)] }],
        }),
      ),
      400,
      /same topic|already updates/i,
    );
    // The channel inferred from the topic is the same channel as one given.
    expectProblem(
      await create(
        a,
        2,
        v2(MOBILE, 'mobile', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent('a'), consent('b', CH_SMS)] }],
        }),
      ),
      400,
    );
    const weekly = (field: string) => ({
      field_selector: field,
      address_field_selector: 'mail',
      topic_discriminator: WEEKLY,
      channel_discriminator: CH_EMAIL,
      type: 'opt-in',
    });
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [{ consents: [weekly('a')] }, { consents: [weekly('b')] }],
      }),
      400,
    );
    // The same topic on two channels is no conflict.
    expect(
      (
        await create(
          a,
          2,
          v2(EMAIL, 'email', {
            attribute_mappings: [attr('first', a.v.firstname)],
            consent_mappings: [
              {
                consents: [
                  { field_selector: 'a', topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' },
                  { field_selector: 'b', topic_discriminator: WEEKLY, channel_discriminator: CH_SMS, type: 'opt-in' },
                ],
              },
            ],
          }),
        )
      ).status,
    ).toBe(201);
  });
});

describe('status of an import', () => {
  it('IMP-09 IMP-10 GET → 200 {import_id, result:{status, profiles_found, profiles_processed, profiles_failed}} for both versions: waiting_for_file until the upload, then completed', async () => {
    const a = await account();
    for (const version of [1, 2] as const) {
      const body =
        version === 1
          ? {
              keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
              attribute_mappings: [attr('first', a.v.firstname)],
            }
          : v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
      const c = await created(a, version, body);
      const waiting = await status(a, c.import_id);
      expect(waiting.status, waiting.text).toBe(200);
      expect(waiting.body.import_id).toBe(c.import_id);
      expect(waiting.body.result).toEqual({
        status: 'waiting_for_file',
        profiles_found: 0,
        profiles_processed: 0,
        profiles_failed: 0,
      });
      expect(waiting.body.report).toEqual({
        profiles_new: 0,
        profiles_updated: 0,
        profiles_not_changed: 0,
        profiles_failed: 0,
        failures: [],
      });
      expect((await upload(c, `email,first\nv${version}a@x.io,A\nv${version}b@x.io,B\nnot-an-email,C\n`)).status).toBe(
        204,
      );
      const seen = new Set<string>();
      let last: any;
      for (let i = 0; i < 600; i++) {
        last = (await status(a, c.import_id)).body;
        seen.add(last.result.status);
        if (last.result.status === 'completed' || last.result.status === 'error') break;
        await sleep(20);
      }
      expect([...seen].every((s) => ['queued', 'in_progress', 'completed'].includes(s))).toBe(true);
      expect(last.import_id).toBe(c.import_id);
      expect(last.result).toEqual({
        status: 'completed',
        profiles_found: 3,
        profiles_processed: 2,
        profiles_failed: 1,
      });
      expectCountsAddUp(last);
      expect((await attributesOf(a, EMAIL, `v${version}b@x.io`)).body[a.v.firstname]).toBe('B');
    }
  });

  it('IMP-10 an import whose file cannot be read ends in error with a message: a missing mapped column, an empty file, no upload within the window', async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const missing = await runImport(a, 2, body, 'email,name\nx@x.io,X\n');
    expect(missing.result.status).toBe('error');
    expect(missing.result.message).toMatch(/"first"/);
    expect((await attributesOf(a, EMAIL, 'x@x.io')).status).toBe(404);
    const empty = await runImport(a, 2, body, '');
    expect(empty.result.status).toBe('error');
    expect(empty.result.message).toMatch(/empty|header/i);
    const headerOnly = await runImport(a, 2, body, 'email,first\r\n');
    expect(headerOnly.result).toEqual({
      status: 'completed',
      profiles_found: 0,
      profiles_processed: 0,
      profiles_failed: 0,
    });
    // An import that ended, in error or not, keeps no file.
    expect(await storedFiles(a.accountId)).toEqual([]);
  });

  it('IMP-11 an unknown import id, one of another section or of another account → 404', async () => {
    const a = await account();
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    expectProblem(await status(a, crypto.randomUUID()), 404);
    expectProblem(await status(a, 'not-a-uuid'), 404);
    expectProblem(await status(a, c.import_id, BLOG), 404);
    const other = await account();
    expectProblem(await status(other, c.import_id), 404);
    expect((await status(a, c.import_id)).status).toBe(200);
  });
});

describe('the upload', () => {
  const body = (a: Account) => v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });

  it('IMP-05 a multipart POST of every form field in order, then the part file (text/csv), without a bearer token → 204; the file is stored, imported, then removed', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const res = await upload(c, 'email,first\nup@x.io,Up\n');
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    const done = await finished(a, c.import_id);
    expect(done.result).toEqual({ status: 'completed', profiles_found: 1, profiles_processed: 1, profiles_failed: 0 });
    expect((await attributesOf(a, EMAIL, 'up@x.io')).body[a.v.firstname]).toBe('Up');
    // The file holds personal data: it goes once the import has ended (docs/imports.md), just
    // after its status says so, before its job ends.
    await jobsEnded(a);
    expect(await storedFiles(a.accountId)).toEqual([]);
    // The same form cannot deliver a second file.
    expectProblem(await upload(c, 'email,first\nagain@x.io,Again\n'), 409);
  });

  it('IMP-05 the upload refuses a request that is not a multipart form or has no file part (400), and does not need the bearer token', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    expectProblem(await server.request('POST', new URL(c.file_upload_url).pathname, { body: c.file_upload_body }), 400);
    const form = new FormData();
    for (const [k, v] of Object.entries(c.file_upload_body)) form.append(k, v);
    expectProblem(await asResponse(await fetch(uploadUrl(c), { method: 'POST', body: form })), 400, /file/);
    const wrongPart = new FormData();
    for (const [k, v] of Object.entries(c.file_upload_body)) wrongPart.append(k, v);
    wrongPart.append('upload', new Blob(['email\n'], { type: 'text/csv' }), 'x.csv');
    expectProblem(await asResponse(await fetch(uploadUrl(c), { method: 'POST', body: wrongPart })), 400);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    expect(await storedFiles(a.accountId)).toEqual([]);
  });

  it('IMP-07 an upload with a changed or missing form field, a changed policy or signature, or the file before the fields → 403, and nothing is stored', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const other = await created(a, 2, body(a));
    const f = c.file_upload_body;
    const policy = JSON.parse(Buffer.from(f.policy, 'base64').toString('utf8'));
    const widened = Buffer.from(
      JSON.stringify({
        ...policy,
        conditions: policy.conditions.map((x: unknown) =>
          Array.isArray(x) ? ['content-length-range', 0, 5000 * MB] : x,
        ),
      }),
    ).toString('base64');
    const later = Buffer.from(JSON.stringify({ ...policy, expiration: '2999-01-01T00:00:00.000Z' })).toString('base64');
    const flipped = f['x-store-signature'].slice(0, -1) + (f['x-store-signature'].endsWith('0') ? '1' : '0');
    const attempts: { fields?: Record<string, string>; omit?: string[]; fileFirst?: boolean }[] = [
      { fields: { key: other.file_upload_body.key } },
      { fields: { key: `imports/${a.accountId}/../../../escape.csv` } },
      { fields: { policy: widened } },
      { fields: { policy: later } },
      { fields: { policy: other.file_upload_body.policy } },
      { fields: { 'x-store-signature': flipped } },
      { fields: { 'x-store-signature': 'not-a-signature' } },
      { fields: { 'x-store-signature': other.file_upload_body['x-store-signature'] } },
      { fields: { 'x-store-meta-id': other.file_upload_body['x-store-meta-id'] } },
      {
        fields: {
          'x-store-date':
            f['x-store-date'].slice(0, 9) + (f['x-store-date'].endsWith('T000000Z') ? '000001Z' : '000000Z'),
        },
      },
      { fields: { 'x-store-credential': f['x-store-credential'].replace(/^[^/]+/, 'someone') } },
      { fields: { 'content-type': 'application/octet-stream' } },
      { fields: { success_action_status: '201' } },
      // A field the policy does not sign.
      { fields: { 'x-store-meta-extra': 'anything' } },
      ...FORM_FIELDS.map((name) => ({ omit: [name] })),
      { fileFirst: true },
    ];
    for (const attempt of attempts) {
      const res = await upload(c, 'email,first\nbad@x.io,Bad\n', attempt);
      expect(res.status, `${JSON.stringify(attempt)}: ${res.text}`).toBe(403);
      expectProblem(res, 403, /upload form|signature|window/i);
    }
    expect(await storedFiles(a.accountId)).toEqual([]);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    expect((await status(a, other.import_id)).body.result.status).toBe('waiting_for_file');
    // The untouched form still works.
    expect((await upload(c, 'email,first\ngood@x.io,Good\n')).status).toBe(204);
    expect((await finished(a, c.import_id)).result.status).toBe('completed');
    expect((await attributesOf(a, EMAIL, 'bad@x.io')).status).toBe(404);
    expect((await status(a, other.import_id)).body.result.status).toBe('waiting_for_file');
  });

  it('IMP-06 an upload after file_upload_url_expires_at → 403, nothing is stored and the import ends in error', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    server.clock.advance(5 * 60 * 1000 + 1);
    const res = await upload(c, 'email,first\nlate@x.io,Late\n');
    expectProblem(res, 403, /window|expired/i);
    expect(await storedFiles(a.accountId)).toEqual([]);
    const s = (await status(a, c.import_id)).body;
    expect(s.result.status).toBe('error');
    expect(s.result.profiles_found).toBe(0);
    expect(s.result.message).toMatch(/upload window/);
  });

  it('IMP-08 a file over 50 MB → 413, nothing is stored and the import still waits for its file', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const boundary = `----audience-${crypto.randomUUID()}`;
    const head = Buffer.from(
      Object.entries(c.file_upload_body)
        .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
        .join('') +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\nContent-Type: text/csv\r\n\r\nemail,first\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const chunk = Buffer.alloc(MB, 'big@x.io,Big\n');
    const fileBytes = 51 * MB;
    let sent = 0;
    let phase: 'head' | 'file' | 'tail' | 'done' = 'head';
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (phase === 'head') {
          controller.enqueue(head);
          phase = 'file';
        } else if (phase === 'file') {
          controller.enqueue(chunk);
          sent += chunk.length;
          if (sent >= fileBytes) phase = 'tail';
        } else if (phase === 'tail') {
          controller.enqueue(tail);
          phase = 'done';
        } else {
          controller.close();
        }
      },
    });
    const res = await asResponse(
      await fetch(uploadUrl(c), {
        method: 'POST',
        body: stream,
        duplex: 'half',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      } as RequestInit),
    );
    expectProblem(res, 413, /50|limit/);
    expect(await storedFiles(a.accountId)).toEqual([]);
    expect((await status(a, c.import_id)).body.result).toEqual({
      status: 'waiting_for_file',
      profiles_found: 0,
      profiles_processed: 0,
      profiles_failed: 0,
    });
    // The form stays usable for a file within the limit.
    expect((await upload(c, 'email,first\nsmall@x.io,Small\n')).status).toBe(204);
    expect((await finished(a, c.import_id)).result).toEqual({
      status: 'completed',
      profiles_found: 1,
      profiles_processed: 1,
      profiles_failed: 0,
    });
  });
});

describe('ingestion', () => {
  it('CSV with a header row: quoted fields, UTF-8 BOM, CRLF or LF, comma or semicolon; keys normalised', async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('first', a.v.firstname), attr('last', a.v.lastname), attr('points', a.v.points)],
    });
    // BOM, CRLF, semicolons, quoted cells holding the delimiter, quotes and a line break; decimal commas unquoted.
    const semi = await runImport(
      a,
      2,
      body,
      '\ufeffemail;first;last;points\r\n' +
        ' Semi@X.io ;"Ann; Marie";"O""Brien";1,5\r\n' +
        'two@x.io;"Two\r\nLines";Plain;2\r\n' +
        '\r\n' +
        'THREE@x.io;Three;"";3,25\r\n',
    );
    expect(semi.result).toEqual({ status: 'completed', profiles_found: 3, profiles_processed: 3, profiles_failed: 0 });
    const semiAnn = (await attributesOf(a, EMAIL, 'semi@x.io')).body;
    expect(semiAnn).toMatchObject({
      [a.v.email]: 'semi@x.io',
      [a.v.firstname]: 'Ann; Marie',
      [a.v.lastname]: 'O"Brien',
      [a.v.points]: 1.5,
    });
    expect((await attributesOf(a, EMAIL, 'two@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Two\r\nLines',
      [a.v.points]: 2,
    });
    expect((await attributesOf(a, EMAIL, 'three@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Three',
      [a.v.points]: 3.25,
    });
    // LF and commas, columns in another order, a semicolon inside an unquoted cell.
    const comma = await runImport(
      a,
      2,
      body,
      'points,last,first,email\n4,"Smith, Jr.",Bo; Bob,comma@x.io\n"5.5",Doe,"Cy",CY@X.IO',
    );
    expect(comma.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect((await attributesOf(a, EMAIL, 'comma@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Bo; Bob',
      [a.v.lastname]: 'Smith, Jr.',
      [a.v.points]: 4,
    });
    expect((await attributesOf(a, EMAIL, 'cy@x.io')).body).toMatchObject({ [a.v.firstname]: 'Cy', [a.v.points]: 5.5 });
    // Mobile keys in international form are stored in E.164; the same key twice is one profile.
    const mobile = await runImport(
      a,
      2,
      v2(MOBILE, 'phone', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'phone,first\n+47 912 34 567,Mo\n004791234567,Mona\n12345,Bad\n',
    );
    expect(mobile.result).toEqual({
      status: 'completed',
      profiles_found: 3,
      profiles_processed: 2,
      profiles_failed: 1,
    });
    expect(mobile.report).toMatchObject({ profiles_new: 1, profiles_updated: 1 });
    expect((await attributesOf(a, MOBILE, '+4791234567')).body).toMatchObject({
      [a.v.mobile]: '+4791234567',
      [a.v.firstname]: 'Mona',
    });
    const { rows } = await db.query(
      'select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where i.account_id = $1 and k.discriminator = $2',
      [a.accountId, MOBILE],
    );
    expect(rows[0].n).toBe(1);
  });

  it("IMP-27 a key's rows apply in file order across batches and parallel lanes, whatever form the key is written in", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)] });
    // Each of the two lanes takes about half the rows, BATCH_ROWS at a time: the repeated key, in
    // three spellings, is in three batches of its lane. (Within one batch, history keeps a key's
    // last value: its rows share one instant.)
    const rows = Array.from({ length: 5 * BATCH_ROWS }, (_, i) => `k${i}@order.io,Person ${i},${i}`);
    rows[1] = 'same@order.io,First,1';
    rows[Math.floor(2.5 * BATCH_ROWS)] = ' SAME@Order.io,Second,2';
    rows[rows.length - 1] = 'Same@ORDER.io,Third,3';
    const s = await runImport(a, 2, body, `email,first,points\n${rows.join('\n')}\n`);
    expect(s.result).toEqual({
      status: 'completed',
      profiles_found: rows.length,
      profiles_processed: rows.length,
      profiles_failed: 0,
    });
    expect(s.report).toMatchObject({ profiles_new: rows.length - 2, profiles_updated: 2, profiles_not_changed: 0 });
    expect((await attributesOf(a, EMAIL, 'same@order.io')).body).toMatchObject({
      [a.v.firstname]: 'Third',
      [a.v.points]: 3,
    });
    // The values replaced are in the history, in the order they were written.
    const { rows: history } = await db.query(
      `select h.value from attribute_history h join profile_identifiers i on i.account_id = h.account_id and i.profile_id = h.profile_id
       join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
       where h.account_id = $1 and k.discriminator = $2 and i.profile_key = 'same@order.io' and h.version_id = $3 order by h.set_at, h.ctid`,
      [a.accountId, EMAIL, a.v.firstname],
    );
    expect(history.map((r) => r.value)).toEqual(['First', 'Second']);
    // The import ran in two lanes.
    const {
      rows: [imported],
    } = await db.query('select lanes_done from imports where account_id = $1 and import_id = $2', [
      a.accountId,
      s.import_id,
    ]);
    expect(imported.lanes_done).toHaveLength(2);
  });

  it("IMP-27 the report counts profiles as new, updated, not changed and failed, with each failed row's line and reason", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)] });
    await runImport(a, 2, body, 'email,first,points\nsame@x.io,Same,1\nold@x.io,Old,1\n');
    const csv =
      'email,first,points\r\n' +
      'same@x.io,Same,1\r\n' + // line 2: not changed
      'old@x.io,"New\r\nName",2\r\n' + // lines 3-4: updated
      'not-an-email,X,1\r\n' + // line 5: failed
      'fresh@x.io,Fresh,1\r\n' + // line 6: new
      'pts@x.io,Pts,lots\r\n' + // line 7: failed
      ',Nobody,1\r\n'; // line 8: failed (no key)
    const s = await runImport(a, 2, body, csv);
    expect(s.result).toEqual({ status: 'completed', profiles_found: 6, profiles_processed: 3, profiles_failed: 3 });
    expect(s.report).toMatchObject({
      profiles_new: 1,
      profiles_updated: 1,
      profiles_not_changed: 1,
      profiles_failed: 3,
    });
    expect(s.report.failures.map((f: { line: number }) => f.line)).toEqual([5, 7, 8]);
    expect(s.report.failures[0].reason).toMatch(/not-an-email/);
    expect(s.report.failures[1].reason).toMatch(/points.*lots/);
    expect(s.report.failures[2].reason).toMatch(/key|empty/);
    expect((await attributesOf(a, EMAIL, 'old@x.io')).body[a.v.firstname]).toBe('New\r\nName');
  });

  it("IMP-26 date cells in the formats users send are stored converted to the mapped attribute's type", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('birthday', a.v.birthday), attr('seen', a.v['last-seen']), attr('member', a.v.member)],
    });
    const noon = Date.parse('2024-03-05T12:00:00Z');
    const midnight = Date.parse('2024-03-05T00:00:00Z');
    const rows: [string, string, string, string, unknown][] = [
      ['d1@x.io', '2024-03-05', '2024-03-05T12:00:00Z', 'true', noon],
      ['d2@x.io', '05.03.2024', String(noon), 'yes', noon],
      ['d3@x.io', '2024/3/5', '2024-03-05', '1', midnight],
      ['d4@x.io', '20240305', '05.03.2024', 'no', midnight],
      ['d5@x.io', '05/03/2024', '2024-03-05 12:00:00', 'false', noon],
      ['d6@x.io', '5-3-2024', '2024-03-05T14:00:00+02:00', '0', noon],
      ['d7@x.io', '2024-03-05T23:30:00+02:00', '2024/03/05', 'TRUE', midnight],
    ];
    const csv =
      'email;birthday;seen;member\n' +
      rows.map((r) => r.slice(0, 4).join(';')).join('\n') +
      '\nbad@x.io;31.02.2024;2024-03-05;true\nbad2@x.io;2024-03-05;someday;true\n';
    // A date-time without an offset is UTC (SPEC §1.2), whatever the zone of the server.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    let s;
    try {
      s = await runImport(a, 2, body, csv);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(s.result).toEqual({ status: 'completed', profiles_found: 9, profiles_processed: 7, profiles_failed: 2 });
    expect(s.report.failures).toEqual([
      { line: 9, reason: expect.stringMatching(/birthday.*31\.02\.2024/) },
      { line: 10, reason: expect.stringMatching(/seen.*someday/) },
    ]);
    for (const [key, , , member, seen] of rows) {
      const got = (await attributesOf(a, EMAIL, key)).body;
      expect(got[a.v.birthday], key).toBe('2024-03-05');
      expect(got[a.v['last-seen']], key).toBe(seen);
      expect(got[a.v.member], key).toBe(['true', 'yes', '1', 'TRUE'].includes(member));
    }
  });

  it('IMP-28 update_existing_profiles false leaves existing profiles unchanged and still creates new ones', async () => {
    const a = await account();
    const mapping = { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: [{ tag_discriminator: VIP }] };
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: mapping.attribute_mappings }),
      'email,first\nkeep@x.io,Kept\n',
    );
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { ...mapping, options: { update_existing_profiles: false } }),
      'email,first\nkeep@x.io,Changed\nnew@x.io,New\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect(s.report).toMatchObject({ profiles_new: 1, profiles_updated: 0, profiles_not_changed: 1 });
    expect((await attributesOf(a, EMAIL, 'keep@x.io')).body[a.v.firstname]).toBe('Kept');
    expect(
      (
        await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/keep@x.io/sections/${S}/tags`, {
          token: a.token,
        })
      ).body[VIP],
    ).not.toBe(true);
    expect((await attributesOf(a, EMAIL, 'new@x.io')).body[a.v.firstname]).toBe('New');
    // The default (true) updates them.
    const u = await runImport(a, 2, v2(EMAIL, 'email', mapping), 'email,first\nkeep@x.io,Changed\n');
    expect(u.report).toMatchObject({ profiles_updated: 1 });
    expect((await attributesOf(a, EMAIL, 'keep@x.io')).body[a.v.firstname]).toBe('Changed');
  });

  it('IMP-29 clear_existing_attributes true lets an empty cell clear the mapped attribute; false leaves the stored value', async () => {
    const a = await account();
    const attributes = [attr('first', a.v.firstname), attr('points', a.v.points)];
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes }),
      'email,first,points\nc1@x.io,One,1\nc2@x.io,Two,2\n',
    );
    const kept = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes, options: { clear_existing_attributes: false } }),
      'email,first,points\nc1@x.io,,\n',
    );
    expect(kept.report).toMatchObject({ profiles_not_changed: 1 });
    expect((await attributesOf(a, EMAIL, 'c1@x.io')).body).toMatchObject({ [a.v.firstname]: 'One', [a.v.points]: 1 });
    const kept2 = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes }),
      'email,first,points\nc1@x.io,"",\n',
    );
    expect(kept2.report).toMatchObject({ profiles_not_changed: 1 });
    const cleared = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes, options: { clear_existing_attributes: true } }),
      'email,first,points\nc1@x.io,,\nc2@x.io,Deux,\n',
    );
    expect(cleared.report).toMatchObject({ profiles_updated: 2 });
    const c1 = (await attributesOf(a, EMAIL, 'c1@x.io')).body;
    expect(c1[a.v.firstname]).toBeUndefined();
    expect(c1[a.v.points]).toBeUndefined();
    expect(c1[a.v.email]).toBe('c1@x.io');
    expect((await attributesOf(a, EMAIL, 'c2@x.io')).body).toMatchObject({ [a.v.firstname]: 'Deux' });
    expect((await attributesOf(a, EMAIL, 'c2@x.io')).body[a.v.points]).toBeUndefined();
  });

  it('tags are set on every imported profile', async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: [{ tag_discriminator: VIP }],
      }),
      'email,first\nt1@x.io,T1\nt2@x.io,\n',
    );
    for (const key of ['t1@x.io', 't2@x.io']) {
      const tags = await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${S}/tags`, {
        token: a.token,
      });
      expect(tags.body[VIP], key).toBe(true);
    }
    const crm = await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('score', a.v.score)], tag_mappings: [{ tag_discriminator: STAFF }] }),
      'crm,score\nC-1,high\n',
    );
    expect(crm.result.profiles_processed).toBe(1);
    expect(
      (await server.request('GET', `/audience/keyspaces/${CRM}/profiles/C-1/sections/${S}/tags`, { token: a.token }))
        .body[STAFF],
    ).toBe(true);
    expect((await attributesOf(a, CRM, 'C-1')).body[a.v.score]).toBe('high');
  });

  it('IMP-30 consents are created from the consent column; an opted-out consent turns back only with resubscribe_if_opted_out', async () => {
    const a = await account();
    const body = (resubscribe: boolean) =>
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                topic_discriminator: WEEKLY,
                channel_discriminator: CH_EMAIL,
                type: 'opt-in',
                resubscribe_if_opted_out: resubscribe,
              },
            ],
          },
        ],
      });
    const s = await runImport(
      a,
      2,
      body(false),
      'email,first,news\nyes@x.io,Y,1\nno@x.io,N,0\nempty@x.io,E,\nout@x.io,O,yes\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 4, profiles_processed: 4, profiles_failed: 0 });
    expect(await consentsOf(a, EMAIL, 'yes@x.io')).toEqual([
      expect.objectContaining({ topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
    ]);
    expect(await consentsOf(a, EMAIL, 'no@x.io')).toEqual([]);
    expect(await consentsOf(a, EMAIL, 'empty@x.io')).toEqual([]);
    const optOut = await server.request(
      'POST',
      `/v2/audience/keyspaces/${EMAIL}/profiles/out@x.io/sections/${S}/consents`,
      {
        token: a.token,
        body: {
          topic_discriminator: WEEKLY,
          channel_discriminator: CH_EMAIL,
          type: 'opt-out',
          reason: 'Asked to stop',
        },
      },
    );
    expect(optOut.status, optOut.text).toBe(204);
    await runImport(a, 2, body(false), 'email,first,news\nout@x.io,O,1\n');
    expect((await consentsOf(a, EMAIL, 'out@x.io'))[0].type).toBe('opt-out');
    await runImport(a, 2, body(true), 'email,first,news\nout@x.io,O,1\n');
    expect((await consentsOf(a, EMAIL, 'out@x.io'))[0]).toMatchObject({ type: 'opt-in', source: 'Profile import' });
  });

  it("IMP-23 IMP-25 version 2 consents: the channel is inferred from a channel-specific topic, and the address is the profile's email or mobile attribute (a row without it fails)", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('first', a.v.firstname), attr('phone', a.v.mobile)],
      consent_mappings: [
        { consents: [{ field_selector: 'sms', topic_discriminator: SMS_OFFERS, type: 'opt-in' }] },
        { consents: [{ field_selector: 'mail', topic_discriminator: MAIL_OFFERS, type: 'opt-in' }] },
      ],
    });
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nexisting@x.io,Before\n',
    );
    const s = await runImport(
      a,
      2,
      body,
      'email,first,phone,sms,mail\nphone@x.io,P,+47 912 34 567,1,1\nnophone@x.io,N,,1,0\nmailonly@x.io,M,,0,1\nexisting@x.io,After,,1,1\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 4, profiles_processed: 2, profiles_failed: 2 });
    expect(s.report).toMatchObject({ profiles_new: 2, profiles_updated: 0, profiles_not_changed: 0 });
    expect(s.report.failures).toEqual([
      { line: 3, reason: expect.stringMatching(/no address/i) },
      { line: 5, reason: expect.stringMatching(/no address/i) },
    ]);
    // A failed row changes nothing: no new profile, no update of an existing one, no consent.
    expectProblem(await attributesOf(a, EMAIL, 'nophone@x.io'), 404);
    expect((await attributesOf(a, EMAIL, 'existing@x.io')).body[a.v.firstname]).toBe('Before');
    expect(await consentsOf(a, EMAIL, 'existing@x.io')).toEqual([]);
    expect(await consentsOf(a, EMAIL, 'phone@x.io')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' }),
        expect.objectContaining({ topic_discriminator: MAIL_OFFERS, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
      ]),
    );
    expect(await consentsOf(a, EMAIL, 'mailonly@x.io')).toEqual([
      expect.objectContaining({ topic_discriminator: MAIL_OFFERS, channel_discriminator: CH_EMAIL }),
    ]);
    const { rows } = await db.query(
      `select t.discriminator as topic, c.address from consents c join topics t on t.account_id = c.account_id and t.topic_id = c.topic_id
       where c.account_id = $1 order by 1, 2`,
      [a.accountId],
    );
    expect(rows).toEqual([
      { topic: MAIL_OFFERS, address: 'mailonly@x.io' },
      { topic: MAIL_OFFERS, address: 'phone@x.io' },
      { topic: SMS_OFFERS, address: '+4791234567' },
    ]);
    // Through the mobile keyspace, the SMS address is the key itself.
    const m = await runImport(
      a,
      2,
      v2(MOBILE, 'mobile', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              { field_selector: 'sms', topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' },
            ],
          },
        ],
      }),
      'mobile,first,sms\n+4741234567,Mob,1\n',
    );
    expect(m.result.profiles_processed).toBe(1);
    expect(await consentsOf(a, MOBILE, '+4741234567')).toEqual([
      expect.objectContaining({ topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' }),
    ]);
  });

  it('IMP-17 version 1 consents take the address from address_field_selector', async () => {
    const a = await account();
    const s = await runImport(
      a,
      1,
      {
        keyspace_mappings: [{ keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: false }],
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                address_field_selector: 'mail',
                topic_discriminator: WEEKLY,
                channel_discriminator: CH_EMAIL,
                type: 'opt-in',
                resubscribe_if_opted_out: false,
              },
            ],
          },
        ],
      },
      'crm;first;mail;news\nK-1;Kay;Kay@X.io;1\nK-2;Nope;;1\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 1, profiles_failed: 1 });
    expect(s.report.failures).toEqual([{ line: 3, reason: expect.stringMatching(/no address/i) }]);
    expectProblem(await attributesOf(a, CRM, 'K-2'), 404);
    expect(await consentsOf(a, CRM, 'K-1')).toEqual([
      expect.objectContaining({ topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
    ]);
    const { rows } = await db.query('select address from consents where account_id = $1', [a.accountId]);
    expect(rows).toEqual([{ address: 'kay@x.io' }]);
  });

  it('IMP-21 version 1 with merge_profiles true merges the profiles a row names in several keyspaces; false does not', async () => {
    const a = await account(PLAIN);
    const first = a.v.firstname;
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', first)] }),
      'email,first\nann@x.io,Ann\n',
    );
    await runImport(a, 2, v2(CRM, 'crm', { attribute_mappings: [attr('points', a.v.points)] }), 'crm,points\nA-1,7\n');
    const body = (merge: boolean) => ({
      keyspace_mappings: [
        { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: merge },
        { keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: merge },
      ],
      attribute_mappings: [attr('first', first)],
    });
    const merged = await runImport(a, 1, body(true), 'email,crm,first\nann@x.io,A-1,Annie\nbo@x.io,B-1,Bo\n');
    expect(merged.result).toEqual({
      status: 'completed',
      profiles_found: 2,
      profiles_processed: 2,
      profiles_failed: 0,
    });
    // Both keys of a row resolve to one profile that shows the data of both.
    expect((await attributesOf(a, CRM, 'A-1')).body).toMatchObject({
      [first]: 'Annie',
      [a.v.email]: 'ann@x.io',
      [a.v.points]: 7,
    });
    expect((await attributesOf(a, EMAIL, 'ann@x.io')).body).toMatchObject({ [first]: 'Annie', [a.v.points]: 7 });
    expect((await attributesOf(a, CRM, 'B-1')).body).toMatchObject({ [first]: 'Bo', [a.v.email]: 'bo@x.io' });
    const separate = await runImport(a, 1, body(false), 'email,crm,first\ncy@x.io,C-1,Cy\n');
    expect(separate.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, EMAIL, 'cy@x.io')).body[first]).toBe('Cy');
    const c1 = await attributesOf(a, CRM, 'C-1');
    expect(c1.status).toBe(200);
    expect(c1.body[first]).toBeUndefined();
    // A row whose profiles cannot be merged (different emails) fails and changes nothing.
    await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('mail', a.v.email)] }),
      'crm,mail\nQ-1,quinn@x.io\n',
    );
    const conflict = await runImport(a, 1, body(true), 'email,crm,first\nann@x.io,Q-1,Changed\neve@x.io,E-1,Eve\n');
    expect(conflict.result).toEqual({
      status: 'completed',
      profiles_found: 2,
      profiles_processed: 1,
      profiles_failed: 1,
    });
    expect(conflict.report.failures).toEqual([{ line: 2, reason: expect.stringMatching(/merged|different/) }]);
    expect((await attributesOf(a, EMAIL, 'ann@x.io')).body[first]).toBe('Annie');
    expect((await attributesOf(a, CRM, 'Q-1')).body[first]).toBeUndefined();
    expect((await attributesOf(a, CRM, 'E-1')).body).toMatchObject({ [first]: 'Eve', [a.v.email]: 'eve@x.io' });
    // A row with only its second key still names a profile.
    const secondOnly = await runImport(a, 1, body(true), 'email,crm,first\n,D-1,Dee\n');
    expect(secondOnly.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, CRM, 'D-1')).body[first]).toBe('Dee');
  });

  it("IMP-22 version 2 never merges profiles: a key attribute written by the import leaves the other keyspace's profile apart", async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'crm,first\nZ-1,Crm\n',
    );
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('crm', a.v.crmid)] }),
      'email,first,crm\nzed@x.io,Mail,Z-1\n',
    );
    expect(s.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, CRM, 'Z-1')).body[a.v.firstname]).toBe('Crm');
    expect((await attributesOf(a, EMAIL, 'zed@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Mail',
      [a.v.crmid]: 'Z-1',
    });
    const { rows } = await db.query(
      'select count(*)::int as n from profiles where account_id = $1 and canonical_id is not null',
      [a.accountId],
    );
    expect(rows[0].n).toBe(0);
  });

  it('IMP-31 rows that match a locked profile fail, are counted as failed, and do not bring the profile back', async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nlocked@x.io,Lock\n',
    );
    const lock = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/locked@x.io/locks`, {
      token: a.token,
    });
    expect(lock.status, lock.text).toBe(204);
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nfree@x.io,Free\nLOCKED@x.io,Again\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 1, profiles_failed: 1 });
    expect(s.report.failures).toEqual([{ line: 3, reason: expect.stringMatching(/locked/i) }]);
    expect((await attributesOf(a, EMAIL, 'locked@x.io')).status).not.toBe(200);
    const { rows } = await db.query(
      'select i.profile_key from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where i.account_id = $1 and k.discriminator = $2 order by 1',
      [a.accountId, EMAIL],
    );
    expect(rows.map((r) => r.profile_key)).toEqual(['free@x.io']);
  });

  it('counts the rows it commits and its job run, for /metrics', async () => {
    const a = await account();
    const scrape = async () => (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    const completedRuns = (text: string) =>
      metric(text, 'audience_job_duration_seconds_count', { kind: 'import', outcome: 'completed' }) ?? 0;
    const before = await scrape();
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nm1@x.io,One\nm2@x.io,Two\nnot-an-address,Bad\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 3, profiles_processed: 2, profiles_failed: 1 });
    await jobsEnded(a);
    const after = await scrape();
    // Refused rows are rows read too.
    expect(metric(after, 'audience_import_rows_total')! - (metric(before, 'audience_import_rows_total') ?? 0)).toBe(3);
    expect(completedRuns(after) - completedRuns(before)).toBe(1);
  });
});

/** Waits (bounded) until the account's jobs are gone: a job ends a moment after its import has. */
async function jobsEnded(a: Account): Promise<void> {
  for (
    let i = 0;
    i < 200 &&
    (await db.query(`select 1 from jobs where account_id = $1 and kind = 'import'`, [a.accountId])).rowCount! > 0;
    i++
  )
    await sleep(25);
}

describe('limits', () => {
  it('LIM-03 at most 10 import requests per minute per account (both versions); beyond → 429', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    const b1 = {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    };
    const b2 = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    for (let i = 0; i < 10; i++) expect((await create(a, i % 2 ? 1 : 2, i % 2 ? b1 : b2)).status).toBe(201);
    const over = await create(a, 2, b2);
    expectProblem(over, 429);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    expectProblem(await create(a, 1, b1), 429);
    // Other accounts are not affected; reading the status is not an import request.
    const other = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    expect(
      (await create(other, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', other.v.firstname)] }))).status,
    ).toBe(201);
    server.clock.advance(60_000);
    expect((await create(a, 2, b2)).status).toBe(201);
  });

  it('LIM-03 import requests refused for their input (400) spend none of the 10 a minute', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    const good = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    for (let i = 0; i < 12; i++) {
      expectProblem(await create(a, 2, { ...good, keyspace_mapping: { keyspace_discriminator: EMAIL } }), 400);
      expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', '999999')] })), 400);
    }
    for (let i = 0; i < 10; i++) expect((await create(a, 2, good)).status).toBe(201);
    expectProblem(await create(a, 2, good), 429);
    server.clock.advance(60_000);
  });

  it('LIM-10 at most three imports per account are pending at once; the fourth → 429 until one has ended or its upload window has passed', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      import_requests_per_minute: null,
    });
    const b2 = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const b1 = {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    };
    const first = await created(a, 2, b2);
    await created(a, 1, b1);
    await created(a, 2, b2);
    expectProblem(await create(a, 2, b2), 429, /pending/);
    expectProblem(await create(a, 1, b1), 429, /pending/);
    expect((await upload(first, 'email,first\np@x.io,P\n')).status).toBe(204);
    expect((await finished(a, first.import_id)).result.status).toBe('completed');
    await created(a, 2, b2);
    expectProblem(await create(a, 2, b2), 429);
    server.clock.advance(5 * 60 * 1000 + 1);
    await created(a, 2, b2);
    await created(a, 1, b1);
  });
});

describe('bad bytes in a file and a job that keeps failing', () => {
  it('IMP-09 a NUL byte in a cell fails that row, naming its column; the other rows are written and the import completes at once', async () => {
    const a = await account(MANIFEST, NO_LIMITS);
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const csv = 'email;first\nann@x.io;An\u0000n\nbo\u0000@x.io;Bo\ncat@x.io;Cat\n';
    const done = await runImport(a, 2, body, csv);
    expect(done.result).toMatchObject({
      status: 'completed',
      profiles_found: 3,
      profiles_processed: 1,
      profiles_failed: 2,
    });
    expect(done.report.failures).toEqual([
      { line: 2, reason: expect.stringMatching(/column "first".*NUL/) },
      { line: 3, reason: expect.stringMatching(/column "email".*NUL/) },
    ]);
    expect((await attributesOf(a, EMAIL, 'cat@x.io')).body[a.v.firstname]).toBe('Cat');
    expectProblem(await attributesOf(a, EMAIL, 'ann@x.io'), 404);
    // A NUL in a header name that the import does not read is no fault.
    const other = await runImport(a, 2, body, 'email;first;no\u0000te\ndan@x.io;Dan;x\n');
    expect(other.result).toMatchObject({ status: 'completed', profiles_processed: 1 });
    await jobsEnded(a);
    expect(await storedFiles(a.accountId)).toEqual([]);
    // A JSON cell whose text PostgreSQL cannot store, in a key or a value: its row fails, not its batch.
    const s = await account(
      {
        sections: [{ ...MANIFEST.sections![0], attributes: [{ name: 'Address', versions: [{ type: ['Struct'] }] }] }],
      },
      NO_LIMITS,
    );
    const json = await runImport(
      s,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('address', s.v.address)] }),
      'email;address\nann@x.io;"{""city"":""Oslo\\u0000""}"\nbo@x.io;"{""\\ud800"":1}"\ncat@x.io;"{""city"":""Bergen""}"\n',
    );
    expect(json.result).toMatchObject({ status: 'completed', profiles_processed: 1, profiles_failed: 2 });
    expect(json.report.failures.map((f: { reason: string }) => f.reason)).toEqual([
      expect.stringMatching(/column "address".*NUL/),
      expect.stringMatching(/column "address".*surrogate/),
    ]);
  });

  it('IMP-10 a file stored for an import that never took it (its process killed between the two) is removed once the upload window is long closed', async () => {
    const a = await account(MANIFEST, NO_LIMITS);
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    // What a process killed after storing the upload and before recording it leaves behind.
    await server.services.files.put(c.file_upload_body.key, Readable.from(['email;first\nann@x.io;Ann\n']));
    expect(await storedFiles(a.accountId)).toHaveLength(1);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    // The window's job is due an hour after the window closes: brought forward here.
    const { rowCount } = await db.query(
      `update jobs set run_at = now() where account_id = $1 and kind = 'import-upload-window' and payload->>'import_id' = $2`,
      [a.accountId, c.import_id],
    );
    expect(rowCount).toBe(1);
    for (let i = 0; (await storedFiles(a.accountId)).length > 0; i++) {
      expect(i, 'the file stays').toBeLessThan(200);
      await sleep(50);
    }
    // An import that took its file keeps it until its job has read it; the window's job leaves it alone.
    const d = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    await server.worker!.stop();
    try {
      expect((await upload(d, 'email;first\nbo@x.io;Bo\n')).status).toBe(204);
      await db.query(
        `update jobs set run_at = now() where account_id = $1 and kind = 'import-upload-window' and payload->>'import_id' = $2`,
        [a.accountId, d.import_id],
      );
      await server.worker!.runOne(['import-upload-window']);
      expect(await storedFiles(a.accountId)).toHaveLength(1);
    } finally {
      server.worker = await startInProcessWorker(server.services, () => {});
    }
    expect((await finished(a, d.import_id)).result.status).toBe('completed');
  });

  it('IMP-10 a job that fails its last attempt ends its import as failed, frees its pending place and removes its file', async () => {
    const a = await account(MANIFEST, { ...NO_LIMITS, pending_imports: 1 });
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    await server.worker!.stop();
    let c: Created;
    try {
      c = await created(a, 2, body);
      expect((await upload(c, 'email;first\nann@x.io;Ann\n')).status).toBe(204);
      expect(await storedFiles(a.accountId)).toHaveLength(1);
      // The job fails on every run: its import's request no longer makes sense to the worker.
      await db.query(`update imports set version = 1, request = '{}' where account_id = $1 and import_id = $2`, [
        a.accountId,
        c.import_id,
      ]);
      // Its earlier attempts are spent (each waits twice the one before: 30 s in all).
      await db.query(`update jobs set attempts = $2 - 1 where account_id = $1 and kind = 'import'`, [
        a.accountId,
        MAX_ATTEMPTS,
      ]);
      expectProblem(await create(a, 2, body), 429);
    } finally {
      server.worker = await startInProcessWorker(server.services, () => {});
    }
    const done = await finished(a, c.import_id);
    expect(done.result.status).toBe('error');
    expect(done.result.message).toMatch(/attempts/);
    expect(await storedFiles(a.accountId)).toEqual([]);
    const { rows } = await db.query(
      `select failed_at is not null as failed from jobs where account_id = $1 and kind = 'import'`,
      [a.accountId],
    );
    expect(rows).toEqual([{ failed: true }]);
    // Its pending place is free.
    expect((await create(a, 2, body)).status).toBe(201);
  });
});

describe('files in an S3-compatible bucket (FILES_URL)', () => {
  let s3: S3;
  let onS3: TestServer;
  serverOnS3(
    () => server,
    (s, bucket) => {
      onS3 = s;
      s3 = bucket;
    },
  );

  it('IMP-05 the upload is written into the bucket, and the worker imports the file from there, then removes it', async () => {
    const a = await account(MANIFEST, NO_LIMITS, onS3);
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }), onS3);
    const csv = 'email,first\nbucket@x.io,Bucket\nsecond@x.io,Second\n';
    const up = await upload(c, csv, { on: onS3 });
    expect(up.status, up.text).toBe(204);
    const done = await finished(a, c.import_id, onS3);
    expect(done.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect(
      (
        await onS3.request('GET', `/audience/keyspaces/${EMAIL}/profiles/bucket@x.io/sections/${S}/attributes`, {
          token: a.token,
        })
      ).body,
    ).toMatchObject({ [a.v.firstname]: 'Bucket' });
    // The file was never in the local folder, and once the import has ended it is gone from the
    // bucket too (read from the emulator, which serves unsigned reads).
    expect(await storedFiles(a.accountId, onS3)).toEqual([]);
    const object = await fetch(`${s3.endpoint}/${s3.bucket}/audience/files/imports/${a.accountId}/${c.import_id}.csv`);
    expect(object.status).toBe(404);
  });
});

describe('a worker killed in the middle of an import', () => {
  const ROWS = 40_000;
  const BAD_EVERY = 5000;
  let api: TestServer;
  const children: ChildProcess[] = [];
  const output: string[] = [];

  beforeAll(async () => {
    // The worker of this test is a process of its own; the in-process one must not take the job.
    await server.worker?.stop();
    server.worker = undefined;
    api = await TestServer.start();
  });
  afterAll(async () => {
    for (const child of children) await stopProcess(child, 'SIGKILL');
    await api?.close();
  });

  async function startWorker(port: number): Promise<ChildProcess> {
    const child = await startWorkerProcess(api.services.config.dataDir, port, output);
    children.push(child);
    return child;
  }

  /** The import's state, and the rows it has found (read, in committed batches) so far. */
  async function progress(
    a: Account,
    importId: string,
  ): Promise<{ status: string; found: number; lanes: number[] | null }> {
    const { rows } = await db.query(
      'select status, profiles_found as found, lanes_done as lanes from imports where account_id = $1 and import_id = $2',
      [a.accountId, importId],
    );
    return rows[0];
  }

  it(
    'IMP-09 IMP-10 finishes the import after a restart without duplicating or losing a row (kill the process, start it again)',
    { timeout: 100_000 },
    async () => {
      const a = await account(MANIFEST, NO_LIMITS, api);
      const c = await created(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)],
          tag_mappings: [{ tag_discriminator: VIP }],
          consent_mappings: [
            {
              consents: [
                {
                  field_selector: 'news',
                  topic_discriminator: WEEKLY,
                  channel_discriminator: CH_EMAIL,
                  type: 'opt-in',
                },
              ],
            },
          ],
        }),
        api,
      );
      const lines = ['email;first;points;news'];
      for (let i = 1; i <= ROWS; i++)
        lines.push(i % BAD_EVERY === 0 ? `broken-${i};Bad;1;1` : `p${i}@crash.io;"Person ${i}";"${i},5";1`);
      const csv = lines.join('\r\n') + '\r\n';
      expect(csv.length).toBeGreaterThan(1 * MB);
      const up = await upload(c, csv, { on: api });
      expect(up.status, up.text).toBe(204);
      // IMP-10: without a worker the import waits in the queue.
      expect((await status(a, c.import_id, S, api)).body.result.status).toBe('queued');
      expect(
        (await db.query(`select kind, payload from jobs where account_id = $1 and kind = 'import'`, [a.accountId]))
          .rows,
      ).toEqual([{ kind: 'import', payload: { import_id: c.import_id } }]);

      const first = await startWorker(await freePort());
      let seen: { status: string; found: number } | undefined;
      for (let i = 0; i < 3000; i++) {
        seen = await progress(a, c.import_id);
        if (seen.found > 0) break;
        await sleep(10);
      }
      expect(seen!.found, output.join('')).toBeGreaterThan(0);
      await stopProcess(first, 'SIGKILL');
      const atKill = await progress(a, c.import_id);
      // Killed in the middle: some batches committed, not all. The file's one keyspace gives two lanes.
      expect(atKill.found).toBeGreaterThan(0);
      expect(atKill.found).toBeLessThan(ROWS);
      expect(atKill.lanes).toHaveLength(2);
      expect(atKill.status).toBe('in_progress');
      const mid = (await status(a, c.import_id, S, api)).body;
      expect(mid.result.status).toBe('in_progress');
      expect(mid.result.profiles_found).toBe(atKill.found);

      const secondPort = await freePort();
      const second = await startWorker(secondPort);
      const done = await finished(a, c.import_id, api, 1200);
      expect(done.result.status, output.join('')).toBe('completed');
      // The worker process serves the counters of its worker thread: the rows it committed, after
      // the first one's, and the job's run.
      await jobsEnded(a);
      const metrics = await (
        await fetch(`http://127.0.0.1:${secondPort}/metrics`, { headers: { authorization: 'Bearer worker-metrics' } })
      ).text();
      expect(metric(metrics, 'audience_import_rows_total')).toBe(ROWS - atKill.found);
      expect(metric(metrics, 'audience_job_duration_seconds_count', { kind: 'import', outcome: 'completed' })).toBe(1);
      expect(metric(metrics, 'audience_db_pool_connections', { pool: 'worker', state: 'total' })).toBeGreaterThan(0);
      await stopProcess(second, 'SIGTERM');

      const bad = ROWS / BAD_EVERY;
      const good = ROWS - bad;
      expect(done.result).toEqual({
        status: 'completed',
        profiles_found: ROWS,
        profiles_processed: good,
        profiles_failed: bad,
      });
      expect(done.report).toMatchObject({
        profiles_new: good,
        profiles_updated: 0,
        profiles_not_changed: 0,
        profiles_failed: bad,
      });
      expect(done.report.failures.map((f: { line: number }) => f.line)).toEqual(
        Array.from({ length: bad }, (_, i) => (i + 1) * BAD_EVERY + 1),
      );
      expectCountsAddUp(done);

      const one = async (sql: string, params: unknown[] = [a.accountId]) => (await db.query(sql, params)).rows[0];
      // Every key of the file exists exactly once.
      const keys = await one(
        `select count(*)::int as n, count(distinct profile_key)::int as d from profile_identifiers i join keyspaces k using (account_id, keyspace_id)
      where i.account_id = $1 and k.discriminator = $2`,
        [a.accountId, EMAIL],
      );
      expect(keys).toEqual({ n: good, d: good });
      expect(await one('select count(*)::int as n from profiles where account_id = $1')).toEqual({ n: good });
      // No row was applied twice: first values replace none, so no attribute history; one consent change per consent.
      expect(await one('select count(*)::int as n from attribute_history where account_id = $1')).toEqual({ n: 0 });
      expect(
        await one(
          'select count(*)::int as n from profile_sections where account_id = $1 and attribute_set_at ?& $2::text[]',
          [a.accountId, [a.v.firstname, a.v.points, a.v.email]],
        ),
      ).toEqual({ n: good });
      expect(
        await one(
          'select count(*)::int as n, count(distinct profile_id)::int as d from consent_history where account_id = $1',
        ),
      ).toEqual({ n: good, d: good });
      expect(await one('select count(*)::int as n from consents where account_id = $1')).toEqual({ n: good });
      expect(await one('select count(*)::int as n from import_failures where account_id = $1')).toEqual({ n: bad });
      expect(await one(`select count(*)::int as n from jobs where account_id = $1 and kind = 'import'`)).toEqual({
        n: 0,
      });
      // Spot checks of values at both ends of the file.
      expect(
        (
          await api.request('GET', `/audience/keyspaces/${EMAIL}/profiles/p1@crash.io/sections/${S}/attributes`, {
            token: a.token,
          })
        ).body,
      ).toMatchObject({ [a.v.firstname]: 'Person 1', [a.v.points]: 1.5 });
      expect(
        (
          await api.request(
            'GET',
            `/audience/keyspaces/${EMAIL}/profiles/p${ROWS - 1}@crash.io/sections/${S}/attributes`,
            { token: a.token },
          )
        ).body,
      ).toMatchObject({ [a.v.points]: ROWS - 1 + 0.5 });
      expect(
        (
          await api.request('GET', `/audience/keyspaces/${EMAIL}/profiles/p${ROWS - 1}@crash.io/sections/${S}/tags`, {
            token: a.token,
          })
        ).body[VIP],
      ).toBe(true);
    },
  );
});

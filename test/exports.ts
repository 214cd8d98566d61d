import http from 'node:http';
import { parse as parseCsv } from 'csv-parse/sync';
import type pg from 'pg';
import { expect } from 'vitest';
import { readWhen, STATE_BOUND_MS } from './until.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { startWorker } from '../src/worker/worker.ts';
import type { Response, TestServer } from './app.ts';
import { builtIn, NS, userCreated } from './names.ts';

// What the tests of the exports area share: the definitions they export from, and helpers over
// the test file's own server and database.

export { NS as V };
export const SHOP = userCreated('sections', 'shop');
export const BLOG = userCreated('sections', 'blog');
export const EMAIL = builtIn('keyspaces', 'email');
export const CRM = builtIn('keyspaces', 'crm-id');
export const EXPORT = builtIn('keyspaces', 'export');
export const CH_EMAIL = builtIn('channels', 'email');
export const CH_SMS = builtIn('channels', 'sms');
export const CH_WEB = builtIn('channels', 'web');
export const NEWS = userCreated('topics', 'news');
export const SMS_OFFERS = userCreated('topics', 'sms-offers');
export const DAILY = userCreated('topics', 'daily');
export const VIP = userCreated('tags', 'vip');
export const BIG = userCreated('segments', 'big');
export const MEMBERS = userCreated('segments', 'members');
export const CSV = 'text/csv;charset=UTF-8;header=present';
export const DAY = 24 * 60 * 60 * 1000;
/** Limits lifted for the tests that are not about them. */
export const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_export_requests_per_second: null,
  export_downloads_per_minute: null,
  pending_exports: null,
  profile_key_operations_per_second: null,
};

export const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      attributes: [
        { name: 'Points', versions: [{ type: ['Number'] }] },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
        { name: 'Member', versions: [{ type: ['True/False'] }] },
        { name: 'Secret', hidden: true, versions: [{ type: ['Text'] }] },
      ],
      tags: [{ name: 'VIP' }, { name: 'Hidden', hidden: true }],
      topics: [{ name: 'News' }, { name: 'SMS offers', channel: CH_SMS }, { name: 'Daily' }],
    },
    { name: 'Blog', topics: [{ name: 'Digest' }] },
  ],
  segments: [
    {
      name: 'Big',
      section: SHOP,
      versions: [{ query: `section({section}).attribute({attribute:${userCreated('attributes', 'points')}}).gt(100)` }],
    },
    {
      name: 'Members',
      section: SHOP,
      versions: [
        { query: `section({section}).attribute({attribute:${userCreated('attributes', 'member')}}).eq(true)` },
      ],
    },
  ],
};

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Account {
  accountId: string;
  /** The client id of the API key whose token `token` is. */
  clientId: string;
  token: string;
  v: Record<string, string>;
}

export interface Person {
  points?: number;
  birthday?: string;
  member?: boolean;
  mobile?: string;
  vip?: boolean;
  consents?: [topic: string, channel: string, type: string][];
}

/** The poll path of a poll URL, and its v2 form. */
export const pollPath = (pollUrl: string) => new URL(pollUrl).pathname;
export const v2 = (pollUrl: string) => `/v2${pollPath(pollUrl)}`;

/** The helpers, over the server and database that `env` answers when they are called (a test file starts them in beforeAll). */
export function exportHelpers(env: () => { server: TestServer; db: pg.Pool }) {
  /** A new account with the manifest, and the current version id of each Shop attribute by its last name part ("points", "email" …). */
  async function account(
    limits: Record<string, number | null> = NO_LIMITS,
    manifest: Manifest = MANIFEST,
  ): Promise<Account> {
    const { accountId, clientId, token } = await env().server.login(manifest, limits);
    const attributes = (await env().server.request('GET', `/audience/sections/${SHOP}/attributes`, { token })).body
      .items as { discriminator: string; versions: { id: string }[] }[];
    // Lists leave hidden attributes out: the version of Secret is read from the database.
    const { rows } = await env().db.query(
      'select v.version_id::text as id from attribute_versions v join attributes a using (account_id, attribute_id) where a.account_id = $1::bigint and a.hidden',
      [accountId],
    );
    return {
      accountId,
      clientId,
      token,
      v: {
        ...Object.fromEntries(attributes.map((a) => [a.discriminator.split('.').pop()!, a.versions.at(-1)!.id])),
        hidden: rows[0].id,
      },
    };
  }

  /** Asserts a success, with the body in the message when it is not. */
  async function ok(res: Promise<Response>, status: number): Promise<Response> {
    const r = await res;
    expect(r.status, r.text).toBe(status);
    return r;
  }

  /** A profile keyed by its email address in Shop, with what `p` gives it, through the public API. */
  async function person(a: Account, email: string, p: Person = {}): Promise<string> {
    const { token } = a;
    const at = `/audience/keyspaces/${EMAIL}/profiles/${email}/sections/${SHOP}`;
    await ok(
      env().server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, {
        token,
        body: { profile_key: email },
      }),
      201,
    );
    const values = Object.fromEntries(
      Object.entries({ points: p.points, birthday: p.birthday, member: p.member, mobile: p.mobile })
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k === 'mobile' ? builtIn('attributes', 'mobile') : userCreated('attributes', k), x]),
    );
    if (Object.keys(values).length > 0)
      await ok(
        env().server.request('PATCH', `/v2${at}/attributes`, {
          token,
          body: values,
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
        204,
      );
    if (p.vip)
      await ok(
        env().server.request('PATCH', `${at}/tags`, {
          token,
          body: { [VIP]: true },
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
        204,
      );
    for (const [topic, channel, type] of p.consents ?? []) {
      const res = await env().server.request('POST', `/v2${at}/consents`, {
        token,
        body: { topic_discriminator: topic, channel_discriminator: channel, type, reason: 'test' },
      });
      expect(res.status, res.text).toBeLessThan(300);
    }
    return email;
  }

  async function suppress(a: Account, channel: string, address: string): Promise<void> {
    await ok(
      env().server.admin('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
        channel_discriminator: channel,
        address,
        reason: 'Hard bounce',
      }),
      204,
    );
  }

  async function requestExport(a: Account, body: unknown, kind = 'consents'): Promise<string> {
    const res = await ok(
      env().server.request('POST', `/audience/profiles/reports/${kind}`, { token: a.token, body }),
      201,
    );
    expect(res.body.poll_url).toMatch(/\/audience\/profiles\/reports\/[0-9a-f-]{36}$/);
    return res.body.poll_url;
  }

  /** Waits until the export is ready, polling its v2 form, which answers 202 until then. */
  async function whenReady(a: Account, pollUrl: string): Promise<void> {
    const res = await readWhen(
      `export ${pollUrl} ready`,
      () => env().server.request('GET', v2(pollUrl), { token: a.token }),
      (r) => r.status !== 202,
      STATE_BOUND_MS,
    );
    expect(res.status, res.text).toBe(200);
  }

  /** A GET with exactly the headers given (fetch adds and undoes Accept-Encoding): status, headers and the body's bytes as sent. */
  function rawGet(
    path: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      http
        .get(env().server.url + path, { headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
  }

  /** The file of a ready export, uncompressed (no Accept-Encoding), parsed: header and rows. */
  async function download(a: Account, pollUrl: string): Promise<{ header: string[]; rows: string[][] }> {
    const res = await rawGet(pollPath(pollUrl), { authorization: `Bearer ${a.token}` });
    expect(res.status, res.body.toString()).toBe(200);
    expect(res.headers['content-type']).toBe(CSV);
    expect(res.headers['content-encoding']).toBeUndefined();
    const [header, ...rows] = parseCsv(res.body, { relax_column_count: false }) as string[][];
    return { header, rows };
  }

  /** Nothing was stored or queued for the account. */
  async function expectNothingQueued(a: Account): Promise<void> {
    const { rows } = await env().db.query(
      'select (select count(*) from exports where account_id = $1::bigint)::int as exports, (select count(*) from jobs where account_id = $1::bigint)::int as jobs',
      [a.accountId],
    );
    expect(rows[0]).toEqual({ exports: 0, jobs: 0 });
  }

  /** What a profile holds, read through the public API by its export key: attributes (version id → value) and tags. */
  async function holds(a: Account, exportKey: string) {
    const at = `/audience/keyspaces/${EXPORT}/profiles/${exportKey}/sections/${SHOP}`;
    const attributes = (await ok(env().server.request('GET', `${at}/attributes`, { token: a.token }), 200))
      .body as Record<string, unknown>;
    const tags = (await ok(env().server.request('GET', `${at}/tags`, { token: a.token }), 200)).body as Record<
      string,
      boolean
    >;
    return { attributes, tags };
  }

  /** Stops the worker for `work`, so that exports stay in progress, then starts it again. */
  async function withoutWorker<T>(work: () => Promise<T>): Promise<T> {
    await env().server.worker!.stop();
    try {
      return await work();
    } finally {
      env().server.worker = await startWorker(env().server.services, (err) => console.error('job failed', err));
    }
  }

  /** The shared account of the export tests: who matches which segment, and who may be sent to. */
  async function shopAccount(): Promise<Account> {
    const shop = await account();
    await person(shop, 'ann@example.com', {
      points: 150,
      member: true,
      vip: true,
      birthday: '1990-05-01',
      mobile: '+4741234567',
      consents: [
        [NEWS, CH_EMAIL, 'opt-in'],
        [SMS_OFFERS, CH_SMS, 'opt-in'],
      ],
    });
    await person(shop, 'bob@example.com', { points: 50, member: true, consents: [[NEWS, CH_EMAIL, 'opt-out']] });
    await person(shop, 'cid@example.com', {
      points: 200,
      member: false,
      mobile: '+4741234568',
      consents: [
        [NEWS, CH_EMAIL, 'opt-in'],
        [SMS_OFFERS, CH_SMS, 'opt-in'],
      ],
    });
    await person(shop, 'dan@example.com', { points: 300 });
    await person(shop, 'eve@example.com', { points: 120, member: true, consents: [[DAILY, CH_EMAIL, 'opt-in']] });
    await person(shop, 'gus@example.com', { points: 10, member: false, consents: [[NEWS, CH_EMAIL, 'opt-in']] });
    await suppress(shop, CH_EMAIL, 'CID@example.com');
    await suppress(shop, CH_SMS, '+4741234568');
    return shop;
  }

  /** Changes the account's definitions (a new tag of Shop), as an operator may between a request and its job. */
  async function changeDefinitions(a: Account): Promise<void> {
    await ok(
      env().server.request('POST', `/audience/sections/${SHOP}/tags`, {
        token: a.token,
        body: { name: `Added ${crypto.randomUUID().slice(0, 8)}` },
      }),
      201,
    );
  }

  return {
    account,
    ok,
    changeDefinitions,
    shopAccount,
    person,
    suppress,
    requestExport,
    whenReady,
    rawGet,
    download,
    expectNothingQueued,
    holds,
    withoutWorker,
  };
}

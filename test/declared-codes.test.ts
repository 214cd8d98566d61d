import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_TERMS } from '../src/aql/check.ts';
import { PROBLEMS, type ProblemCode } from '../src/core/problems.ts';
import { MAX_JSON_DEPTH } from '../src/core/text.ts';
import { expectProblem, TestServer, type Response } from './app.ts';
import {
  documentedOperations,
  MANIFEST,
  refusals,
  SECTION,
  sendExample,
  type DocumentedOperation,
} from './example-account.ts';
import { declaredIn } from './problem-codes.ts';

// Declared = observed (test/declared-problems.ts), for the refusals of an operation's own that
// one part of its request causes: each operation of /openapi.json that declares a code here is
// sent the request its examples make (test/example-account.ts), with that part changed, and must
// answer that code, naming what was wrong. A declared code no request can meet fails here.

let server: TestServer;
let account: { accountId: string; token: string };
let operations: DocumentedOperation[];

const EMAIL = 'com.vendor1.keyspaces.email';
/** A keyspace of the account that is closed to the API. */
const CLOSED = 'com.vendor1.keyspaces.sms';
/** The key of a profile that was locked. */
const LOCKED = 'locked@example.org';

beforeAll(async () => {
  server = await TestServer.start();
  account = await server.login({
    ...MANIFEST,
    keyspaces: [{ discriminator: 'com.{vendor}1.keyspaces.sms', api_access: false }],
  });
  operations = await documentedOperations(server);
  const created = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
    token: account.token,
    body: { profile_key: LOCKED },
  });
  expect(created.status, created.text).toBe(201);
  const locked = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/${LOCKED}/locks`, {
    token: account.token,
  });
  expect(locked.status, locked.text).toBe(204);
});
afterAll(async () => server?.close());

/**
 * Sends `change` to each operation that declares `code` and takes the path parameters `params`
 * names; each must answer `code` with a detail that holds `names`.
 */
async function everyDeclaring(
  code: string,
  params: string[],
  change: Parameters<typeof sendExample>[3],
  names: string,
): Promise<void> {
  const ops = operations.filter(
    (op) =>
      declaredIn(op.description).includes(code) &&
      params.every((name) => op.parameters?.some((p) => p.in === 'path' && p.name === name)),
  );
  expect(ops.length).toBeGreaterThan(0);
  const missed: string[] = [];
  for (const op of ops) {
    const res: Response = await sendExample(server, op, account, change);
    // The per-second limits are spent by the clock of the test's server.
    server.clock.advance(2000);
    if (res.body?.type !== `/errors/${code}` || !String(res.body?.detail).includes(names))
      missed.push(`${op.method} ${op.path}: ${res.status} ${res.body?.type} ${res.body?.detail ?? res.text}`);
    else expectProblem(res, res.status, code);
  }
  expect(missed).toEqual([]);
}

describe('the profile a path names, on every profile route: the refusals of identifierOf and locate', () => {
  const profile = ['keyspace_discriminator', 'profile_key'];
  const at = (keyspace: string, key: string) => ({
    params: {
      keyspace_discriminator: keyspace,
      profile_key: key,
      section_discriminator: SECTION,
      consent_types: 'opt-in',
    },
  });

  it('ERR-11: a keyspace the account does not have: 404 AUD-1101', async () => {
    await everyDeclaring('AUD-1101', profile, at('com.vendor1.keyspaces.none', 'anna@example.org'), 'none');
  });

  it('AUTH-18: a keyspace closed to the API: 403 AUD-1106', async () => {
    await everyDeclaring('AUD-1106', profile, at(CLOSED, '+4791234567'), CLOSED);
  });

  it('a key that is no key of its keyspace: 400 AUD-1205 naming profile_key', async () => {
    await everyDeclaring('AUD-1205', profile, at(EMAIL, 'no-address'), 'profile_key');
  });

  it('a key no profile has: 404 AUD-1201', async () => {
    await everyDeclaring('AUD-1201', profile, at(EMAIL, 'nobody@example.org'), 'nobody@example.org');
  });

  it('the key of a locked profile: 410 AUD-1202', async () => {
    await everyDeclaring('AUD-1202', profile, at(EMAIL, LOCKED), LOCKED);
  });
});

/**
 * Where each operation that takes a segment's query as text takes it: its body with `query` in
 * place (`city`, the version id of an attribute of the section, and `name`, the account's, where
 * the body needs them).
 */
const QUERY_BODIES: Record<string, (query: string, example: any, city: string, name: string) => unknown> = {
  postAudienceSegments: (query) => ({ name: `Query ${crypto.randomUUID()}`, query }),
  postAudienceSegmentsVersions: (query) => ({ query }),
  postAudienceProfilesReportsSegmentsCount: (query, example) => ({
    ...example,
    segment: { timezone: 'UTC', segment_definition: query },
  }),
  postAudienceProfilesReportsSegments: (query, example) => ({
    ...example,
    segment: { timezone: 'UTC', segment_definition: query },
  }),
  postAudienceProfilesReportsDuplicates: (query, _example, city) => ({
    section_discriminator: SECTION,
    find_duplicates_by_attribute_version_id: city,
    segments: { timezone: 'UTC', segment_definitions: { Query: query } },
  }),
  putAdminAccountsManifest: (query) => ({ segments: [{ name: 'Query', section: SECTION, versions: [{ query }] }] }),
  postAdminAccountsManifestPreview: (query) => ({
    segments: [{ name: 'Query', section: SECTION, versions: [{ query }] }],
  }),
  putAdminManifest: (query, _example, _city, name) => ({
    account: { name },
    segments: [{ name: 'Query', section: SECTION, versions: [{ query }] }],
  }),
};

describe('a segment query AQL refuses, on every operation that takes one as text', () => {
  /** A query of each code of AQL's, made of the account's ids. */
  let queries: Record<string, string>;
  /** The version id of the attribute City. */
  let city: string;
  /** The account's name, which the operator's manifest names it by. */
  let name: string;

  beforeAll(async () => {
    const get = async (path: string) => (await server.request('GET', path, { token: account.token })).body.items;
    const section = (await get('/audience/sections')).find((s: any) => s.discriminator === SECTION).id;
    name = (await server.admin('GET', `/admin/accounts/${account.accountId}`)).body.name;
    city = (await get(`/audience/sections/${SECTION}/attributes`)).find((a: any) => a.name === 'City').versions[0].id;
    const view = (await get(`/audience/sections/${SECTION}/events`)).find((e: any) => e.name === 'Page view')
      .versions[0].id;
    const term = `section(${section}).attribute(${city}).eq("x")`;
    const event = `section(${section}).event(${view})`;
    queries = {
      'AUD-1111': `section(999999999).attribute(${city}).eq("x")`,
      'AUD-1401': `section(${section}).attribute(${city}).eq(1)`,
      'AUD-1402': `${event}.eventData("colour").eq("red")`,
      'AUD-1403': `${event}.eventData("url[]").eq("x")`,
      'AUD-1701': `${term} & ${term}`,
      'AUD-1702': `section(shop).attribute(${city}).eq("x")`,
      'AUD-1703': `section(${section}).attribute(city).eq("x")`,
      'AUD-1704': `${event}.eq("x")`,
      'AUD-1705': `section(${section}).attribute(${city})`,
      'AUD-1706': `section(${section}).attribute(${city}).eq(Anna)`,
      'AUD-1707': `${event}.inLast("events.year", 0, 1)`,
      'AUD-1708': `${event}.event(${view})`,
      'AUD-1709': 'hello world',
      'AUD-1710': Array(MAX_TERMS + 1)
        .fill(term)
        .join(' || '),
    };
  });

  it('AQL-12 … AQL-26: each refusal answers its code and where, on every such operation', async () => {
    const missed: string[] = [];
    for (const [code, query] of Object.entries(queries)) {
      const ops = operations.filter((op) => QUERY_BODIES[op.operationId] && declaredIn(op.description).includes(code));
      for (const op of ops) {
        const res = await sendExample(server, op, account, {
          body: (example) => QUERY_BODIES[op.operationId](query, example, city, name),
        });
        server.clock.advance(2000);
        // Where in the query, as members of the document as well as in the detail.
        const where = [res.body?.line, res.body?.column, res.body?.offset];
        if (
          res.body?.type !== `/errors/${code}` ||
          !String(res.body?.detail).includes('AQL') ||
          !where.every(Number.isInteger) ||
          !String(res.body?.detail).includes(`at line ${res.body.line}, column ${res.body.column}`)
        )
          missed.push(`${code} ${op.operationId}: ${res.status} ${res.body?.type} ${res.body?.detail ?? res.text}`);
        else expectProblem(res, res.status, code);
      }
    }
    expect(missed).toEqual([]);
  });
});

const { eachOf } = refusals(() => ({ server, account, operations }));

describe('one part of a request changed, on the operations that take it', () => {
  const NO_SECTION = 'com.vendor1.sections.user-created.none';

  it('a section the account does not have, in the path, query or body: 404 AUD-1102', async () => {
    const created = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
      token: account.token,
      body: { profile_key: 'sections@example.org' },
    });
    expect(created.status, created.text).toBe(201);
    await eachOf(
      'AUD-1102',
      [
        'getAdminAccountsActivities',
        'postAdminAccountsActivities',
        'postAudienceKeyspacesProfilesSectionsSubscriptions',
        'postAudienceProfilesReportsConsentsCount',
        'postAudienceProfilesReportsDuplicates',
        'postAudienceProfilesReportsSegments',
        'postEmailsSectionsActivitiesTransactionalTransactions',
      ],
      (op) => ({
        params: {
          section_discriminator: NO_SECTION,
          keyspace_discriminator: EMAIL,
          profile_key: 'sections@example.org',
        },
        body: op.requestBody ? (example: any) => ({ ...example, section_discriminator: NO_SECTION }) : undefined,
      }),
      NO_SECTION,
    );
  });

  it('a version of a segment that is not one of its versions: 400 AUD-1713', async () => {
    const version_id = crypto.randomUUID();
    await eachOf(
      'AUD-1713',
      ['postEmailsReports'],
      () => ({
        body: () => ({
          start_at: '2026-11-01T00:00:00Z',
          end_at: '2026-11-02T00:00:00Z',
          segment_filter: {
            timezone: 'UTC',
            discriminator: 'com.vendor1.segments.user-created.loyal-customers',
            version_id,
          },
        }),
      }),
      version_id,
    );
  });

  it('an operator manifest that names no account, or a name two accounts have: 400 AUD-1118, 409 AUD-1112', async () => {
    await eachOf('AUD-1118', ['putAdminManifest'], () => ({ body: () => ({}) }), 'account.name');
    const name = `Account ${crypto.randomUUID()}`;
    for (let i = 0; i < 2; i++) {
      const created = await server.admin('POST', '/admin/accounts', { name });
      expect(created.status, created.text).toBe(201);
    }
    await eachOf('AUD-1112', ['putAdminManifest'], () => ({ body: () => ({ account: { name } }) }), name);
  });

  it('a delivery no webhook has, and a window that ends before it starts: 404 AUD-2304, 400 AUD-2305', async () => {
    const subscribed = await server.request('POST', '/webhooks', {
      token: account.token,
      body: { url: 'https://example.org/hook', event_types: ['segment.entered'] },
    });
    expect(subscribed.status, subscribed.text).toBe(201);
    const webhook_id = subscribed.body.id;
    const event_id = crypto.randomUUID();
    await eachOf(
      'AUD-2304',
      [
        'getAdminAccountsWebhooksDeliveriesByEventId',
        'getWebhooksDeliveriesByEventId',
        'postAdminAccountsWebhooksDeliveriesReplay',
        'postWebhooksDeliveriesReplay',
      ],
      () => ({ params: { webhook_id, event_id } }),
      event_id,
    );
    const window = { since: '2026-11-28T12:00:00Z', until: '2026-11-28T00:00:00Z' };
    await eachOf(
      'AUD-2305',
      [
        'getAdminAccountsWebhooksDeliveries',
        'getWebhooksDeliveries',
        'postAdminAccountsWebhooksReplay',
        'postWebhooksReplay',
      ],
      (op) => ({
        params: { webhook_id, ...window },
        body: op.requestBody ? (example: any) => ({ ...example, ...window }) : undefined,
      }),
      'until',
    );
  });
});

const FOLDER = 'com.vendor1.topic-folders.user-created';
const POINTS = 'com.vendor1.attributes.user-created.loyalty-points';

/** A manifest that causes each code of a manifest's own checks. */
const MANIFESTS: Record<string, Record<string, unknown>> = {
  'AUD-1109': {
    segments: [
      {
        name: 'Loyal customers',
        section: SECTION,
        versions: [{ query: `section({section}).attribute({attribute:${POINTS}@1}).gt(1)` }],
      },
    ],
  },
  'AUD-1113': { sections: [{ name: 'Shop', topic_folders: [{ name: 'Ping', parent: `${FOLDER}.ping` }] }] },
  'AUD-1114': {
    sections: [
      {
        name: 'Shop',
        topic_folders: [
          { name: 'Ping', parent: `${FOLDER}.pong` },
          { name: 'Pong', parent: `${FOLDER}.ping` },
        ],
      },
    ],
  },
  'AUD-1115': {
    segments: [
      { name: 'No section', versions: [{ query: `section({section}).attribute({attribute:${POINTS}@1}).gt(1)` }] },
    ],
  },
  'AUD-1116': { account: { limits: { widgets_per_second: 1 } } },
  'AUD-1117': { account: { limits: { token_lifetime_seconds: 60 } } },
  'AUD-1712': {
    segments: [
      {
        name: 'Loyal customers',
        section: SECTION,
        versions: [{ query: `section({section}).attribute({attribute:${POINTS}@1}).gt(100)` }],
        live: { time_zone: 'Mars/Olympus_Mons' },
      },
    ],
  },
  'AUD-2302': { webhooks: [{ url: 'gopher://x', event_types: ['profile.deleted'] }] },
};

describe('a manifest its own checks refuse, on every operation that takes one', () => {
  it('DEF-18, DEF-19, LIM-12: each answers its code', async () => {
    const { name } = (await server.admin('GET', `/admin/accounts/${account.accountId}`)).body;
    /** The operator's manifest of every account names its account; the others take the manifest as it is. */
    const named = (op: DocumentedOperation, manifest: Record<string, any>) =>
      op.operationId === 'putAdminManifest' ? { ...manifest, account: { ...manifest.account, name } } : manifest;
    const missed: string[] = [];
    const takers = ['putAdminAccountsManifest', 'postAdminAccountsManifestPreview', 'putAdminManifest'];
    for (const [code, manifest] of Object.entries(MANIFESTS)) {
      for (const op of operations.filter(
        (o) => takers.includes(o.operationId) && declaredIn(o.description).includes(code),
      )) {
        const res = await sendExample(server, op, account, { body: () => named(op, manifest) });
        if (res.body?.type !== `/errors/${code}`)
          missed.push(`${code} ${op.operationId}: ${res.status} ${res.body?.type} ${res.body?.detail ?? res.text}`);
        else expectProblem(res, res.status, code);
      }
    }
    expect(missed).toEqual([]);
  });
});

// The operations left out of /openapi.json (links in messages, /metrics), which
// test/common-problems.test.ts does not see, declare the refusals of every operation of their kind.
describe('the refusals of every operation, on the operations left out of the reference', () => {
  /** The code's problem document, of its status. */
  const refused = (res: Response, code: ProblemCode) => expectProblem(res, PROBLEMS[code].status, code);

  it('ERR-04: NUL in a query; a body that is no JSON, of another type, with a lone surrogate or too deep', async () => {
    const metrics = server.services.adminToken;
    for (const path of ['/metrics', '/mail/open/x', '/mail/click/x', '/mail/unsubscribe/x'])
      refused(
        await server.request('GET', `${path}?note=a%00b`, { token: path === '/metrics' ? metrics : undefined }),
        'AUD-1012',
      );
    const post = (type: string, raw: string) =>
      server.request('POST', '/mail/unsubscribe/x', { raw, headers: { 'content-type': type } });
    refused(await post('application/json', '{"note":'), 'AUD-1004');
    refused(await post('text/plain', 'note'), 'AUD-1005');
    refused(await post('application/json', '{"note":"a\\ud800"}'), 'AUD-1013');
    const deep = '['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1);
    refused(await post('application/json', deep), 'AUD-1014');
    refused(await server.request('POST', '/mail/unsubscribe/x?note=a%00b'), 'AUD-1012');
  });
});

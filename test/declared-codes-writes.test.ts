import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BODY_LIMIT } from '../src/http/app.ts';
import { expectProblem, TestServer } from './app.ts';
import { documentedOperations, MANIFEST, refusals, SECTION, type DocumentedOperation } from './example-account.ts';
import { builtIn, userCreated } from './names.ts';

// Declared = observed (test/declared-problems.ts), for the writes' own refusals (profile data,
// imports, activities, manifests, webhooks, suppressions): each operation that declares a code
// here is sent the request its examples make (test/example-account.ts), with the part that causes
// the code changed, and must answer that code naming what was wrong.

let server: TestServer;
let account: { accountId: string; token: string };
let operations: DocumentedOperation[];
const { eachOf } = refusals(() => ({ server, account, operations }));

const EMAIL = builtIn('keyspaces', 'email');
/** A keyspace of the account that is closed to the API. */
const CLOSED = builtIn('keyspaces', 'sms');
/** The export keyspace, which this account lets manage subscriptions: only its read-only rule refuses an import through it. */
const EXPORT = builtIn('keyspaces', 'export');
const NO_KEYSPACE = builtIn('keyspaces', 'none');
const NO_SECTION = userCreated('sections', 'none');
const NO_CHANNEL = builtIn('channels', 'none');
const EMAIL_CHANNEL = builtIn('channels', 'email');
/** A channel without addresses, which takes no consents. */
const WEB_CHANNEL = builtIn('channels', 'web');
const WEEKLY = userCreated('topics', 'weekly-newsletter');
/** A topic of the SMS channel only. */
const SMS_OFFERS = userCreated('topics', 'sms-offers');
const SECRET = userCreated('attributes', 'secret');
/** An attribute the email keyspace may read but not write. */
const SCORE = userCreated('attributes', 'score');
/** An attribute whose first version is deprecated. */
const VISITS = userCreated('attributes', 'visits');
/** An attribute whose every version is deprecated. */
const RETIRED = userCreated('attributes', 'retired');
const CITY = userCreated('attributes', 'city');
const DEPRECATED = '2026-01-01T00:00:00Z';
/** A profile of the account, and two whose keys a key change would merge. */
const WRITER = 'writer@example.org';
const FROM = 'from@example.org';
const TO = 'to@example.org';
/** A Liquid template that does not parse. */
const BROKEN = '{% if x %}never closed';

/** Version ids by attribute discriminator, hidden ones included (the account's definitions know them). */
let versions: Record<string, string[]>;

beforeAll(async () => {
  server = await TestServer.start();
  const [shop] = MANIFEST.sections!;
  account = await server.login(
    {
      ...MANIFEST,
      keyspaces: [
        { discriminator: CLOSED, api_access: false },
        { discriminator: EXPORT, manage_subscriptions: true },
      ],
      sections: [
        {
          ...shop,
          attributes: [
            ...shop.attributes!,
            { name: 'Secret', hidden: true, versions: [{ type: ['Text'] }] },
            { name: 'Score', keyspace_permissions: { [EMAIL]: ['read'] }, versions: [{ type: ['Text'] }] },
            { name: 'Visits', versions: [{ type: ['Number'], deprecated_at: DEPRECATED }, { type: ['Number'] }] },
            { name: 'Retired', versions: [{ type: ['Text'], deprecated_at: DEPRECATED }] },
          ],
          topics: [...shop.topics!, { name: 'SMS offers', channel: builtIn('channels', 'sms') }],
        },
      ],
    },
    {
      requests_per_second: null,
      token_requests_per_minute: null,
      import_requests_per_minute: null,
      merges_per_profile: 1,
    },
  );
  operations = await documentedOperations(server);
  const defs = await server.services.definitions.get(account.accountId);
  versions = Object.fromEntries(
    defs.sections
      .find((s) => s.discriminator === SECTION)!
      .attributes.map((a) => [a.discriminator, a.versions.map((v) => v.id)]),
  );
  for (const key of [WRITER, FROM, TO]) {
    const created = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
      token: account.token,
      body: { profile_key: key },
    });
    expect(created.status, created.text).toBe(201);
  }
});
afterAll(async () => server?.close());

describe('the writes of profile data', () => {
  /** The path parameters of the writer's profile in the section. */
  const writer = { keyspace_discriminator: EMAIL, profile_key: WRITER, section_discriminator: SECTION };
  const clears = [
    'deleteAudienceKeyspacesProfilesSectionsAttributesByVersionId',
    'deleteV2AudienceKeyspacesProfilesSectionsAttributesByAttributeDiscriminator',
  ];

  it('ATTR-26, ATTR-27: clearing a hidden attribute, or one the keyspace may not write: 400 AUD-1211, 403 AUD-1208', async () => {
    await eachOf(
      'AUD-1211',
      clears,
      () => ({ params: { ...writer, version_id: versions[SECRET][0], attribute_discriminator: SECRET } }),
      SECRET,
    );
    await eachOf(
      'AUD-1208',
      clears,
      () => ({ params: { ...writer, version_id: versions[SCORE][0], attribute_discriminator: SCORE } }),
      SCORE,
    );
  });

  it('ATTR-22: a version 2 write of an attribute whose every version is deprecated: 400 AUD-1207', async () => {
    await eachOf(
      'AUD-1207',
      ['patchV2AudienceKeyspacesProfilesSectionsAttributes'],
      () => ({ params: writer, body: () => ({ [RETIRED]: 'x' }) }),
      RETIRED,
    );
  });

  it('a version 2 write in a section the account does not have: 404 AUD-1102', async () => {
    await eachOf(
      'AUD-1102',
      ['patchV2AudienceKeyspacesProfilesSectionsAttributes'],
      () => ({ params: { ...writer, section_discriminator: NO_SECTION } }),
      NO_SECTION,
    );
  });

  it("a key change that merges the profile with the new key's beyond the merge limit: 409 AUD-1216", async () => {
    await eachOf(
      'AUD-1216',
      ['patchV2AudienceKeyspacesProfilesSectionsAttributes'],
      () => ({
        params: { ...writer, profile_key: FROM, profile_key_update_method: 'merge' },
        body: () => ({ [builtIn('attributes', 'email')]: TO }),
      }),
      'at most 1',
    );
  });

  it('a merge naming a keyspace the account does not have, or one closed to the API: 404 AUD-1101, 403 AUD-1106', async () => {
    const merging = (keyspace: string, key: string) => () => ({
      body: () => ({
        profiles: [
          { keyspace_discriminator: keyspace, profile_key: key },
          { keyspace_discriminator: EMAIL, profile_key: WRITER },
        ],
      }),
    });
    await eachOf('AUD-1101', ['putAudienceProfilesMerges'], merging(NO_KEYSPACE, 'anna@example.org'), NO_KEYSPACE);
    await eachOf('AUD-1106', ['putAudienceProfilesMerges'], merging(CLOSED, '+4791234567'), CLOSED);
  });

  it('AUTH-18: creating a profile through a keyspace closed to the API: 403 AUD-1106', async () => {
    await eachOf(
      'AUD-1106',
      ['postAudienceKeyspacesSectionsProfiles'],
      () => ({
        params: { keyspace_discriminator: CLOSED, section_discriminator: SECTION },
        body: () => ({ profile_key: '+4791234567' }),
      }),
      CLOSED,
    );
  });
});

describe('import requests: their mappings checked against the definitions', () => {
  const V1 = 'postAudienceSectionsImports';
  const V2 = 'postV2AudienceSectionsImports';
  const consent = (fields: Record<string, string | undefined>) => ({
    consent_mappings: [{ consents: [{ field_selector: 'newsletter', type: 'opt-in', ...fields }] }],
  });
  /** An import request of each version through `keyspace`, writing the attribute version `version`, with `more` fields. */
  const request =
    (more: Record<string, unknown>, keyspace = EMAIL, version = () => versions[CITY][0]) =>
    (op: DocumentedOperation) => ({
      body: () => ({
        ...(op.operationId === V1
          ? { keyspace_mappings: [{ keyspace_discriminator: keyspace, field_selector: 'key' }] }
          : { keyspace_mapping: { keyspace_discriminator: keyspace, field_selector: 'key' } }),
        attribute_mappings: [{ field_selector: 'value', attribute_version_id: version() }],
        ...more,
      }),
    });
  const attribute = 'attribute_mappings[0].attribute_version_id';
  const consents = 'consent_mappings[0].consents[0]';

  /** Each code with the request that causes it and what its detail names. */
  const CASES: [string, ReturnType<typeof request>, string][] = [
    ['AUD-1106', request({}, CLOSED), CLOSED],
    ['AUD-1203', request({}, EXPORT), 'keyspace_mapping'],
    ['AUD-1206', request({}, EMAIL, () => '999999999'), attribute],
    ['AUD-1207', request({}, EMAIL, () => versions[VISITS][0]), attribute],
    ['AUD-1211', request({}, EMAIL, () => versions[SECRET][0]), attribute],
    ['AUD-1218', request({ tag_mappings: [{ tag_discriminator: userCreated('tags', 'none') }] }), 'tag_mappings[0]'],
    [
      'AUD-1602',
      request(consent({ topic_discriminator: WEEKLY, channel_discriminator: EMAIL_CHANNEL, type: 'maybe' })),
      `${consents}.type`,
    ],
    ['AUD-1606', request(consent({ topic_discriminator: SMS_OFFERS, channel_discriminator: EMAIL_CHANNEL })), consents],
    ['AUD-1607', request(consent({ topic_discriminator: WEEKLY, channel_discriminator: NO_CHANNEL })), NO_CHANNEL],
    ['AUD-1608', request(consent({ topic_discriminator: WEEKLY, channel_discriminator: WEB_CHANNEL })), consents],
    [
      'AUD-1610',
      request(consent({ topic_discriminator: userCreated('topics', 'none') })),
      `${consents}.topic_discriminator`,
    ],
    ['AUD-1802', request(consent({ topic_discriminator: WEEKLY })), `${consents}.channel_discriminator`],
  ];

  it('IMP-17 … IMP-24: each refusal of a mapping, on both versions', async () => {
    for (const [code, change, names] of CASES) await eachOf(code, [V1, V2], change, names);
  });
});

describe('activities and their events', () => {
  it('the reads of an SMS activity in a section the account does not have: 404 AUD-1102', async () => {
    await eachOf(
      'AUD-1102',
      ['getSmsSectionsActivitiesTimeline', 'getSmsSectionsActivitiesEvents'],
      () => ({ params: { section_discriminator: NO_SECTION } }),
      NO_SECTION,
    );
  });

  it("an activity's template that does not parse, a field of another kind, a sending before its creation, a section the account lacks", async () => {
    const activity = (fields: Record<string, unknown>) => () => ({
      params: { activity_id: 'writes' },
      body: () => ({ kind: 'sms', section_discriminator: SECTION, name: 'Writes', ...fields }),
    });
    await eachOf(
      'AUD-2101',
      ['postAdminAccountsActivities', 'putAdminAccountsActivitiesByActivityId'],
      activity({ kind: 'email', transactional: true, html: BROKEN }),
      'html',
    );
    await eachOf(
      'AUD-2005',
      ['putAdminAccountsActivitiesByActivityId'],
      activity({ email_subject: 'Hi' }),
      'email_subject',
    );
    await eachOf(
      'AUD-2006',
      ['putAdminAccountsActivitiesByActivityId'],
      activity({ created_at: '2026-11-02T00:00:00Z', sent_at: '2026-11-01T00:00:00Z' }),
      'sent_at',
    );
    await eachOf(
      'AUD-1102',
      ['putAdminAccountsActivitiesByActivityId'],
      activity({ section_discriminator: NO_SECTION }),
      NO_SECTION,
    );
  });

  it('events whose keyspace the account does not have, closes to the API, or keeps read-only: 404 AUD-1101, 403 AUD-1106, AUD-1203', async () => {
    const created = await server.admin('PUT', `/admin/accounts/${account.accountId}/activities/sms-writes`, {
      kind: 'sms',
      section_discriminator: SECTION,
      name: 'Writes',
    });
    expect(created.status, created.text).toBe(201);
    const event = (keyspace: string) => () => ({
      body: () => ({
        items: [
          {
            activity_id: 'sms-writes',
            type: 'SENT',
            keyspace_discriminator: keyspace,
            profile_key: '+4791234567',
            correlation_id: 'writes-1',
          },
        ],
      }),
    });
    const names = 'items[0].keyspace_discriminator';
    await eachOf('AUD-1101', ['postAdminAccountsActivityEvents'], event(NO_KEYSPACE), names);
    await eachOf('AUD-1106', ['postAdminAccountsActivityEvents'], event(CLOSED), names);
    await eachOf('AUD-1203', ['postAdminAccountsActivityEvents'], event(EXPORT), names);
  });
});

describe('a manifest the apply refuses, on every operation that takes one', () => {
  const TAKERS = ['putAdminAccountsManifest', 'postAdminAccountsManifestPreview', 'putAdminManifest'];
  let name: string;
  beforeAll(async () => {
    name = (await server.admin('GET', `/admin/accounts/${account.accountId}`)).body.name;
  });
  /** The manifest on each operation: the operator's manifest of every account names its account. */
  const named = (body: Record<string, unknown>) => (op: DocumentedOperation) => ({
    body: () => (op.operationId === 'putAdminManifest' ? { ...body, account: { name } } : body),
  });

  it('a suppression on a channel the account does not have: 400 AUD-1607', async () => {
    await eachOf(
      'AUD-1607',
      TAKERS,
      named({ suppressions: [{ channel_discriminator: NO_CHANNEL, address: 'anna@example.org', reason: 'Asked' }] }),
      NO_CHANNEL,
    );
  });

  it("a transactional activity whose template does not parse: 400 AUD-2101 naming the activity's field", async () => {
    await eachOf(
      'AUD-2101',
      TAKERS,
      named({
        activities: [
          {
            id: 'broken',
            kind: 'email',
            section_discriminator: SECTION,
            name: 'Broken',
            transactional: true,
            html: BROKEN,
          },
        ],
      }),
      'activities[0].html',
    );
  });

  it("LIM-09: a webhook's list of event types over its maximum: 413 AUD-1007", async () => {
    await eachOf(
      'AUD-1007',
      TAKERS,
      named({ webhooks: [{ url: 'https://example.org/hook', event_types: Array(9).fill('profile.deleted') }] }),
      'webhooks[0].event_types',
    );
  });
});

describe('webhooks and suppressions', () => {
  it("a webhook's new URL that is no http one, or another endpoint's: 400 AUD-2302, 409 AUD-2303", async () => {
    const subscribe = async (url: string) => {
      const res = await server.request('POST', '/webhooks', {
        token: account.token,
        body: { url, event_types: ['profile.deleted'] },
      });
      expect(res.status, res.text).toBe(201);
      return res.body.id as string;
    };
    const taken = 'https://example.org/writes-taken';
    await subscribe(taken);
    const webhook_id = await subscribe('https://example.org/writes');
    const patch = ['patchWebhooksByWebhookId', 'patchAdminAccountsWebhooksByWebhookId'];
    await eachOf('AUD-2302', patch, () => ({ params: { webhook_id }, body: () => ({ url: 'gopher://x' }) }), 'url');
    await eachOf('AUD-2303', patch, () => ({ params: { webhook_id }, body: () => ({ url: taken }) }), taken);
  });

  it("an operator's new webhook whose URL is no http one: 400 AUD-2302", async () => {
    await eachOf(
      'AUD-2302',
      ['postAdminAccountsWebhooks'],
      () => ({ body: (example) => ({ ...(example as object), url: 'gopher://x' }) }),
      'url',
    );
  });

  it('lifting the suppression of an address, or evaluating its consent lists, when it is none of its channel: 400 AUD-1205', async () => {
    await eachOf(
      'AUD-1205',
      ['getAudienceChannelsAddressesConsentsSectionsConsentListsEvaluations'],
      () => ({ params: { channel_discriminator: EMAIL_CHANNEL, address: 'no-address' } }),
      'address',
    );
    await eachOf(
      'AUD-1205',
      ['deleteAdminAccountsSuppressionsByAddress'],
      () => ({ params: { channel_discriminator: EMAIL_CHANNEL, address: 'no-address' } }),
      'address',
    );
  });
});

// The unsubscribe link is left out of /openapi.json, which test/common-problems.test.ts reads.
describe('the unsubscribe link', () => {
  it('LIM-08: a body over the limit: 413 AUD-1001', async () => {
    const res = await server.request('POST', '/mail/unsubscribe/x', {
      raw: JSON.stringify({ note: 'x'.repeat(BODY_LIMIT) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(expectProblem(res, 413, 'AUD-1001')).toContain(String(BODY_LIMIT));
  });
});

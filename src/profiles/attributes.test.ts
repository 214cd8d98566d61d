import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer, type Response, expectProblem, testDatabase } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';

/**
 * Profile attributes, tags and events through real HTTP against a real database
 * (CHECKLIST "Attributes, tags and events", ATTR-01..36, and COMP-04, COMP-08, COMP-12).
 */

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

const NS = 'com.vendor1';
const S = `${NS}.sections.user-created.store`;
const M = `${NS}.sections.user-created.magazine`;
const EMAIL = `${NS}.keyspaces.email`;
const CRM = `${NS}.keyspaces.crm-id`;
const WEB = `${NS}.keyspaces.web`;
const attr = (slug: string) => `${NS}.attributes.user-created.${slug}`;
const tag = (slug: string) => `${NS}.tags.user-created.${slug}`;
const event = (slug: string) => `${NS}.events.user-created.${slug}`;
const FIRSTNAME = `${NS}.attributes.firstname`;
const LASTNAME = `${NS}.attributes.lastname`;
const EMAIL_ATTR = `${NS}.attributes.email`;
const CRMID_ATTR = `${NS}.attributes.crmid`;
const KB = 1024;
const DEPRECATED = '2025-01-01T00:00:00Z';

const text = (name: string) => ({ name, type: 'Text' });

const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Store',
      attributes: [
        { name: 'Nickname', versions: [{ type: ['Text'] }] },
        { name: 'Subscribed', versions: [{ type: ['True/False'] }] },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
        { name: 'Last seen', versions: [{ type: ['Timestamp'] }] },
        { name: 'Visits', versions: [{ type: ['Number'] }] },
        { name: 'Balance', versions: [{ type: ['Number with decimal'] }] },
        { name: 'Address', versions: [{ type: ['Struct'] }] },
        {
          name: 'Points',
          versions: [{ type: ['Number'], deprecated_at: DEPRECATED }, { type: ['Number with decimal'] }],
        },
        { name: 'Level', versions: [{ type: ['Text'] }, { type: ['Number'] }] },
        { name: 'Secret', hidden: true, versions: [{ type: ['Text'] }] },
        {
          name: 'Read only',
          keyspace_permissions: { [EMAIL]: ['read'], [WEB]: ['read'] },
          versions: [{ type: ['Text'] }],
        },
        { name: 'Write only', keyspace_permissions: { [EMAIL]: ['write'] }, versions: [{ type: ['Text'] }] },
        { name: 'Email only', keyspace_permissions: { [EMAIL]: ['read', 'write'] }, versions: [{ type: ['Text'] }] },
      ],
      tags: [
        { name: 'VIP' },
        { name: 'Newsletter' },
        { name: 'Hidden', hidden: true },
        { name: 'Read only tag', keyspace_permissions: { [EMAIL]: ['read'] } },
        { name: 'Write only tag', keyspace_permissions: { [EMAIL]: ['write'] } },
        { name: 'Email only tag', keyspace_permissions: { [EMAIL]: ['read', 'write'] } },
      ],
      events: [
        {
          name: 'Page view',
          versions: [
            { type: [text('url'), text('title')] },
            { type: [text('url'), { name: 'seconds', type: 'Number' }] },
          ],
        },
        {
          name: 'Purchase',
          versions: [
            {
              type: [
                { name: 'amount', type: 'Number with decimal' },
                { name: 'paid', type: 'True/False' },
                { name: 'at', type: 'Timestamp' },
                { name: 'day', type: 'Date' },
                { name: 'basket', type: 'Struct' },
                text('note'),
              ],
            },
          ],
        },
        { name: 'Old', versions: [{ type: [text('url')], deprecated_at: DEPRECATED }, { type: [text('url')] }] },
        { name: 'Secret event', hidden: true, versions: [{ type: [text('url')] }] },
        {
          name: 'Email only event',
          keyspace_permissions: { [EMAIL]: ['read', 'write'] },
          versions: [{ type: [text('url')] }],
        },
        { name: 'Read only event', keyspace_permissions: { [EMAIL]: ['read'] }, versions: [{ type: [text('url')] }] },
      ],
    },
    {
      name: 'Magazine',
      attributes: [{ name: 'Issue', versions: [{ type: ['Number'] }] }],
      tags: [{ name: 'Reader' }],
      events: [{ name: 'Read', versions: [{ type: [text('url')] }] }],
    },
  ],
};

/** Rate limits lifted: the tests make many calls on one key within a second. */
const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

let token: string;
/** Section → attribute discriminator → version ids (hidden ones included). */
let attributeVersions: Record<string, Record<string, string[]>>;
/** Section → event discriminator → version ids (hidden ones included). */
let eventVersions: Record<string, Record<string, string[]>>;

beforeAll(async () => {
  const login = await server.login(MANIFEST, NO_LIMITS);
  token = login.token;
  // Version ids of hidden attributes and events are not listed by the API; the account's definitions know them.
  const defs = await server.services.definitions.get(login.accountId);
  attributeVersions = {};
  eventVersions = {};
  for (const section of defs.sections) {
    attributeVersions[section.discriminator] = Object.fromEntries(
      section.attributes.map((a) => [a.discriminator, a.versions.map((v) => v.id)]),
    );
    eventVersions[section.discriminator] = Object.fromEntries(
      section.events.map((e) => [e.discriminator, e.versions.map((v) => v.id)]),
    );
  }
  // The public listings agree with them for visible attributes.
  const listed = await server.request('GET', `/audience/sections/${S}/attributes`, { token });
  expect(listed.status, listed.text).toBe(200);
  for (const a of listed.body.items)
    expect(a.versions.map((v: { id: string }) => v.id)).toEqual(attributeVersions[S][a.discriminator]);
});

/** Version `n` (1-based) of an attribute of a section. */
function version(discriminator: string, n = 1, section = S): string {
  const id = attributeVersions[section][discriminator]?.[n - 1];
  if (id === undefined) throw new Error(`no version ${n} of ${discriminator} in ${section}`);
  return id;
}

function eventVersion(discriminator: string, n = 1, section = S): string {
  const id = eventVersions[section][discriminator]?.[n - 1];
  if (id === undefined) throw new Error(`no version ${n} of ${discriminator} in ${section}`);
  return id;
}

let counter = 0;
/** A profile key nobody used yet. */
function fresh(prefix = 'p'): string {
  return `${prefix}-${++counter}@example.com`;
}

const profile = (ks: string, key: string, section = S) =>
  `/audience/keyspaces/${ks}/profiles/${encodeURIComponent(key)}/sections/${section}`;
const v2 = (ks: string, key: string, section = S) => `/v2${profile(ks, key, section)}`;

/** COMP-08: writes that return nothing answer 204 with an empty body. */
function expectNoContent(res: Response): void {
  expect(res.status, res.text).toBe(204);
  expect(res.text).toBe('');
}

async function create(key: string, ks = EMAIL, section = S): Promise<void> {
  const res = await server.request('POST', `/audience/keyspaces/${ks}/sections/${section}/profiles`, {
    token,
    body: { profile_key: key },
  });
  expect(res.status, res.text).toBe(201);
}

async function attributes(ks: string, key: string, section = S): Promise<Record<string, unknown>> {
  const res = await server.request('GET', `${profile(ks, key, section)}/attributes`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function tags(ks: string, key: string, section = S): Promise<Record<string, boolean>> {
  const res = await server.request('GET', `${profile(ks, key, section)}/tags`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

const patchV1 = (ks: string, key: string, body: unknown, section = S, headers?: Record<string, string>) =>
  server.request('PATCH', `${profile(ks, key, section)}/attributes`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
const patchV2 = (ks: string, key: string, body: unknown, query = '', section = S, headers?: Record<string, string>) =>
  server.request('PATCH', `${v2(ks, key, section)}/attributes${query}`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
const patchTags = (ks: string, key: string, body: unknown, section = S, headers?: Record<string, string>) =>
  server.request('PATCH', `${profile(ks, key, section)}/tags`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
const postEvents = (ks: string, key: string, body: unknown, section = S) =>
  server.request('POST', `${profile(ks, key, section)}/events`, { token, body });
const getEvents = (ks: string, key: string, query = '', section = S) =>
  server.request('GET', `${profile(ks, key, section)}/events${query}`, { token });

/** A fresh email profile created in the store section. */
async function emailProfile(prefix = 'p'): Promise<string> {
  const key = fresh(prefix);
  await create(key);
  return key;
}

describe('GET tags and attributes', () => {
  it('answers the tags as a map of tag discriminator to boolean (ATTR-01)', async () => {
    const key = await emailProfile();
    expect(await tags(EMAIL, key)).toEqual({});
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('newsletter')]: true }));
    const res = await server.request('GET', `${profile(EMAIL, key)}/tags`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
  });

  it('answers the attributes as a map of attribute version id to value (ATTR-02)', async () => {
    const key = await emailProfile();
    // Creating the profile set the email attribute mapped to the keyspace (SPEC §1 rule 5).
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    expectNoContent(
      await patchV2(EMAIL, key, {
        [FIRSTNAME]: 'Ann',
        [attr('visits')]: 3,
        [attr('address')]: { city: 'Oslo', zip: '0150' },
      }),
    );
    const res = await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('visits'))]: 3,
      [version(attr('address'))]: { city: 'Oslo', zip: '0150' },
    });
  });

  it('answers 404 AUD-1201 for attributes, tags and events of an unknown profile (ATTR-03)', async () => {
    for (const what of ['attributes', 'tags', 'events']) {
      expectProblem(
        await server.request('GET', `${profile(EMAIL, fresh('nobody'))}/${what}`, { token }),
        404,
        'AUD-1201',
      );
    }
  });

  it('answers 404 for an unknown keyspace or section (ATTR-03)', async () => {
    const key = await emailProfile();
    for (const what of ['attributes', 'tags', 'events']) {
      expectProblem(
        await server.request('GET', `${profile(`${NS}.keyspaces.nope`, key)}/${what}`, { token }),
        404,
        'AUD-1101',
      );
      expectProblem(
        await server.request('GET', `${profile(EMAIL, key, `${NS}.sections.user-created.nope`)}/${what}`, { token }),
        404,
        'AUD-1102',
      );
    }
    // Writes name the same resources and answer the same.
    expectProblem(
      await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'x' }, `${NS}.sections.user-created.nope`),
      404,
      'AUD-1102',
    );
    expectProblem(await patchV2(`${NS}.keyspaces.nope`, key, { [FIRSTNAME]: 'x' }), 404, 'AUD-1101');
    expectProblem(
      await patchTags(EMAIL, key, { [tag('vip')]: true }, `${NS}.sections.user-created.nope`),
      404,
      'AUD-1102',
    );
  });

  it('leaves out attributes and tags not readable through the keyspace (ATTR-04)', async () => {
    const key = await emailProfile();
    // "Write only" can be written but not read through the email keyspace.
    expectNoContent(
      await patchV2(EMAIL, key, { [attr('write-only')]: 'w', [attr('email-only')]: 'e', [FIRSTNAME]: 'Ann' }),
    );
    expectNoContent(
      await patchTags(EMAIL, key, { [tag('write-only-tag')]: true, [tag('email-only-tag')]: true, [tag('vip')]: true }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('email-only'))]: 'e',
    });
    expect(await tags(EMAIL, key)).toEqual({ [tag('email-only-tag')]: true, [tag('vip')]: true });

    // Through the web keyspace (after a merge) the email-only types are left out too.
    const cookie = `cookie-${++counter}`;
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: key },
          { keyspace_discriminator: WEB, profile_key: cookie },
        ],
      },
    });
    expectNoContent(merged);
    expect(await attributes(WEB, cookie)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Ann' });
    expect(await tags(WEB, cookie)).toEqual({ [tag('vip')]: true });
    // Events follow the same rule.
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('email-only-event')),
            data: { url: 'e' },
          },
          { event_time: '2026-01-02T00:00:00Z', version_id: eventVersion(event('page-view')), data: { url: 'p' } },
        ],
      }),
    );
    const viaEmail = await getEvents(EMAIL, key);
    expect(viaEmail.body.items.map((e: { data: { url: string } }) => e.data.url)).toEqual(['p', 'e']);
    const viaWeb = await getEvents(WEB, cookie);
    expect(viaWeb.body.items.map((e: { data: { url: string } }) => e.data.url)).toEqual(['p']);
  });
});

describe('PATCH tags', () => {
  it('sets true tags, removes false ones, keeps unmentioned ones, answers 204 (ATTR-05, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('newsletter')]: true }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: false }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('newsletter')]: true });
    // Removing a tag that is not set and an empty patch change nothing.
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: false }));
    expectNoContent(await patchTags(EMAIL, key, {}));
    expect(await tags(EMAIL, key)).toEqual({ [tag('newsletter')]: true });
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
  });

  it('refuses a tag value that is not a boolean with 400 and changes nothing (ATTR-06)', async () => {
    const key = await emailProfile();
    for (const value of ['true', 1, 0, null, {}, []]) {
      expectProblem(await patchTags(EMAIL, key, { [tag('newsletter')]: true, [tag('vip')]: value }), 400, 'AUD-1209');
    }
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('refuses an unknown or hidden tag with 400 (ATTR-06, ATTR-25)', async () => {
    const key = await emailProfile();
    expectProblem(await patchTags(EMAIL, key, { [tag('nope')]: true }), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('hidden')]: true }), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('nope')]: true }), 400, 'AUD-1218');
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('answers 404 AUD-1201 for tags of an unknown profile', async () => {
    expectProblem(await patchTags(EMAIL, fresh('nobody'), { [tag('vip')]: true }), 404, 'AUD-1201');
  });
});

describe('PATCH attributes, version 1', () => {
  it('sets by version id, clears with null, keeps unmentioned attributes, answers 204 (ATTR-07, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(FIRSTNAME)]: 'Ann',
        [version(LASTNAME)]: 'Lee',
        [version(attr('visits'))]: 2,
      }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Lee',
      [version(attr('visits'))]: 2,
    });
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Anna', [version(LASTNAME)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Anna',
      [version(attr('visits'))]: 2,
    });
    // Clearing an attribute that has no value is no error.
    expectNoContent(await patchV1(EMAIL, key, { [version(LASTNAME)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Anna',
      [version(attr('visits'))]: 2,
    });
  });

  it('writes each version of an attribute on its own (ATTR-07)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV1(EMAIL, key, { [version(attr('level'), 1)]: 'gold', [version(attr('level'), 2)]: 3 }));
    expect(await attributes(EMAIL, key)).toMatchObject({
      [version(attr('level'), 1)]: 'gold',
      [version(attr('level'), 2)]: 3,
    });
  });

  it('creates a missing profile (ATTR-08)', async () => {
    const key = fresh('v1new');
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Nina' }));
    expect(await attributes(EMAIL, key)).toMatchObject({ [version(FIRSTNAME)]: 'Nina' });
    // The key is normalised like any other email key.
    expect(await attributes(EMAIL, key.toUpperCase())).toMatchObject({ [version(FIRSTNAME)]: 'Nina' });
    // In another keyspace too.
    const crm = `crm-${++counter}`;
    expectNoContent(await patchV1(CRM, crm, { [version(LASTNAME)]: 'Crm' }));
    expect(await attributes(CRM, crm)).toMatchObject({ [version(LASTNAME)]: 'Crm' });
  });

  it('creates nothing when the PATCH is refused (ATTR-08)', async () => {
    const key = fresh('v1refused');
    expectProblem(
      await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Nina', [version(attr('visits'))]: 'many' }),
      400,
      'AUD-1209',
    );
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('changes only the attribute when it is a key attribute: the profile key stays (ATTR-09)', async () => {
    const key = await emailProfile();
    const other = fresh('v1other');
    expectNoContent(await patchV1(EMAIL, key, { [version(EMAIL_ATTR)]: other }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: other });
    expectProblem(await server.request('GET', `${profile(EMAIL, other)}/attributes`, { token }), 404, 'AUD-1201');
    // Clearing it through version 1 is allowed as well and the key still locates the profile.
    expectNoContent(await patchV1(EMAIL, key, { [version(EMAIL_ATTR)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({});
  });
});

describe('PATCH attributes, version 2', () => {
  it('sets by discriminator, clears with null, keeps unmentioned attributes, answers 204 (ATTR-10, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [LASTNAME]: 'Lee', [attr('subscribed')]: true }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Lee',
      [version(attr('subscribed'))]: true,
    });
    expectNoContent(await patchV2(EMAIL, key, { [LASTNAME]: null, [attr('subscribed')]: false }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('subscribed'))]: false,
    });
    expectNoContent(await patchV2(EMAIL, key, {}));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('subscribed'))]: false,
    });
  });

  it('writes the current version of an attribute, not a deprecated one (ATTR-10, ATTR-22)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV2(EMAIL, key, { [attr('points')]: 12.5 }));
    const values = await attributes(EMAIL, key);
    expect(values[version(attr('points'), 2)]).toBe(12.5);
    expect(values).not.toHaveProperty(version(attr('points'), 1));
  });

  it('answers 404 on a missing profile and creates nothing (ATTR-11)', async () => {
    const key = fresh('v2missing');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann' }), 404, 'AUD-1201');
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    // The key is still free: creating the profile succeeds and it starts empty but for its key.
    await create(key);
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses null for an attribute that is a profile key with 400 (ATTR-12)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: null }), 400, 'AUD-1212');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [EMAIL_ATTR]: null }), 400, 'AUD-1212');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    const crm = `crm-${++counter}`;
    await create(crm, CRM);
    expectProblem(await patchV2(CRM, crm, { [CRMID_ATTR]: null }), 400, 'AUD-1212');
    expect(await attributes(CRM, crm)).toEqual({ [version(CRMID_ATTR)]: crm });
  });

  it('moves the key when a key attribute changes to a free value (ATTR-13)', async () => {
    const key = await emailProfile();
    const moved = fresh('moved');
    expectNoContent(await patchV2(EMAIL, key, { [EMAIL_ATTR]: ` ${moved.toUpperCase()} `, [FIRSTNAME]: 'Ann' }));
    // The new value is normalised like a key, and locates the profile; the old key no longer does.
    expect(await attributes(EMAIL, moved)).toEqual({ [version(EMAIL_ATTR)]: moved, [version(FIRSTNAME)]: 'Ann' });
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    // The freed key can be used by a new profile.
    await create(key);
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });

    // The CRM keyspace works the same way.
    const crm = `crm-${++counter}`;
    await create(crm, CRM);
    expectNoContent(await patchV2(CRM, crm, { [CRMID_ATTR]: `${crm}-new` }));
    expect(await attributes(CRM, `${crm}-new`)).toEqual({ [version(CRMID_ATTR)]: `${crm}-new` });
    expectProblem(await server.request('GET', `${profile(CRM, crm)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('refuses a key attribute value that is not a valid key with 400 (ATTR-13, ATTR-20)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: 'not an address' }), 400, 'AUD-1205');
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: 42 }), 400, 'AUD-1209');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it("answers 409 AUD-1213 when the new key is another profile's, without profile_key_update_method (ATTR-14)", async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, b, { [LASTNAME]: 'Bee' }));
    expectProblem(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b, [FIRSTNAME]: 'Ann' }), 409, 'AUD-1213');
    // Nothing changed on either side.
    expect(await attributes(EMAIL, a)).toEqual({ [version(EMAIL_ATTR)]: a });
    expect(await attributes(EMAIL, b)).toEqual({ [version(EMAIL_ATTR)]: b, [version(LASTNAME)]: 'Bee' });
  });

  it('accepts only delete and merge as profile_key_update_method (ATTR-15)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    for (const method of ['remove', 'DELETE', 'overwrite', '']) {
      expectProblem(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, `?profile_key_update_method=${method}`), 400);
    }
    expect(await attributes(EMAIL, a)).toEqual({ [version(EMAIL_ATTR)]: a });
    // The method is not needed, and harmless, when the new key is free or no key changes.
    const free = fresh('free');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }, '?profile_key_update_method=merge'));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: free }, '?profile_key_update_method=delete'));
    expect(await attributes(EMAIL, free)).toEqual({ [version(EMAIL_ATTR)]: free, [version(FIRSTNAME)]: 'Ann' });
  });

  it("with delete, moves the section's attributes to the profile holding the new key and drops the old key (ATTR-16)", async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann', [attr('visits')]: 7 }));
    expectNoContent(await patchV2(EMAIL, b, { [FIRSTNAME]: 'Bob', [LASTNAME]: 'Bee' }));
    expectNoContent(
      await patchV2(EMAIL, a, { [EMAIL_ATTR]: b, [attr('nickname')]: 'annie' }, '?profile_key_update_method=delete'),
    );
    // The holder of the new key has a's values over its own.
    expect(await attributes(EMAIL, b)).toEqual({
      [version(EMAIL_ATTR)]: b,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Bee',
      [version(attr('visits'))]: 7,
      [version(attr('nickname'))]: 'annie',
    });
    // a's key was not used in another section: it no longer locates a profile.
    expectProblem(await server.request('GET', `${profile(EMAIL, a)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('with delete, keeps the old key while another section still uses it (ATTR-16)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    // a's email attribute also holds the key in the magazine section.
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: a, [attr('issue')]: 4 }, '', M));
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, '?profile_key_update_method=delete'));
    expect(await attributes(EMAIL, b)).toEqual({ [version(EMAIL_ATTR)]: b, [version(FIRSTNAME)]: 'Ann' });
    // The old key still locates a: its store values moved away, its magazine values stay.
    expect(await attributes(EMAIL, a)).toEqual({});
    expect(await attributes(EMAIL, a, M)).toEqual({
      [version(EMAIL_ATTR, 1, M)]: a,
      [version(attr('issue'), 1, M)]: 4,
    });
    // They are two profiles.
    expect(await attributes(EMAIL, b, M)).toEqual({});
  });

  it('with merge, joins the two profiles: both keys locate one profile with both sets of values (ATTR-17)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }));
    expectNoContent(await patchTags(EMAIL, a, { [tag('vip')]: true }));
    expectNoContent(await patchV2(EMAIL, b, { [LASTNAME]: 'Bee' }));
    expectNoContent(await patchV2(EMAIL, b, { [attr('issue')]: 9 }, '', M));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, '?profile_key_update_method=merge'));
    const expected = { [version(EMAIL_ATTR)]: b, [version(FIRSTNAME)]: 'Ann', [version(LASTNAME)]: 'Bee' };
    expect(await attributes(EMAIL, a)).toEqual(expected);
    expect(await attributes(EMAIL, b)).toEqual(expected);
    expect(await tags(EMAIL, b)).toEqual({ [tag('vip')]: true });
    expect(await attributes(EMAIL, a, M)).toEqual({ [version(attr('issue'), 1, M)]: 9 });
    // A later write through either key shows through the other.
    expectNoContent(await patchV2(EMAIL, b, { [attr('nickname')]: 'one' }));
    expect(await attributes(EMAIL, a)).toEqual({ ...expected, [version(attr('nickname'))]: 'one' });
  });
});

describe('concurrent writes (ATTR-07, ATTR-10)', () => {
  // Writes arriving together share one statement (docs/benchmarks.md "Profiles"): each must still
  // answer for itself, and writes to one profile through two keys of its cluster all apply.
  it('applies concurrent PATCHes through two keys of one cluster and answers a missing profile with 404 alone', async () => {
    const key = await emailProfile('c');
    const web = `web-${key}`;
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: key },
            { keyspace_discriminator: WEB, profile_key: web },
          ],
        },
      }),
    );
    const missing = fresh('cmissing');
    const answers = await Promise.all([
      patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann' }),
      patchV2(WEB, web, { [LASTNAME]: 'Lee' }),
      patchV2(EMAIL, key, { [attr('visits')]: 3 }),
      patchV1(WEB, web, { [version(attr('nickname'))]: 'nick' }),
      patchV2(EMAIL, missing, { [FIRSTNAME]: 'Nobody' }),
      patchV2(WEB, web, { [attr('issue')]: 7 }, '', M),
      patchV1(EMAIL, fresh('cnew'), { [version(FIRSTNAME)]: 'New' }),
    ]);
    expectProblem(answers[4], 404, 'AUD-1201');
    for (const res of answers.filter((_, i) => i !== 4)) expectNoContent(res);
    const expected = {
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Lee',
      [version(attr('visits'))]: 3,
      [version(attr('nickname'))]: 'nick',
    };
    expect(await attributes(EMAIL, key)).toEqual(expected);
    expect(await attributes(WEB, web)).toEqual(expected);
    expect(await attributes(EMAIL, key, M)).toEqual({ [version(attr('issue'), 1, M)]: 7 });
    expectProblem(await server.request('GET', `${profile(EMAIL, missing)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('applies concurrent PATCHes of one key in some order, each value whole', async () => {
    const key = await emailProfile('d');
    const names = ['One', 'Two', 'Three', 'Four'];
    for (const res of await Promise.all(
      names.map((n) => patchV2(EMAIL, key, { [FIRSTNAME]: n, [attr('nickname')]: n.toLowerCase() })),
    ))
      expectNoContent(res);
    const values = await attributes(EMAIL, key);
    expect(names).toContain(values[version(FIRSTNAME)]);
    expect(values[version(attr('nickname'))]).toBe(String(values[version(FIRSTNAME)]).toLowerCase());
  });
});

/**
 * Concurrent writes of one section row, made to meet: a transaction of the test's own holds a lock
 * that the writes wait for after they have read the row, and ends once they all wait.
 */
describe('concurrent writes of one section row keep the history exact (issue 23)', () => {
  // Two connections: one holds the lock, the other watches who waits (pg_stat_activity keeps
  // what it showed first for the rest of a transaction).
  let db: pg.Client;
  let watch: pg.Client;
  beforeAll(async () => {
    db = new pg.Client({ connectionString: await testDatabase() });
    watch = new pg.Client({ connectionString: await testDatabase() });
    await db.connect();
    await watch.connect();
  });
  afterAll(async () => {
    await db?.end();
    await watch?.end();
  });

  /** A profile's account and id, the first and second values of the statements below. */
  const profileOf = async (key: string) => {
    const {
      rows: [row],
    } = await db.query<{ account_id: string; profile_id: string }>(
      'select account_id, profile_id from profile_identifiers where profile_key = $1',
      [key],
    );
    return [row.account_id, row.profile_id];
  };
  /** Waits until `n` statements of the database wait for a lock (on a Citus cluster, on its nodes: citus_stat_activity). */
  async function waiting(n: number): Promise<void> {
    const {
      rows: [{ citus }],
    } = await watch.query<{ citus: boolean }>("select to_regclass('citus_stat_activity') is not null as citus");
    const activity = citus ? 'citus_stat_activity' : 'pg_stat_activity';
    const count = async () =>
      (
        await watch.query<{ n: number }>(
          `select count(*)::int as n from ${activity} where datname = current_database() and wait_event_type = 'Lock'`,
        )
      ).rows[0].n;
    while ((await count()) < n) await new Promise((r) => setTimeout(r, 20));
  }
  /** Starts the requests one after another, each once the ones before it wait, then ends the test's lock. */
  async function meet(hold: string, values: unknown[], requests: (() => Promise<Response>)[]): Promise<Response[]> {
    await db.query('begin');
    await db.query(hold, values);
    const answers: Promise<Response>[] = [];
    for (const request of requests) {
      answers.push(request());
      await waiting(answers.length);
    }
    await db.query('commit');
    return Promise.all(answers);
  }
  /** Every value an attribute of a profile held: those it replaced (history) and the current one, sorted. */
  async function valuesOf(key: string, section: string, versionId: string): Promise<unknown[]> {
    const history = await db.query<{ value: unknown }>(
      `select h.value from attribute_history h join sections s on s.account_id = h.account_id and s.section_id = h.section_id
       where h.account_id = $1::bigint and h.profile_id = $2::bigint and h.version_id = $3::bigint and s.discriminator = $4`,
      [...(await profileOf(key)), versionId, section],
    );
    const current = (await attributes(EMAIL, key, section))[versionId];
    return [...history.rows.map((r) => r.value), ...(current === undefined ? [] : [current])].sort();
  }

  it('first writes of a section row: the second replaces the first, which the history keeps (ATTR-07)', async () => {
    const key = await emailProfile('race');
    const issue = version(attr('issue'), 1, M);
    // The first write inserts the row and then waits to check its profile (the foreign key),
    // which the test's lock holds; the second, which found no row, waits for the first's insert.
    const answers = await meet(
      'select 1 from profiles where account_id = $1::bigint and profile_id = $2::bigint for update',
      await profileOf(key),
      [() => patchV1(EMAIL, key, { [issue]: 1 }, M), () => patchV1(EMAIL, key, { [issue]: 2 }, M)],
    );
    for (const res of answers) expectNoContent(res);
    expect(await valuesOf(key, M, issue)).toEqual([1, 2]);
  });

  it('a PATCH and a DELETE of a value read before the other wrote: each replaced value once in the history (ATTR-10)', async () => {
    const key = await emailProfile('race');
    const nick = version(attr('nickname'));
    expectNoContent(await patchV1(EMAIL, key, { [nick]: 'one' }));
    // Both read the row, then wait for the test's lock on it; the DELETE writes in a transaction.
    const row = `select 1 from profile_sections ps join sections s using (account_id, section_id)
      where ps.account_id = $1::bigint and ps.profile_id = $2::bigint and s.discriminator = $3 for update`;
    const answers = await meet(
      row,
      [...(await profileOf(key)), S],
      [
        () => patchV1(EMAIL, key, { [nick]: 'two' }),
        () => server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('nickname')}`, { token }),
      ],
    );
    for (const res of answers) expectNoContent(res);
    expect(await valuesOf(key, S, nick)).toEqual(['one', 'two']);
  });
});

describe('payload size (ATTR-19)', () => {
  const big = 'x'.repeat(101 * KB);
  it('refuses attribute and tag PATCH payloads over 100 KB with 413 AUD-1210', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: big }), 413, 'AUD-1210');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: big }), 413, 'AUD-1210');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true, padding: big }), 413, 'AUD-1210');
    // Also when the profile does not exist (version 1 would create it): nothing is created.
    const missing = fresh('big');
    expectProblem(await patchV1(EMAIL, missing, { [version(FIRSTNAME)]: big }), 413, 'AUD-1210');
    expectProblem(await server.request('GET', `${profile(EMAIL, missing)}/attributes`, { token }), 404, 'AUD-1201');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('accepts a payload just under 100 KB', async () => {
    const key = await emailProfile();
    const value = 'y'.repeat(99 * KB);
    expectNoContent(await patchV2(EMAIL, key, { [attr('nickname')]: value }));
    expect((await attributes(EMAIL, key))[version(attr('nickname'))]).toBe(value);
  });
});

describe('attribute types (ATTR-20)', () => {
  const cases: { attribute: string; accepted: unknown[]; refused: unknown[] }[] = [
    {
      attribute: attr('nickname'),
      accepted: ['annie', '', '2024-01-01', 'ünïcødé'],
      refused: [5, true, { a: 1 }, ['a']],
    },
    { attribute: attr('subscribed'), accepted: [true, false], refused: ['true', 1, 0, { a: true }, [true]] },
    {
      attribute: attr('birthday'),
      accepted: ['1990-05-17', '2024-02-29', '2024-05-01T10:00:00Z'],
      refused: ['yesterday', '17.05.1990', '2024-13-45', 19900517, true, { d: '1990-05-17' }],
    },
    {
      attribute: attr('last-seen'),
      accepted: [1714557600000, 0, -5],
      refused: [1.5, 1714557600000.25, '1714557600000', true, [1]],
    },
    { attribute: attr('visits'), accepted: [3, 0, -2, 3.5], refused: ['3', true, { n: 3 }, [3]] },
    { attribute: attr('balance'), accepted: [2.75, 10, -0.5], refused: ['2.75', false, { n: 2.75 }, [2.75]] },
    {
      attribute: attr('address'),
      accepted: [{ city: 'Oslo', lines: ['a', 'b'], nested: { n: 1 } }, {}],
      refused: [[], [{ city: 'Oslo' }], 'Oslo', 5, true],
    },
  ];

  for (const { attribute, accepted, refused } of cases) {
    const name = attribute.split('.').at(-1);
    it(`accepts values of the type of ${name} and null, through version 1 and 2 (ATTR-20)`, async () => {
      const key = await emailProfile();
      for (const value of accepted) {
        expectNoContent(await patchV2(EMAIL, key, { [attribute]: value }));
        expect((await attributes(EMAIL, key))[version(attribute)]).toEqual(value);
        expectNoContent(await patchV2(EMAIL, key, { [attribute]: null }));
        expect(await attributes(EMAIL, key)).not.toHaveProperty(version(attribute));
        expectNoContent(await patchV1(EMAIL, key, { [version(attribute)]: value }));
        expect((await attributes(EMAIL, key))[version(attribute)]).toEqual(value);
        expectNoContent(await patchV1(EMAIL, key, { [version(attribute)]: null }));
        expect(await attributes(EMAIL, key)).not.toHaveProperty(version(attribute));
      }
    });

    it(`refuses values that do not fit the type of ${name} with 400 (ATTR-20)`, async () => {
      const key = await emailProfile();
      for (const value of refused) {
        expectProblem(await patchV2(EMAIL, key, { [attribute]: value }), 400, 'AUD-1209');
        expectProblem(await patchV1(EMAIL, key, { [version(attribute)]: value }), 400, 'AUD-1209');
      }
      expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    });
  }

  it('refuses a number that is not finite (ATTR-20)', async () => {
    const key = await emailProfile();
    // JSON has no Infinity, but 1e400 parses to it.
    for (const attribute of [attr('visits'), attr('balance'), attr('last-seen')]) {
      const res = await server.request('PATCH', `${v2(EMAIL, key)}/attributes`, {
        token,
        raw: `{"${attribute}": 1e400}`,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expectProblem(res, 400, 'AUD-1209');
    }
  });

  it('refuses the whole patch when one value does not fit, changing nothing (ATTR-20)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [attr('visits')]: 'many' }), 400, 'AUD-1209');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses a body that is not a JSON object with 400', async () => {
    const key = await emailProfile();
    for (const raw of ['[1,2]', '"x"', '{"a":', 'null']) {
      const res = await server.request('PATCH', `${v2(EMAIL, key)}/attributes`, {
        token,
        raw,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expectProblem(res, 400);
    }
  });
});

describe('attribute definitions and permissions', () => {
  it('refuses an attribute version id or discriminator not defined for the section with 400 AUD-1206 (ATTR-21)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { '999999999': 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [FIRSTNAME]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [attr('nope')]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [version(FIRSTNAME)]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [attr('nope')]: 'x' }), 400, 'AUD-1206');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses a deprecated attribute version with 400 AUD-1207 (ATTR-22)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { [version(attr('points'), 1)]: 5 }), 400, 'AUD-1207');
    expectNoContent(await patchV1(EMAIL, key, { [version(attr('points'), 2)]: 5.5 }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(attr('points'), 2)]: 5.5 });
  });

  it('refuses a hidden attribute with 400 (ATTR-21)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('secret')]: 's' }), 400, 'AUD-1211');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('secret'))]: 's' }), 400, 'AUD-1211');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses attributes, tags and events not writable through the keyspace with 403 AUD-1208 (ATTR-23)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('read-only')]: 'r' }), 403, 'AUD-1208');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('read-only'))]: 'r' }), 403, 'AUD-1208');
    expectProblem(await patchTags(EMAIL, key, { [tag('read-only-tag')]: true }), 403, 'AUD-1208');
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('read-only')}`, { token }),
      403,
      'AUD-1208',
    );
    expectProblem(
      await postEvents(EMAIL, key, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('read-only-event')),
            data: { url: 'x' },
          },
        ],
      }),
      403,
      'AUD-1208',
    );
    // Through the web keyspace, the email-only types are not writable either.
    const cookie = `cookie-${++counter}`;
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: key },
            { keyspace_discriminator: WEB, profile_key: cookie },
          ],
        },
      }),
    );
    expectProblem(await patchV2(WEB, cookie, { [attr('email-only')]: 'e' }), 403, 'AUD-1208');
    expectProblem(await patchTags(WEB, cookie, { [tag('email-only-tag')]: true }), 403, 'AUD-1208');
    expectProblem(
      await postEvents(WEB, cookie, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('email-only-event')),
            data: { url: 'x' },
          },
        ],
      }),
      403,
      'AUD-1208',
    );
    expectNoContent(await patchV2(WEB, cookie, { [FIRSTNAME]: 'Web' }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Web' });
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('keeps default attribute values per section (ATTR-24)', async () => {
    const key = await emailProfile();
    // Default attributes have the same discriminator in every section, and their own versions.
    expect(version(FIRSTNAME, 1, M)).not.toBe(version(FIRSTNAME, 1, S));
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann' }));
    // The profile was created in the store section: the magazine section has no values yet.
    expect(await attributes(EMAIL, key, M)).toEqual({});
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Anna', [EMAIL_ATTR]: key }, '', M));
    expect(await attributes(EMAIL, key, M)).toEqual({
      [version(FIRSTNAME, 1, M)]: 'Anna',
      [version(EMAIL_ATTR, 1, M)]: key,
    });
    expect(await attributes(EMAIL, key)).toEqual({ [version(FIRSTNAME)]: 'Ann', [version(EMAIL_ATTR)]: key });
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: null }));
    expect(await attributes(EMAIL, key, M)).toEqual({
      [version(FIRSTNAME, 1, M)]: 'Anna',
      [version(EMAIL_ATTR, 1, M)]: key,
    });
    // Tags are per section too.
    expectNoContent(await patchTags(EMAIL, key, { [tag('reader')]: true }, M));
    expect(await tags(EMAIL, key)).toEqual({});
    expect(await tags(EMAIL, key, M)).toEqual({ [tag('reader')]: true });
  });

  it('refuses custom attributes and tags of another section with 400 (ATTR-25)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('nickname')]: 'n' }, '', M), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('nickname'))]: 'n' }, M), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [attr('issue')]: 1 }), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('issue'), 1, M)]: 1 }), 400, 'AUD-1206');
    // A default attribute's version id of one section is not one of another section.
    expectProblem(await patchV1(EMAIL, key, { [version(FIRSTNAME, 1, M)]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true }, M), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('reader')]: true }), 400, 'AUD-1218');
    expectProblem(
      await postEvents(
        EMAIL,
        key,
        {
          items: [
            { event_time: '2026-01-01T00:00:00Z', version_id: eventVersion(event('page-view')), data: { url: 'x' } },
          ],
        },
        M,
      ),
      400,
      'AUD-1220',
    );
    expect(await attributes(EMAIL, key, M)).toEqual({});
    expect(await tags(EMAIL, key, M)).toEqual({});
  });
});

describe('DELETE attributes', () => {
  it('clears one version by version id and answers 204 (ATTR-26, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(attr('level'), 1)]: 'gold',
        [version(attr('level'), 2)]: 3,
        [version(FIRSTNAME)]: 'Ann',
      }),
    );
    expectNoContent(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('level'), 1)}`, { token }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(attr('level'), 2)]: 3,
      [version(FIRSTNAME)]: 'Ann',
    });
    // Clearing a version without a value is no error.
    expectNoContent(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('level'), 1)}`, { token }),
    );
  });

  it('answers 400 for an unknown version and 404 for an unknown profile (ATTR-26)', async () => {
    const key = await emailProfile();
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/999999999`, { token }),
      400,
      'AUD-1206',
    );
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('issue'), 1, M)}`, { token }),
      400,
      'AUD-1206',
    );
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, fresh('nobody'))}/attributes/${version(FIRSTNAME)}`, { token }),
      404,
      'AUD-1201',
    );
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('nope')}`, { token }),
      400,
      'AUD-1206',
    );
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, fresh('nobody'))}/attributes/${FIRSTNAME}`, { token }),
      404,
      'AUD-1201',
    );
  });

  it('clears every version of an attribute by discriminator with version 2 (ATTR-27, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(attr('level'), 1)]: 'gold',
        [version(attr('level'), 2)]: 3,
        [version(FIRSTNAME)]: 'Ann',
      }),
    );
    expectNoContent(await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('level')}`, { token }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Ann' });
    expectNoContent(await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${FIRSTNAME}`, { token }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses to clear an attribute that is a profile key with 400 (ATTR-28)', async () => {
    const key = await emailProfile();
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${EMAIL_ATTR}`, { token }),
      400,
      'AUD-1212',
    );
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    const crm = `crm-${++counter}`;
    await create(crm, CRM);
    expectProblem(
      await server.request('DELETE', `${v2(CRM, crm)}/attributes/${CRMID_ATTR}`, { token }),
      400,
      'AUD-1212',
    );
    expect(await attributes(CRM, crm)).toEqual({ [version(CRMID_ATTR)]: crm });
  });
});

describe('events', () => {
  const pageView = () => eventVersion(event('page-view'), 1);
  const pageView2 = () => eventVersion(event('page-view'), 2);
  const purchase = () => eventVersion(event('purchase'));

  it('adds events with 204 and returns them as {items} (ATTR-29, ATTR-33, COMP-08)', async () => {
    const key = await emailProfile();
    const res = await getEvents(EMAIL, key);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ items: [] });
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: [
          { event_time: '2026-03-01T10:00:00Z', version_id: pageView(), data: { url: 'https://a', title: 'A' } },
          {
            event_time: '2026-03-01T11:00:00.250Z',
            version_id: purchase(),
            data: {
              amount: 9.5,
              paid: true,
              at: 1772359200000,
              day: '2026-03-01',
              basket: { items: [{ sku: 'x' }] },
              note: 'n',
            },
          },
        ],
      }),
    );
    const after = await getEvents(EMAIL, key);
    expect(after.status).toBe(200);
    expect(after.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(after.body)).toEqual(['items']);
    expect(after.body.items).toHaveLength(2);
    const [newest, oldest] = after.body.items;
    expect(newest).toEqual({
      event_time: expect.any(String),
      version_id: purchase(),
      correlation_id: expect.any(String),
      created_at: expect.any(String),
      data: {
        amount: 9.5,
        paid: true,
        at: 1772359200000,
        day: '2026-03-01',
        basket: { items: [{ sku: 'x' }] },
        note: 'n',
      },
    });
    expect(Date.parse(newest.event_time)).toBe(Date.parse('2026-03-01T11:00:00.250Z'));
    expect(oldest).toMatchObject({ version_id: pageView(), data: { url: 'https://a', title: 'A' } });
    expect(Date.parse(oldest.event_time)).toBe(Date.parse('2026-03-01T10:00:00Z'));
    // Data may leave fields out; an empty list adds nothing.
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: [{ event_time: '2026-03-02T00:00:00Z', version_id: pageView(), data: {} }],
      }),
    );
    expectNoContent(await postEvents(EMAIL, key, { items: [] }));
    expect((await getEvents(EMAIL, key)).body.items).toHaveLength(3);
  });

  it('sorts events by event_time, newest first (ATTR-30)', async () => {
    const key = await emailProfile();
    const times = ['2026-01-05T00:00:00Z', '2025-12-31T23:59:59Z', '2026-02-01T12:00:00Z', '2026-01-20T08:30:00Z'];
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: times.slice(0, 2).map((t) => ({ event_time: t, version_id: pageView(), data: { url: t } })),
      }),
    );
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: times.slice(2).map((t) => ({ event_time: t, version_id: pageView(), data: { url: t } })),
      }),
    );
    const res = await getEvents(EMAIL, key);
    const got = res.body.items.map((e: { event_time: string }) => Date.parse(e.event_time));
    expect(got).toEqual(times.map((t) => Date.parse(t)).sort((a, b) => b - a));
    expect(res.body.items.map((e: { data: { url: string } }) => e.data.url)).toEqual([
      '2026-02-01T12:00:00Z',
      '2026-01-20T08:30:00Z',
      '2026-01-05T00:00:00Z',
      '2025-12-31T23:59:59Z',
    ]);
  });

  it('filters by event_version_ids, comma-separated or repeated, with the same result (ATTR-31, COMP-12)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: [
          { event_time: '2026-01-01T00:00:00Z', version_id: pageView(), data: { url: 'v1' } },
          { event_time: '2026-01-02T00:00:00Z', version_id: pageView2(), data: { url: 'v2', seconds: 12 } },
          { event_time: '2026-01-03T00:00:00Z', version_id: purchase(), data: { amount: 1 } },
        ],
      }),
    );
    const urls = async (query: string) => {
      const res = await getEvents(EMAIL, key, query);
      expect(res.status, res.text).toBe(200);
      return res.body.items.map((e: { version_id: string }) => e.version_id);
    };
    expect(await urls('')).toEqual([purchase(), pageView2(), pageView()]);
    expect(await urls(`?event_version_ids=${pageView()}`)).toEqual([pageView()]);
    const comma = await urls(`?event_version_ids=${pageView()},${purchase()}`);
    const repeated = await urls(`?event_version_ids=${pageView()}&event_version_ids=${purchase()}`);
    expect(comma).toEqual([purchase(), pageView()]);
    expect(repeated).toEqual(comma);
    expect(await urls(`?event_version_ids=${encodeURIComponent(`${pageView2()},${purchase()}`)}`)).toEqual([
      purchase(),
      pageView2(),
    ]);
    // A version with no events (or of no event) selects nothing.
    expect(await urls(`?event_version_ids=${eventVersion(event('old'), 2)}`)).toEqual([]);
    expect(await urls('?event_version_ids=999999999')).toEqual([]);
  });

  it('refuses more than 100 items with 413 and stores none (ATTR-34)', async () => {
    const key = await emailProfile();
    const items = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        event_time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
        version_id: pageView(),
        data: { url: `u${i}` },
      }));
    expectProblem(await postEvents(EMAIL, key, { items: items(101) }), 413, 'AUD-1007');
    expect((await getEvents(EMAIL, key)).body.items).toEqual([]);
    expectNoContent(await postEvents(EMAIL, key, { items: items(100) }));
    expect((await getEvents(EMAIL, key)).body.items).toHaveLength(100);
  });

  it('refuses an events body over 100 KB with 413 (ATTR-34, ATTR-19)', async () => {
    const key = await emailProfile();
    const items = [{ event_time: '2026-01-01T00:00:00Z', version_id: pageView(), data: { url: 'x'.repeat(101 * KB) } }];
    expectProblem(await postEvents(EMAIL, key, { items }), 413);
    expect((await getEvents(EMAIL, key)).body.items).toEqual([]);
  });

  it('refuses a body without items with 400 AUD-1219 (ATTR-35)', async () => {
    const key = await emailProfile();
    expectProblem(await postEvents(EMAIL, key, {}), 400, 'AUD-1219');
    expectProblem(await postEvents(EMAIL, key, { events: [] }), 400);
  });

  it('refuses an unknown, hidden or deprecated event version with 400 (ATTR-36)', async () => {
    const key = await emailProfile();
    const one = (version_id: string) => ({
      items: [{ event_time: '2026-01-01T00:00:00Z', version_id, data: { url: 'x' } }],
    });
    expectProblem(await postEvents(EMAIL, key, one('999999999')), 400, 'AUD-1220');
    expectProblem(await postEvents(EMAIL, key, one(eventVersion(event('secret-event')))), 400, 'AUD-1220');
    expectProblem(await postEvents(EMAIL, key, one(eventVersion(event('read'), 1, M))), 400, 'AUD-1220');
    expectProblem(await postEvents(EMAIL, key, one(eventVersion(event('old'), 1))), 400, 'AUD-1207');
    expectNoContent(await postEvents(EMAIL, key, one(eventVersion(event('old'), 2))));
  });

  it('refuses data that does not fit the field types, or an unknown field, with 400 and stores none of the batch (ATTR-36)', async () => {
    const key = await emailProfile();
    const good = { event_time: '2026-01-01T00:00:00Z', version_id: purchase(), data: { amount: 1 } };
    const bad: [Record<string, unknown>, string][] = [
      [{ amount: '9.5' }, 'AUD-1209'],
      [{ paid: 'yes' }, 'AUD-1209'],
      [{ at: 1.5 }, 'AUD-1209'],
      [{ day: 'tomorrow' }, 'AUD-1209'],
      [{ basket: [1, 2] }, 'AUD-1209'],
      [{ note: 5 }, 'AUD-1209'],
      [{ colour: 'red' }, 'AUD-1402'],
    ];
    for (const [data, code] of bad) {
      expectProblem(
        await postEvents(EMAIL, key, {
          items: [good, { event_time: '2026-01-02T00:00:00Z', version_id: purchase(), data }],
        }),
        400,
        code,
      );
    }
    // A field of another version of the same event is unknown to this version.
    expectProblem(
      await postEvents(EMAIL, key, {
        items: [{ event_time: '2026-01-02T00:00:00Z', version_id: pageView(), data: { seconds: 3 } }],
      }),
      400,
      'AUD-1402',
    );
    expectProblem(
      await postEvents(EMAIL, key, {
        items: [{ event_time: '2026-01-02T00:00:00Z', version_id: pageView2(), data: { url: 'x', seconds: '3' } }],
      }),
      400,
      'AUD-1209',
    );
    // Malformed items.
    expectProblem(
      await postEvents(EMAIL, key, { items: [{ event_time: 'yesterday', version_id: purchase(), data: {} }] }),
      400,
    );
    expectProblem(
      await postEvents(EMAIL, key, { items: [{ event_time: '2026-01-02T00:00:00Z', version_id: purchase() }] }),
      400,
    );
    expectProblem(
      await postEvents(EMAIL, key, {
        items: [{ event_time: '2026-01-02T00:00:00Z', version_id: purchase(), data: [1] }],
      }),
      400,
    );
    expect((await getEvents(EMAIL, key)).body.items).toEqual([]);
  });

  it('answers 404 for events of an unknown profile, keyspace or section', async () => {
    const key = await emailProfile();
    const body = { items: [{ event_time: '2026-01-01T00:00:00Z', version_id: pageView(), data: {} }] };
    expectProblem(await postEvents(EMAIL, fresh('nobody'), body), 404, 'AUD-1201');
    expectProblem(await postEvents(`${NS}.keyspaces.nope`, key, body), 404, 'AUD-1101');
    expectProblem(await postEvents(EMAIL, key, body, `${NS}.sections.user-created.nope`), 404, 'AUD-1102');
  });

  it('truncates an answer above 300 KB, keeping the newest events (ATTR-32)', async () => {
    const LIMIT = 300 * KB;
    const BATCHES = 4;
    const PER_BATCH = 100;
    // Size of one event in the answer for a url of `n` characters, measured on a probe profile.
    const probe = await emailProfile('probe');
    const stamp = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
    expectNoContent(
      await postEvents(EMAIL, probe, { items: [{ event_time: stamp(0), version_id: pageView(), data: { url: '' } }] }),
    );
    const overhead = Buffer.byteLength(JSON.stringify((await getEvents(EMAIL, probe)).body.items[0]));
    // Choose a url length for which the largest answer that fits ({"items":[…],"truncated":true}) lands
    // within a few bytes of the limit, so that any miscount of the answer's size shows.
    const frame = Buffer.byteLength('{"items":[],"truncated":true}');
    // (A batch of 100 events with urls of up to 920 characters stays under the 100 KB body limit.)
    const urlLength =
      Array.from({ length: 320 }, (_, i) => 600 + i).find((n) => {
        const item = overhead + n + 1; // with its comma
        return item - ((LIMIT - frame + 1) % item) < 32;
      }) ?? 900;

    const key = await emailProfile('big');
    for (let b = 0; b < BATCHES; b++) {
      const items = Array.from({ length: PER_BATCH }, (_, i) => {
        const n = b * PER_BATCH + i;
        return { event_time: stamp(n), version_id: pageView(), data: { url: String(n).padStart(urlLength, '0') } };
      });
      expectNoContent(await postEvents(EMAIL, key, { items }));
    }
    const res = await getEvents(EMAIL, key);
    expect(res.status, res.text.slice(0, 200)).toBe(200);
    expect(Buffer.byteLength(res.text)).toBeLessThanOrEqual(LIMIT);
    expect(res.body.truncated).toBe(true);
    const items: { event_time: string; data: { url: string } }[] = res.body.items;
    const total = BATCHES * PER_BATCH;
    expect(items.length).toBeLessThan(total);
    // As many as fit: one more would not.
    expect(Buffer.byteLength(res.text) + overhead + urlLength + 1).toBeGreaterThan(LIMIT);
    // The newest are kept, newest first, without gaps.
    expect(items.map((e) => Number(e.data.url))).toEqual(Array.from({ length: items.length }, (_, i) => total - 1 - i));
    expect(Date.parse(items[0].event_time)).toBe(Date.parse(stamp(total - 1)));

    // A filter that selects fewer events answers them all, untruncated.
    const few = await getEvents(EMAIL, key, `?event_version_ids=${pageView2()}`);
    expect(few.body).toEqual({ items: [] });
    // An answer under the limit has no truncated flag.
    const small = await getEvents(EMAIL, probe);
    expect(small.body).not.toHaveProperty('truncated');
  });
});

describe('merge-patch and JSON bodies (COMP-04)', () => {
  for (const type of [
    'application/merge-patch+json',
    'application/json',
    'application/merge-patch+json; charset=utf-8',
  ]) {
    it(`accepts ${type} on attribute and tag PATCH (COMP-04)`, async () => {
      const key = await emailProfile();
      const headers = { 'content-type': type };
      expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'One' }, S, headers));
      expectNoContent(await patchV2(EMAIL, key, { [LASTNAME]: 'Two' }, '', S, headers));
      expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true }, S, headers));
      expect(await attributes(EMAIL, key)).toEqual({
        [version(EMAIL_ATTR)]: key,
        [version(FIRSTNAME)]: 'One',
        [version(LASTNAME)]: 'Two',
      });
      expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true });
    });
  }

  it('refuses a PATCH body of another media type with 415', async () => {
    const key = await emailProfile();
    const res = await server.request('PATCH', `${profile(EMAIL, key)}/tags`, {
      token,
      raw: JSON.stringify({ [tag('vip')]: true }),
      headers: { 'content-type': 'text/plain' },
    });
    expectProblem(res, 415);
    expect(await tags(EMAIL, key)).toEqual({});
  });
});

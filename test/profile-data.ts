import { afterAll, beforeAll, expect } from 'vitest';
import { TestServer, type Response } from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';

/**
 * What the tests of profile attributes, tags and events share (src/profiles/attributes-*.test.ts,
 * tags, events, attribute-*): an account with their definitions, and their requests through real
 * HTTP against a real database (CHECKLIST "Attributes, tags and events", ATTR-01..36, and COMP-04,
 * COMP-08, COMP-12). Each test file calls useProfileData() for its own server and account.
 */

export let server: TestServer;

export const NS = 'com.vendor1';
export const S = `${NS}.sections.user-created.store`;
export const M = `${NS}.sections.user-created.magazine`;
export const EMAIL = `${NS}.keyspaces.email`;
export const CRM = `${NS}.keyspaces.crm-id`;
export const WEB = `${NS}.keyspaces.web`;
export const attr = (slug: string) => `${NS}.attributes.user-created.${slug}`;
export const tag = (slug: string) => `${NS}.tags.user-created.${slug}`;
export const event = (slug: string) => `${NS}.events.user-created.${slug}`;
export const FIRSTNAME = `${NS}.attributes.firstname`;
export const LASTNAME = `${NS}.attributes.lastname`;
export const EMAIL_ATTR = `${NS}.attributes.email`;
export const CRMID_ATTR = `${NS}.attributes.crmid`;
export const KB = 1024;
export const DEPRECATED = '2025-01-01T00:00:00Z';

export const text = (name: string) => ({ name, type: 'Text' });

export const MANIFEST: Manifest = {
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
export const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

export let token: string;
/** The account of `token`. */
export let accountId: string;
/** Section → attribute discriminator → version ids (hidden ones included). */
export let attributeVersions: Record<string, Record<string, string[]>>;
/** Section → event discriminator → version ids (hidden ones included). */
export let eventVersions: Record<string, Record<string, string[]>>;

/** Version `n` (1-based) of an attribute of a section. */
export function version(discriminator: string, n = 1, section = S): string {
  const id = attributeVersions[section][discriminator]?.[n - 1];
  if (id === undefined) throw new Error(`no version ${n} of ${discriminator} in ${section}`);
  return id;
}

export function eventVersion(discriminator: string, n = 1, section = S): string {
  const id = eventVersions[section][discriminator]?.[n - 1];
  if (id === undefined) throw new Error(`no version ${n} of ${discriminator} in ${section}`);
  return id;
}

let counter = 0;
/** A number nobody used yet, for keys of other keyspaces. */
export const nextNumber = (): number => ++counter;
/** A profile key nobody used yet. */
export function fresh(prefix = 'p'): string {
  return `${prefix}-${++counter}@example.com`;
}

export const profile = (ks: string, key: string, section = S) =>
  `/audience/keyspaces/${ks}/profiles/${encodeURIComponent(key)}/sections/${section}`;
export const v2 = (ks: string, key: string, section = S) => `/v2${profile(ks, key, section)}`;

/** COMP-08: writes that return nothing answer 204 with an empty body. */
export function expectNoContent(res: Response): void {
  expect(res.status, res.text).toBe(204);
  expect(res.text).toBe('');
}

export async function create(key: string, ks = EMAIL, section = S): Promise<void> {
  const res = await server.request('POST', `/audience/keyspaces/${ks}/sections/${section}/profiles`, {
    token,
    body: { profile_key: key },
  });
  expect(res.status, res.text).toBe(201);
}

export async function attributes(ks: string, key: string, section = S): Promise<Record<string, unknown>> {
  const res = await server.request('GET', `${profile(ks, key, section)}/attributes`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

export async function tags(ks: string, key: string, section = S): Promise<Record<string, boolean>> {
  const res = await server.request('GET', `${profile(ks, key, section)}/tags`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

export const patchV1 = (ks: string, key: string, body: unknown, section = S, headers?: Record<string, string>) =>
  server.request('PATCH', `${profile(ks, key, section)}/attributes`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
export const patchV2 = (
  ks: string,
  key: string,
  body: unknown,
  query = '',
  section = S,
  headers?: Record<string, string>,
) =>
  server.request('PATCH', `${v2(ks, key, section)}/attributes${query}`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
export const patchTags = (ks: string, key: string, body: unknown, section = S, headers?: Record<string, string>) =>
  server.request('PATCH', `${profile(ks, key, section)}/tags`, {
    token,
    body,
    headers: headers ?? { 'content-type': 'application/merge-patch+json' },
  });
export const postEvents = (ks: string, key: string, body: unknown, section = S) =>
  server.request('POST', `${profile(ks, key, section)}/events`, { token, body });
export const getEvents = (ks: string, key: string, query = '', section = S) =>
  server.request('GET', `${profile(ks, key, section)}/events${query}`, { token });

/** A fresh email profile created in the store section. */
export async function emailProfile(prefix = 'p'): Promise<string> {
  const key = fresh(prefix);
  await create(key);
  return key;
}

/** Starts this file's server and account (the hooks of the test file that calls it). */
export function useProfileData(): void {
  beforeAll(async () => {
    server = await TestServer.start();
  });
  afterAll(async () => server?.close());
  beforeAll(async () => {
    const login = await server.login(MANIFEST, NO_LIMITS);
    token = login.token;
    accountId = login.accountId;
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
}

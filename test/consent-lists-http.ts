import type pg from 'pg';
import { expect } from 'vitest';
import { serverWithPool, TestServer, type Response } from './app.ts';
import { type Account, CLUB, EMAIL, MOBILE, MOBILE_ATTR, NO_LIMITS, NS, S, SMS_CH, topic } from './consents.ts';
import type { Manifest } from '../src/definitions/schemas.ts';

// What the tests of the legacy consent routes (src/consents/consent-lists.test.ts,
// consents-by-address.test.ts, consent-list-evaluations.test.ts) share: their server, a
// connection of its own to its database (for counting rows and the one set-up the API cannot
// make, confirmed-opt-in), the lists of their manifest, and their requests.

export let server: TestServer;
export let db: pg.Pool;

/** Starts the test file's server and connection, before its tests. */
export function consentListsServer(): void {
  serverWithPool({}, (s, d) => {
    server = s;
    db = d;
  });
}

export const ROOT = `${NS}.topic-folders.root`;
export const NEWS_LIST = `${NS}.topic-folders.user-created.news`;
export const WEEKLY_LIST = `${NS}.topic-folders.user-created.weekly`;
export const DAILY = topic('daily-news');
export const PRESS = topic('press');

/** A section with nested folders, topics in and out of them, one for SMS only; and a second section. */
export const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      ecommerce_connected: false,
      topic_folders: [{ name: 'News' }, { name: 'Weekly', parent: NEWS_LIST }],
      topics: [
        { name: 'Daily news', folder: NEWS_LIST },
        { name: 'Press', folder: NEWS_LIST },
        { name: 'Weekly news', folder: WEEKLY_LIST },
        { name: 'Offers' },
        { name: 'SMS offers', channel: SMS_CH },
      ],
    },
    {
      name: 'Club',
      ecommerce_connected: false,
      topic_folders: [{ name: 'Club folder' }],
      topics: [{ name: 'Club news' }],
    },
  ],
};

export async function account(
  manifest: Manifest = MANIFEST,
  limits: Record<string, number | null> = NO_LIMITS,
): Promise<Account> {
  const { accountId, token } = await server.login(manifest, limits);
  return { accountId, token };
}

/** A token of a key of the account restricted to the Club section. */
export async function clubOnlyToken(a: Account): Promise<string> {
  return server.token(await server.createKey(a.accountId, { section_discriminators: [CLUB] }));
}

export const enc = encodeURIComponent;
export const addressPath = (channel: string, address: string) =>
  `/audience/channels/${channel}/addresses/${address}/consents`;
export const evaluationsPath = (channel: string, address: string, list: string, section = S) =>
  `${addressPath(channel, address)}/sections/${section}/consent-lists/${list}/evaluations`;
export const subscriptionsPath = (ks: string, key: string, section = S) =>
  `/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/subscriptions`;
export const v2Path = (ks: string, key: string, section = S) =>
  `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/consents`;

export function consentAt(
  a: Account,
  channel: string,
  address: string,
  body: Record<string, unknown>,
  token = a.token,
): Promise<Response> {
  return server.request('POST', addressPath(channel, address), {
    token,
    body,
    headers: { accept: 'application/json' },
  });
}

export async function evaluated(a: Account, channel: string, address: string, list: string): Promise<string[]> {
  const r = await server.request('GET', evaluationsPath(channel, address, list), { token: a.token });
  expect(r.status, r.text).toBe(200);
  return r.body.items.map((i: { topic_discriminator: string }) => i.topic_discriminator);
}

export function subscribe(
  a: Account,
  ks: string,
  key: string,
  body: Record<string, unknown>,
  section = S,
  token = a.token,
): Promise<Response> {
  return server.request('POST', subscriptionsPath(ks, key, section), { token, body });
}

export function postV2(
  a: Account,
  ks: string,
  key: string,
  topicDiscriminator: string,
  channel: string,
  type: string,
): Promise<Response> {
  return server.request('POST', v2Path(ks, key), {
    token: a.token,
    body: {
      topic_discriminator: topicDiscriminator,
      channel_discriminator: channel,
      type,
      reason: 'Asked on the phone',
    },
  });
}

/** The consents a profile shows through the v2 route in a section, as `topic channel` → type. */
export async function v2Types(a: Account, ks: string, key: string, section = S): Promise<Record<string, string>> {
  const r = await server.request('GET', v2Path(ks, key, section), { token: a.token });
  expect(r.status, r.text).toBe(200);
  return Object.fromEntries(
    r.body.items.map((c: any) => [`${c.topic_discriminator} ${c.channel_discriminator}`, c.type]),
  );
}

export async function createProfile(a: Account, ks: string, key: string, section = S): Promise<void> {
  const r = await server.request('POST', `/audience/keyspaces/${ks}/sections/${section}/profiles`, {
    token: a.token,
    body: { profile_key: key },
  });
  expect(r.status, r.text).toBe(201);
}

export async function setAttributes(
  a: Account,
  ks: string,
  key: string,
  values: Record<string, unknown>,
  section = S,
): Promise<void> {
  const r = await server.request(
    'PATCH',
    `/v2/audience/keyspaces/${ks}/profiles/${enc(key)}/sections/${section}/attributes`,
    {
      token: a.token,
      body: values,
      headers: { 'content-type': 'application/merge-patch+json' },
    },
  );
  expect(r.status, r.text).toBe(204);
}

export async function rowCounts(a: Account): Promise<{ profiles: number; consents: number }> {
  const { rows } = await db.query<{ profiles: number; consents: number }>(
    `select (select count(*)::int from profiles where account_id = $1::bigint) as profiles,
            (select count(*)::int from consents where account_id = $1::bigint) as consents`,
    [a.accountId],
  );
  return rows[0];
}

/** Gives a profile known by its email a mobile number in the section, as its attribute and as a key of the mobile keyspace. */
export async function withMobile(a: Account, email: string, mobile: string): Promise<void> {
  await setAttributes(a, EMAIL, email, { [MOBILE_ATTR]: mobile });
  const merged = await server.request('PUT', '/audience/profiles/merges', {
    token: a.token,
    body: {
      profiles: [
        { keyspace_discriminator: EMAIL, profile_key: email },
        { keyspace_discriminator: MOBILE, profile_key: mobile },
      ],
    },
  });
  expect(merged.status, merged.text).toBe(204);
}

export function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
  expect(r.text).toBe('');
}

import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect } from 'vitest';
import { SHOP, TestServer, testDatabase, type Response } from './app.ts';
import type { Manifest } from '../src/definitions/schemas.ts';

// What the tests of profiles' identity and lifecycle share (src/profiles/create, export-key, delete,
// lock, merge, unmerge, switch-identifier and key-operations .test.ts): an account, its requests
// through real HTTP and reads of the real database (CHECKLIST PROF-01..16, MRG-01..34, with
// COMP-09/10/13/15/16 and LIM-07). Each test file calls useProfileLifecycle() for its own server.

export const NS = 'com.vendor1';
export const EMAIL = `${NS}.keyspaces.email`;
export const MOBILE = `${NS}.keyspaces.mobile`;
export const CRM = `${NS}.keyspaces.crm-id`;
export const WEB = `${NS}.keyspaces.web`;
export const EXPORT = `${NS}.keyspaces.export`;
export const TX = `${NS}.keyspaces.transactional-email`;
export const SHOP_S = `${NS}.sections.user-created.shop`;
export const CLUB_S = `${NS}.sections.user-created.club`;
export const A_EMAIL = `${NS}.attributes.email`;
export const A_MOBILE = `${NS}.attributes.mobile`;
export const A_CRM = `${NS}.attributes.crmid`;
export const A_FIRST = `${NS}.attributes.firstname`;
export const A_LAST = `${NS}.attributes.lastname`;
export const VIP = `${NS}.tags.user-created.vip`;
export const PAGE_VIEW = `${NS}.events.page-view`;

/** SHOP plus a second section, for rules about "other sections". */
export const TWO: Manifest = { ...SHOP, sections: [...SHOP.sections!, { name: 'Club' }] };
/** Limits of the general account: nothing throttles the tests. */
export const UNLIMITED = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

export let server: TestServer;
export let token: string;
/** The account of `token`. */
export let accountId: string;
export let db: pg.Client;

// ---- helpers ----

let counter = 0;
/** A key no other test uses. */
export const uid = (label = 'k') => `${label}-${++counter}-${crypto.randomBytes(3).toString('hex')}`;
export const mail = (label = 'u') => `${uid(label)}@example.com`;

export const enc = encodeURIComponent;
export const profilePath = (ks: string, pk: string) => `/audience/keyspaces/${ks}/profiles/${enc(pk)}`;
export const sectionPath = (ks: string, pk: string, s: string) => `${profilePath(ks, pk)}/sections/${s}`;
export const id = (keyspace_discriminator: string, profile_key: string) => ({ keyspace_discriminator, profile_key });

export function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
  expect(r.text).toBe('');
}

export const create = (ks: string, key: unknown, s = SHOP_S, t = token) =>
  server.request('POST', `/audience/keyspaces/${ks}/sections/${s}/profiles`, { token: t, body: { profile_key: key } });
export const merge = (
  a: { keyspace_discriminator: string; profile_key: string },
  b: { keyspace_discriminator: string; profile_key: string },
  t = token,
) => server.request('PUT', '/audience/profiles/merges', { token: t, body: { profiles: [a, b] } });
export const unmerge = (ks: string, pk: string, t = token) =>
  server.request('DELETE', `/audience/profiles/merges/keyspaces/${ks}/profiles/${enc(pk)}`, { token: t });
export const lock = (ks: string, pk: string, t = token) =>
  server.request('PUT', `${profilePath(ks, pk)}/locks`, { token: t });
export const remove = (ks: string, pk: string, t = token) =>
  server.request('DELETE', profilePath(ks, pk), { token: t });
export const switchId = (ks: string, pk: string, s: string, body: unknown, t = token) =>
  server.request('PUT', sectionPath(ks, pk, s), { token: t, body });
export const patchV2 = (ks: string, pk: string, values: Record<string, unknown>, s = SHOP_S, t = token) =>
  server.request('PATCH', `/v2${sectionPath(ks, pk, s)}/attributes`, {
    token: t,
    body: values,
    headers: { 'content-type': 'application/merge-patch+json' },
  });
export const patchTags = (ks: string, pk: string, values: Record<string, boolean>, s = SHOP_S, t = token) =>
  server.request('PATCH', `${sectionPath(ks, pk, s)}/tags`, {
    token: t,
    body: values,
    headers: { 'content-type': 'application/merge-patch+json' },
  });

/** Attribute discriminator → current version id, and version id → discriminator, of a section. */
export const definitionCache = new Map<string, { current: Map<string, string>; byVersion: Map<string, string> }>();
export async function definitionsOf(s: string, t = token) {
  const cacheKey = `${t}|${s}`;
  let defs = definitionCache.get(cacheKey);
  if (!defs) {
    const r = await server.request('GET', `/audience/sections/${s}/attributes`, { token: t });
    expect(r.status, r.text).toBe(200);
    defs = { current: new Map(), byVersion: new Map() };
    for (const a of r.body.items as {
      discriminator: string;
      versions: { id: string; deprecated_at: string | null }[];
    }[]) {
      for (const v of a.versions) defs.byVersion.set(v.id, a.discriminator);
      const current = a.versions.filter((v) => v.deprecated_at === null).at(-1);
      if (current) defs.current.set(a.discriminator, current.id);
    }
    definitionCache.set(cacheKey, defs);
  }
  return defs;
}

/** PATCH version 1 (never changes keys; creates a missing profile), by discriminator. */
export async function patchV1(
  ks: string,
  pk: string,
  values: Record<string, unknown>,
  s = SHOP_S,
  t = token,
): Promise<Response> {
  const { current } = await definitionsOf(s, t);
  const body = Object.fromEntries(Object.entries(values).map(([d, v]) => [current.get(d)!, v]));
  return server.request('PATCH', `${sectionPath(ks, pk, s)}/attributes`, {
    token: t,
    body,
    headers: { 'content-type': 'application/merge-patch+json' },
  });
}

/** GET a profile's attributes, tags or events in a section, keyed by discriminator. */
export function getSection(ks: string, pk: string, what = 'attributes', s = SHOP_S, t = token): Promise<Response> {
  return server.request('GET', `${sectionPath(ks, pk, s)}/${what}`, { token: t });
}

/** GET attributes, keyed by discriminator; the response for its status. */
export async function readAttributes(
  ks: string,
  pk: string,
  s = SHOP_S,
  t = token,
): Promise<{ r: Response; values: Record<string, unknown> }> {
  const r = await getSection(ks, pk, 'attributes', s, t);
  if (r.status !== 200) return { r, values: {} };
  const { byVersion } = await definitionsOf(s, t);
  return {
    r,
    values: Object.fromEntries(
      Object.entries(r.body as Record<string, unknown>).map(([v, value]) => [byVersion.get(v) ?? v, value]),
    ),
  };
}

/** Attributes of a profile that must be found. */
export async function attrs(ks: string, pk: string, s = SHOP_S, t = token): Promise<Record<string, unknown>> {
  const { r, values } = await readAttributes(ks, pk, s, t);
  expect(r.status, r.text).toBe(200);
  return values;
}

export async function tags(ks: string, pk: string, s = SHOP_S, t = token): Promise<Record<string, boolean>> {
  const r = await getSection(ks, pk, 'tags', s, t);
  expect(r.status, r.text).toBe(200);
  return r.body;
}

let pageViewVersion: string | undefined;
export async function addPageView(ks: string, pk: string, title: string, t = token): Promise<Response> {
  pageViewVersion ??= (
    await server.request('GET', `/audience/sections/${SHOP_S}/events`, { token: t })
  ).body.items.find((e: any) => e.discriminator === PAGE_VIEW).versions[0].id;
  return server.request('POST', `${sectionPath(ks, pk, SHOP_S)}/events`, {
    token: t,
    body: { items: [{ event_time: '2026-01-02T03:04:05Z', version_id: pageViewVersion, data: { title } }] },
  });
}

export async function events(ks: string, pk: string, t = token): Promise<any[]> {
  const r = await getSection(ks, pk, 'events', SHOP_S, t);
  expect(r.status, r.text).toBe(200);
  return r.body.items;
}

/** The export key of the profile owning an identifier, read from the database. */
export async function exportKeyOf(ks: string, key: string): Promise<string> {
  const { rows } = await db.query<{ export_key: string }>(
    `select p.export_key from profile_identifiers i join profiles p using (account_id, profile_id)
     join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
     where k.discriminator = $1 and i.profile_key = $2`,
    [ks, key],
  );
  expect(rows).toHaveLength(1);
  return rows[0].export_key;
}

/** The identifier rows of the profile with an export key, with their keyspace's kind. */
export async function identifierRows(exportKey: string): Promise<{ kind: string; profile_key: string }[]> {
  const { rows } = await db.query<{ kind: string; profile_key: string }>(
    `select k.kind, i.profile_key from profile_identifiers i join profiles p using (account_id, profile_id)
     join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
     where p.export_key = $1 order by k.kind`,
    [exportKey],
  );
  return rows;
}

/**
 * Searches every column of every table of the public schema for `needle` (case-insensitive),
 * and answers the places it was found as `table.column`.
 */
export async function findPlaintext(needle: string): Promise<string[]> {
  const { rows: columns } = await db.query<{ table_name: string; column_name: string }>(
    `select c.table_name, c.column_name from information_schema.columns c
     join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
     where c.table_schema = 'public' and t.table_type = 'BASE TABLE'
     order by c.table_name, c.ordinal_position`,
  );
  expect(new Set(columns.map((c) => c.table_name)).size).toBeGreaterThan(10);
  // One statement per table, a count per column: on a Citus cluster each statement reads every shard.
  const found: string[] = [];
  for (const [table, ofTable] of Map.groupBy(columns, (c) => c.table_name)) {
    const counts = ofTable.map(
      (c, i) => `count(*) filter (where strpos(lower("${c.column_name}"::text), lower($1)) > 0)::int as n${i}`,
    );
    const {
      rows: [row],
    } = await db.query<Record<string, number>>(`select ${counts.join(', ')} from public."${table}"`, [needle]);
    ofTable.forEach((c, i) => {
      if (row[`n${i}`] > 0) found.push(`${table}.${c.column_name}`);
    });
  }
  return found;
}

/** Starts this file's server and account (the hooks of the test file that calls it). */
export function useProfileLifecycle(): void {
  beforeAll(async () => {
    // The test files of a run share this module (vitest.config.ts: isolate false): a version id is of one file's database.
    pageViewVersion = undefined;
    server = await TestServer.start();
    ({ token, accountId } = await server.login(TWO, UNLIMITED));
    db = new pg.Client({ connectionString: await testDatabase() });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await server?.close();
  });
}

// Profiles through real HTTP and the real database: identity and lifecycle (CHECKLIST PROF-01..16),
// merge, unmerge, lock and switch (MRG-01..34), with COMP-09/10/13/15/16 and LIM-07.
import crypto from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer, testDatabase, type Response, expectProblem } from '../../test/app.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { migrate } from '../store/migrate.ts';

const NS = 'com.vendor1';
const EMAIL = `${NS}.keyspaces.email`;
const MOBILE = `${NS}.keyspaces.mobile`;
const CRM = `${NS}.keyspaces.crm-id`;
const WEB = `${NS}.keyspaces.web`;
const EXPORT = `${NS}.keyspaces.export`;
const TX = `${NS}.keyspaces.transactional-email`;
const SHOP_S = `${NS}.sections.user-created.shop`;
const CLUB_S = `${NS}.sections.user-created.club`;
const A_EMAIL = `${NS}.attributes.email`;
const A_MOBILE = `${NS}.attributes.mobile`;
const A_CRM = `${NS}.attributes.crmid`;
const A_FIRST = `${NS}.attributes.firstname`;
const A_LAST = `${NS}.attributes.lastname`;
const VIP = `${NS}.tags.user-created.vip`;
const PAGE_VIEW = `${NS}.events.page-view`;

/** SHOP plus a second section, for rules about "other sections". */
const TWO: Manifest = { ...SHOP, sections: [...SHOP.sections!, { name: 'Club' }] };
/** Limits of the general account: nothing throttles the tests. */
const UNLIMITED = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

let server: TestServer;
let token: string;
let db: pg.Client;

beforeAll(async () => {
  server = await TestServer.start();
  token = (await server.login(TWO, UNLIMITED)).token;
  db = new pg.Client({ connectionString: await testDatabase() });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await server?.close();
});

// ---- helpers ----

let counter = 0;
/** A key no other test uses. */
const uid = (label = 'k') => `${label}-${++counter}-${crypto.randomBytes(3).toString('hex')}`;
const mail = (label = 'u') => `${uid(label)}@example.com`;

const enc = encodeURIComponent;
const profilePath = (ks: string, pk: string) => `/audience/keyspaces/${ks}/profiles/${enc(pk)}`;
const sectionPath = (ks: string, pk: string, s: string) => `${profilePath(ks, pk)}/sections/${s}`;
const id = (keyspace_discriminator: string, profile_key: string) => ({ keyspace_discriminator, profile_key });

function expectNoContent(r: Response): void {
  expect(r.status, r.text).toBe(204);
  expect(r.text).toBe('');
}

const create = (ks: string, key: unknown, s = SHOP_S, t = token) =>
  server.request('POST', `/audience/keyspaces/${ks}/sections/${s}/profiles`, { token: t, body: { profile_key: key } });
const merge = (
  a: { keyspace_discriminator: string; profile_key: string },
  b: { keyspace_discriminator: string; profile_key: string },
  t = token,
) => server.request('PUT', '/audience/profiles/merges', { token: t, body: { profiles: [a, b] } });
const unmerge = (ks: string, pk: string, t = token) =>
  server.request('DELETE', `/audience/profiles/merges/keyspaces/${ks}/profiles/${enc(pk)}`, { token: t });
const lock = (ks: string, pk: string, t = token) => server.request('PUT', `${profilePath(ks, pk)}/locks`, { token: t });
const remove = (ks: string, pk: string, t = token) => server.request('DELETE', profilePath(ks, pk), { token: t });
const switchId = (ks: string, pk: string, s: string, body: unknown, t = token) =>
  server.request('PUT', sectionPath(ks, pk, s), { token: t, body });
const patchV2 = (ks: string, pk: string, values: Record<string, unknown>, s = SHOP_S, t = token) =>
  server.request('PATCH', `/v2${sectionPath(ks, pk, s)}/attributes`, {
    token: t,
    body: values,
    headers: { 'content-type': 'application/merge-patch+json' },
  });
const patchTags = (ks: string, pk: string, values: Record<string, boolean>, s = SHOP_S, t = token) =>
  server.request('PATCH', `${sectionPath(ks, pk, s)}/tags`, {
    token: t,
    body: values,
    headers: { 'content-type': 'application/merge-patch+json' },
  });

/** Attribute discriminator → current version id, and version id → discriminator, of a section. */
const definitionCache = new Map<string, { current: Map<string, string>; byVersion: Map<string, string> }>();
async function definitionsOf(s: string, t = token) {
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
async function patchV1(
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
function getSection(ks: string, pk: string, what = 'attributes', s = SHOP_S, t = token): Promise<Response> {
  return server.request('GET', `${sectionPath(ks, pk, s)}/${what}`, { token: t });
}

/** GET attributes, keyed by discriminator; the response for its status. */
async function readAttributes(
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
async function attrs(ks: string, pk: string, s = SHOP_S, t = token): Promise<Record<string, unknown>> {
  const { r, values } = await readAttributes(ks, pk, s, t);
  expect(r.status, r.text).toBe(200);
  return values;
}

async function tags(ks: string, pk: string, s = SHOP_S, t = token): Promise<Record<string, boolean>> {
  const r = await getSection(ks, pk, 'tags', s, t);
  expect(r.status, r.text).toBe(200);
  return r.body;
}

let pageViewVersion: string | undefined;
async function addPageView(ks: string, pk: string, title: string, t = token): Promise<Response> {
  pageViewVersion ??= (
    await server.request('GET', `/audience/sections/${SHOP_S}/events`, { token: t })
  ).body.items.find((e: any) => e.discriminator === PAGE_VIEW).versions[0].id;
  return server.request('POST', `${sectionPath(ks, pk, SHOP_S)}/events`, {
    token: t,
    body: { items: [{ event_time: '2026-01-02T03:04:05Z', version_id: pageViewVersion, data: { title } }] },
  });
}

async function events(ks: string, pk: string, t = token): Promise<any[]> {
  const r = await getSection(ks, pk, 'events', SHOP_S, t);
  expect(r.status, r.text).toBe(200);
  return r.body.items;
}

/** The export key of the profile owning an identifier, read from the database. */
async function exportKeyOf(ks: string, key: string): Promise<string> {
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
async function identifierRows(exportKey: string): Promise<{ kind: string; profile_key: string }[]> {
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
async function findPlaintext(needle: string): Promise<string[]> {
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

// ---- PROF: identity and lifecycle ----

describe('profiles: creation', () => {
  it('PROF-01 POST …/profiles → 201 {keyspace_discriminator, profile_key} in every keyspace that creates', async () => {
    for (const [ks, key, expected] of [
      [EMAIL, mail('p01'), undefined],
      [MOBILE, '+47 412 30 001', '+4741230001'],
      [CRM, ` ${uid('crm')} `, undefined],
      [WEB, uid('cookie'), undefined],
    ] as const) {
      const r = await create(ks, key);
      expect(r.status, r.text).toBe(201);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body).toEqual({ keyspace_discriminator: ks, profile_key: expected ?? key.trim() });
      expect((await readAttributes(ks, r.body.profile_key)).r.status).toBe(200);
    }
  });

  it('PROF-02 creation sets the mapped attribute in that section only', async () => {
    const email = mail('p02');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});

    expect((await create(MOBILE, '+4741230002', CLUB_S)).status).toBe(201);
    expect(await attrs(MOBILE, '+4741230002', CLUB_S)).toEqual({ [A_MOBILE]: '+4741230002' });
    expect(await attrs(MOBILE, '+4741230002', SHOP_S)).toEqual({});

    const crm = uid('crm');
    expect((await create(CRM, crm)).status).toBe(201);
    expect(await attrs(CRM, crm)).toEqual({ [A_CRM]: crm });

    // The web keyspace maps to no attribute.
    const cookie = uid('cookie');
    expect((await create(WEB, cookie)).status).toBe(201);
    expect(await attrs(WEB, cookie)).toEqual({});
  });

  it('PROF-03 creating an existing key → 409, also from another section', async () => {
    const email = mail('p03');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectProblem(await create(EMAIL, email), 409, 'AUD-1204');
    expectProblem(await create(EMAIL, email, CLUB_S), 409, 'AUD-1204');
    // The refused creation changed nothing.
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});
  });

  it('PROF-04 an unknown keyspace or section → 404', async () => {
    expectProblem(await create(`${NS}.keyspaces.nope`, mail()), 404, 'AUD-1101');
    expectProblem(await create(EMAIL, mail(), `${NS}.sections.user-created.nope`), 404, 'AUD-1102');
  });

  it('PROF-05 a missing or non-string profile_key → 400', async () => {
    const path = `/audience/keyspaces/${EMAIL}/sections/${SHOP_S}/profiles`;
    expectProblem(await server.request('POST', path, { token, body: {} }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: 42 } }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: null } }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: ['a@example.com'] } }), 400);
    expectProblem(
      await server.request('POST', path, { token, headers: { 'content-type': 'application/json' }, raw: '' }),
      400,
    );
    expectProblem(await create(WEB, ''), 400, 'AUD-1205');
  });

  it('PROF-06 an invalid email address or mobile number → 400 (invalid profile_key)', async () => {
    for (const bad of ['not-an-email', 'a@b', 'two@@example.com', 'sp ace@example.com', '@example.com']) {
      expectProblem(await create(EMAIL, bad), 400, 'AUD-1205');
    }
    for (const bad of ['12345', '41234567', '+47 123', '+999 1234567', 'phone']) {
      expectProblem(await create(MOBILE, bad), 400, 'AUD-1205');
    }
    // A path key is validated the same way.
    expectProblem(await getSection(EMAIL, 'not-an-email'), 400, 'AUD-1205');
  });

  it('PROF-07 spellings of one email address or mobile number reach one profile', async () => {
    const local = uid('p07');
    const r = await create(EMAIL, `  ${local.toUpperCase()}@Example.COM `);
    expect(r.status, r.text).toBe(201);
    expect(r.body.profile_key).toBe(`${local}@example.com`);
    expectProblem(await create(EMAIL, `${local}@example.com`), 409, 'AUD-1204');
    expect(await attrs(EMAIL, `${local.toUpperCase()}@EXAMPLE.com`)).toEqual({ [A_EMAIL]: `${local}@example.com` });

    const m = await create(MOBILE, '+47 412 34 567');
    expect(m.status, m.text).toBe(201);
    expect(m.body.profile_key).toBe('+4741234567');
    for (const spelling of ['004741234567', '+4741234567', '+47-412-34-567', ' +47 (412) 34567 ']) {
      expectProblem(await create(MOBILE, spelling), 409, 'AUD-1204');
      expect(await attrs(MOBILE, spelling)).toEqual({ [A_MOBILE]: '+4741234567' });
    }
  });

  it('COMP-09 percent-encoded and raw path segments address the same key', async () => {
    const email = mail('c09');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Enc' })).status).toBe(204);
    const raw = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${email}/sections/${SHOP_S}/attributes`,
      { token },
    );
    const encoded = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${email.replace('@', '%40')}/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(raw.status, raw.text).toBe(200);
    expect(encoded.body).toEqual(raw.body);
    expect(Object.values(raw.body)).toContain('Enc');
  });

  it('COMP-10 a + in a path segment stays + (mobile keys and email tags)', async () => {
    expect((await create(MOBILE, '+4741230010')).status).toBe(201);
    const r = await server.request(
      'GET',
      `/audience/keyspaces/${MOBILE}/profiles/+4741230010/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(r.status, r.text).toBe(200);
    const tagged = `${uid('c10')}+tag@example.com`;
    expect((await create(EMAIL, tagged)).status).toBe(201);
    const raw = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${tagged}/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(raw.status, raw.text).toBe(200);
    expect(Object.values(raw.body)).toEqual([tagged]);
    // A space is another key (and not a valid address).
    expectProblem(
      await server.request(
        'GET',
        `/audience/keyspaces/${EMAIL}/profiles/${tagged.replace('+', '%20')}/sections/${SHOP_S}/attributes`,
        { token },
      ),
      400,
      'AUD-1205',
    );
  });

  it('PROF-08 a profile holds several identifiers, one per keyspace, each locating it', async () => {
    const email = mail('p08');
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(CRM, crm)));
    expectNoContent(await merge(id(WEB, cookie), id(CRM, crm)));
    expect((await patchV2(WEB, cookie, { [A_FIRST]: 'Eight' })).status).toBe(204);
    const exportKey = await exportKeyOf(EMAIL, email);
    const expected = { [A_EMAIL]: email, [A_FIRST]: 'Eight' };
    for (const [ks, key] of [
      [EMAIL, email],
      [CRM, crm],
      [WEB, cookie],
      [EXPORT, exportKey],
    ]) {
      expect(await attrs(ks, key)).toEqual(expected);
    }
  });

  it('PROF-09 one profile is reachable from every section; sections scope only its data', async () => {
    const email = mail('p09');
    expect((await create(EMAIL, email, CLUB_S)).status).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({});
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Shop name' }, SHOP_S)).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Club name' }, CLUB_S)).status).toBe(204);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_FIRST]: 'Shop name' });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Club name' });
  });
});

describe('profiles: export key', () => {
  it('PROF-10 every profile has an export key [a-zA-Z0-9-]* that locates it in the export keyspace', async () => {
    const email = mail('p10');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(WEB, cookie)).status).toBe(201);
    const a = await exportKeyOf(EMAIL, email);
    const b = await exportKeyOf(WEB, cookie);
    for (const key of [a, b]) expect(key).toMatch(/^[a-zA-Z0-9-]+$/);
    expect(a).not.toBe(b);
    expect(await attrs(EXPORT, a)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EXPORT, b)).toEqual({});
    // The export key is no attribute.
    expect(Object.values(await attrs(EMAIL, email))).not.toContain(a);
    expectProblem(await getSection(EXPORT, crypto.randomUUID()), 404, 'AUD-1201');
  });

  it('PROF-11 through the export keyspace reads work and writes → 403 AUD-1203', async () => {
    const email = mail('p11');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Reader' })).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'p11 page')).status).toBe(204);
    const ek = await exportKeyOf(EMAIL, email);

    expect(await attrs(EXPORT, ek)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });
    expect(await tags(EXPORT, ek)).toEqual({ [VIP]: true });
    expect((await events(EXPORT, ek)).map((e) => e.data.title)).toEqual(['p11 page']);

    const { current } = await definitionsOf(SHOP_S);
    expectProblem(await patchV1(EXPORT, ek, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await patchV2(EXPORT, ek, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await patchTags(EXPORT, ek, { [VIP]: false }), 403, 'AUD-1203');
    expectProblem(await addPageView(EXPORT, ek, 'not added'), 403, 'AUD-1203');
    expectProblem(
      await server.request('DELETE', `${sectionPath(EXPORT, ek, SHOP_S)}/attributes/${current.get(A_FIRST)}`, {
        token,
      }),
      403,
      'AUD-1203',
    );
    expectProblem(
      await server.request('DELETE', `/v2${sectionPath(EXPORT, ek, SHOP_S)}/attributes/${A_FIRST}`, { token }),
      403,
      'AUD-1203',
    );
    // Neither creation, nor a version 1 write that would create, nor an export key as `to`.
    expectProblem(await create(EXPORT, crypto.randomUUID()), 403, 'AUD-1203');
    const unknown = crypto.randomUUID();
    expectProblem(await patchV1(EXPORT, unknown, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await getSection(EXPORT, unknown), 404, 'AUD-1201');
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EMAIL, email), to: id(EXPORT, crypto.randomUUID()) }),
      403,
      'AUD-1203',
    );
    // Nor can the service-assigned export key be switched away (PROF-10: every profile keeps one).
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EXPORT, ek), to: id(WEB, uid('cookie')) }),
      403,
      'AUD-1203',
    );
    expect(await attrs(EXPORT, ek)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });

    // Nothing changed.
    expect(await attrs(EMAIL, email)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });
    expect(await tags(EMAIL, email)).toEqual({ [VIP]: true });
    expect(await events(EMAIL, email)).toHaveLength(1);
  });

  it('PROF-12 merge, delete and lock work through the export keyspace', async () => {
    const email = mail('p12');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    const ek = await exportKeyOf(EMAIL, email);
    expectNoContent(await merge(id(EXPORT, ek), id(WEB, cookie)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: email });
    // An unknown export key is not created by a merge.
    expectProblem(await merge(id(EXPORT, crypto.randomUUID()), id(WEB, uid('cookie'))), 404, 'AUD-1201');

    expectNoContent(await remove(EXPORT, ek));
    expectProblem(await getSection(EMAIL, email), 404, 'AUD-1201');
    expectProblem(await getSection(WEB, cookie), 404, 'AUD-1201');

    const locked = mail('p12lock');
    expect((await create(EMAIL, locked)).status).toBe(201);
    const lockedEk = await exportKeyOf(EMAIL, locked);
    expectNoContent(await lock(EXPORT, lockedEk));
    expectProblem(await getSection(EMAIL, locked), 410, 'AUD-1202');
    expectProblem(await getSection(EXPORT, lockedEk), 410, 'AUD-1202');
  });

  it('PROF-10 PROF-11 PROF-12 MRG-14 an export key has no identifier row and locates its own profile for read, write, merge, unmerge, lock and delete', async () => {
    const [email, cookie] = [mail('ek'), uid('cookie')];
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(WEB, cookie)).status).toBe(201);
    const [ekA, ekB] = [await exportKeyOf(EMAIL, email), await exportKeyOf(WEB, cookie)];
    // One identifier row per profile: its key; the export key is the profile's own column.
    expect(await identifierRows(ekA)).toEqual([{ kind: 'email', profile_key: email }]);
    expect(await identifierRows(ekB)).toEqual([{ kind: 'web', profile_key: cookie }]);

    // Read and write: written through a key, read through the export key; writes through it refused.
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Ann' })).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'ek page')).status).toBe(204);
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann' });
    expect(await tags(EXPORT, ekA)).toEqual({ [VIP]: true });
    expect((await events(EXPORT, ekA)).map((e) => e.data.title)).toEqual(['ek page']);
    expectProblem(await patchV2(EXPORT, ekA, { [A_FIRST]: 'Not' }), 403, 'AUD-1203');

    // Merge through an export key: either export key reads the cluster, and each member keeps its own.
    expectNoContent(await merge(id(EXPORT, ekB), id(EXPORT, ekA)));
    expect(await attrs(EXPORT, ekB)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann' });
    expect(await exportKeyOf(WEB, cookie)).toBe(ekB);
    expect(await exportKeyOf(EMAIL, email)).toBe(ekA);
    expect((await patchV2(WEB, cookie, { [A_LAST]: 'Both' })).status).toBe(204);
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann', [A_LAST]: 'Both' });
    // Unmerge through the export key of the later member: it stands alone, found by its export key.
    expectProblem(await unmerge(EXPORT, ekA), 400, 'AUD-1217');
    expectNoContent(await unmerge(EXPORT, ekB));
    expect(await attrs(EXPORT, ekB)).toEqual({});
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann', [A_LAST]: 'Both' });

    // Lock through an export key, after a merge: every key of the cluster answers 410, export keys included.
    expectNoContent(await merge(id(EXPORT, ekA), id(WEB, cookie)));
    expectNoContent(await lock(EXPORT, ekB));
    for (const [ks, key] of [
      [EXPORT, ekA],
      [EXPORT, ekB],
      [EMAIL, email],
      [WEB, cookie],
    ]) {
      expectProblem(await getSection(ks, key), 410, 'AUD-1202');
    }
    // A merge naming a locked export key locks the other profile (MRG-11).
    const later = uid('cookie');
    expectNoContent(await merge(id(EXPORT, ekA), id(WEB, later)));
    expectProblem(await getSection(WEB, later), 410, 'AUD-1202');

    // Delete through an export key: the profile and its export key are gone, and the key can be used again.
    const other = mail('ekdel');
    expect((await create(EMAIL, other)).status).toBe(201);
    const ekC = await exportKeyOf(EMAIL, other);
    expectNoContent(await remove(EXPORT, ekC));
    expectProblem(await getSection(EXPORT, ekC), 404, 'AUD-1201');
    expectProblem(await remove(EXPORT, ekC), 404, 'AUD-1201');
    expect((await create(EMAIL, other)).status).toBe(201);
    expect(await exportKeyOf(EMAIL, other)).not.toBe(ekC);
  });
});

describe('profiles: migration 0016 (export keys without identifier rows)', () => {
  it("PROF-10 PROF-12 MRG-21 an old database keeps its profiles: the export keys' identifier rows go, every other row stays, and export keys locate as before", async () => {
    const [plain, member, canonical, lockedKey] = [mail('m16'), uid('cookie'), mail('m16c'), mail('m16l')];
    for (const [ks, key] of [
      [EMAIL, plain],
      [EMAIL, canonical],
      [WEB, member],
      [EMAIL, lockedKey],
    ])
      expect((await create(ks, key)).status).toBe(201);
    expect((await patchV2(EMAIL, plain, { [A_FIRST]: 'Old' })).status).toBe(204);
    expectNoContent(await merge(id(EMAIL, canonical), id(WEB, member)));
    const [ekPlain, ekMember, ekCanonical, ekLocked] = [
      await exportKeyOf(EMAIL, plain),
      await exportKeyOf(WEB, member),
      await exportKeyOf(EMAIL, canonical),
      await exportKeyOf(EMAIL, lockedKey),
    ];
    expectNoContent(await lock(EXPORT, ekLocked));

    // The database as before migration 0016: every profile also had its export key as an identifier row.
    const exportIdentifiers = `select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where k.kind = 'export'`;
    const otherIdentifiers = `select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where k.kind <> 'export'`;
    const { rowCount } = await db.query(
      `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
       select p.account_id, k.keyspace_id, p.export_key, p.profile_id from profiles p join keyspaces k on k.account_id = p.account_id and k.kind = 'export'`,
    );
    expect(rowCount).toBeGreaterThanOrEqual(3);
    const others = (await db.query(otherIdentifiers)).rows[0].n;
    const counts = async () =>
      (
        await db.query(`select (select count(*) from profiles)::int as profiles, (select count(*) from profile_sections)::int as sections,
      (select count(*) from locked_identities)::int as locked, (select count(*) from attribute_history)::int as history`)
      ).rows[0];
    const before = await counts();
    await db.query(`delete from schema_migrations where name like '0016\\_%'`);
    expect(await migrate(server.services.pool)).toEqual(['0016_export_key_without_identifier.sql']);

    expect((await db.query(exportIdentifiers)).rows[0].n).toBe(0);
    expect((await db.query(otherIdentifiers)).rows[0].n).toBe(others);
    expect(await counts()).toEqual(before);
    // Read, merge, unmerge and delete by export key; the locked profile's export key still answers 410.
    expect(await attrs(EXPORT, ekPlain)).toEqual({ [A_EMAIL]: plain, [A_FIRST]: 'Old' });
    expect(await attrs(EXPORT, ekMember)).toEqual({ [A_EMAIL]: canonical });
    expectProblem(await unmerge(EXPORT, ekCanonical), 400, 'AUD-1217');
    expectNoContent(await unmerge(EXPORT, ekMember));
    expect(await attrs(EXPORT, ekMember)).toEqual({});
    expectProblem(await getSection(EXPORT, ekLocked), 410, 'AUD-1202');
    expectProblem(await lock(EXPORT, ekLocked), 410, 'AUD-1202');
    const cookie = uid('cookie');
    expectNoContent(await merge(id(EXPORT, ekPlain), id(WEB, cookie)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: plain, [A_FIRST]: 'Old' });
    expectNoContent(await remove(EXPORT, ekPlain));
    for (const [ks, key] of [
      [EXPORT, ekPlain],
      [WEB, cookie],
      [EMAIL, plain],
    ]) {
      expectProblem(await getSection(ks, key), 404, 'AUD-1201');
    }
  });
});

describe('profiles: delete', () => {
  it('PROF-13 DELETE …/profiles/{pk} → 204 with an empty body', async () => {
    const email = mail('p13');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await remove(EMAIL, email));
  });

  it('PROF-14 after delete the data and events are gone in every section and no identifier locates it', async () => {
    const email = mail('p14');
    const cookie = uid('cookie');
    const name = uid('gone');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expect((await patchV2(EMAIL, email, { [A_FIRST]: name }, CLUB_S)).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: uid('later') }, CLUB_S)).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(WEB, cookie, 'gone page')).status).toBe(204);
    const ek = await exportKeyOf(EMAIL, email);
    // The attribute history holds the replaced value (deleted with the profile, not by a foreign key: migration 0020).
    expect(await findPlaintext(name)).toContain('attribute_history.value');

    expectNoContent(await remove(WEB, cookie));
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [EXPORT, ek],
    ]) {
      for (const s of [SHOP_S, CLUB_S]) {
        for (const what of ['attributes', 'tags', 'events']) {
          expectProblem(await getSection(ks, key, what, s), 404, 'AUD-1201');
        }
      }
    }
    // Nothing of it remains in the database either.
    expect(await findPlaintext(email)).toEqual([]);
    expect(await findPlaintext(cookie)).toEqual([]);
    expect(await findPlaintext('gone page')).toEqual([]);
    expect(await findPlaintext(name)).toEqual([]);
  });

  it('PROF-15 a deleted profile can be created again with the same key and starts empty', async () => {
    const email = mail('p15');
    expect((await create(EMAIL, email)).status).toBe(201);
    const oldEk = await exportKeyOf(EMAIL, email);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Before' }, CLUB_S)).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'before')).status).toBe(204);
    expectNoContent(await remove(EMAIL, email));

    const again = await create(EMAIL, email);
    expect(again.status, again.text).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});
    expect(await tags(EMAIL, email)).toEqual({});
    expect(await events(EMAIL, email)).toEqual([]);
    // A new export key; the old one locates nothing.
    expect(await exportKeyOf(EMAIL, email)).not.toBe(oldEk);
    expectProblem(await getSection(EXPORT, oldEk), 404, 'AUD-1201');
  });

  it('PROF-16 deleting an unknown profile → 404', async () => {
    expectProblem(await remove(EMAIL, mail('p16')), 404, 'AUD-1201');
    expectProblem(await remove(`${NS}.keyspaces.nope`, 'x'), 404, 'AUD-1101');
  });
});

// ---- MRG: lock ----

describe('profiles: lock', () => {
  it('MRG-19 PUT …/locks → 204 with an empty body, and the profile is locked account-wide', async () => {
    const email = mail('m19');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    for (const s of [SHOP_S, CLUB_S]) {
      expectProblem(await getSection(EMAIL, email, 'attributes', s), 410, 'AUD-1202');
    }
  });

  it('MRG-20 locking an unknown profile → 404', async () => {
    expectProblem(await lock(EMAIL, mail('m20')), 404, 'AUD-1201');
  });

  it('MRG-21 locking deletes the data; later reads of any of its identifiers → 410 AUD-1202', async () => {
    const email = mail('m21');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expect((await patchV2(WEB, cookie, { [A_FIRST]: 'Locked' }, CLUB_S)).status).toBe(204);
    const ek = await exportKeyOf(EMAIL, email);
    expectNoContent(await lock(WEB, cookie));
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [EXPORT, ek],
    ]) {
      for (const what of ['attributes', 'tags', 'events']) {
        expectProblem(await getSection(ks, key, what, CLUB_S), 410, 'AUD-1202');
      }
    }
  });

  it('MRG-22 attribute, tag and event updates of a locked profile → 410, and it stays locked', async () => {
    const email = mail('m22');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    const { current } = await definitionsOf(SHOP_S);
    expectProblem(await patchV2(EMAIL, email, { [A_FIRST]: 'x' }), 410, 'AUD-1202');
    expectProblem(await patchV1(EMAIL, email, { [A_FIRST]: 'x' }), 410, 'AUD-1202');
    expectProblem(await patchTags(EMAIL, email, { [VIP]: true }), 410, 'AUD-1202');
    expectProblem(await addPageView(EMAIL, email, 'x'), 410, 'AUD-1202');
    expectProblem(
      await server.request('DELETE', `${sectionPath(EMAIL, email, SHOP_S)}/attributes/${current.get(A_FIRST)}`, {
        token,
      }),
      410,
      'AUD-1202',
    );
    expectProblem(
      await server.request('DELETE', `/v2${sectionPath(EMAIL, email, SHOP_S)}/attributes/${A_FIRST}`, { token }),
      410,
      'AUD-1202',
    );
    expectProblem(await getSection(EMAIL, email), 410, 'AUD-1202');
  });

  it('MRG-23 creating a profile with any identifier the locked profile had → 410', async () => {
    const email = mail('m23');
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(CRM, crm)));
    expectNoContent(await merge(id(WEB, cookie), id(CRM, crm)));
    expectNoContent(await lock(CRM, crm));
    expectProblem(await create(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await create(EMAIL, ` ${email.toUpperCase()} `, CLUB_S), 410, 'AUD-1202');
    expectProblem(await create(CRM, crm, CLUB_S), 410, 'AUD-1202');
    expectProblem(await create(WEB, cookie), 410, 'AUD-1202');
    // Version 1 PATCH creates missing profiles, but not locked ones.
    expectProblem(await patchV1(WEB, cookie, { [A_FIRST]: 'back' }), 410, 'AUD-1202');
    // The same key in another keyspace is another identifier.
    expect((await create(WEB, email)).status).toBe(201);
  });

  it('MRG-24 a lock is irreversible: delete, unmerge, lock and merge leave the identifiers locked', async () => {
    const email = mail('m24');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    expectProblem(await remove(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await unmerge(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await lock(EMAIL, email), 410, 'AUD-1202');
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EMAIL, email), to: id(WEB, uid('cookie')) }),
      410,
      'AUD-1202',
    );
    expectProblem(await create(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await getSection(EMAIL, email), 410, 'AUD-1202');
  });

  it('MRG-25 only an anonymous ID remains: no table holds the plaintext of a locked profile', async () => {
    const email = mail('m25-lock.me');
    const cookie = uid('m25cookie');
    const crm = uid('m25crm');
    const mobile = '+4741230025';
    const name = uid('m25name');
    const title = uid('m25title');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(MOBILE, mobile, CLUB_S)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expectNoContent(await merge(id(MOBILE, mobile), id(WEB, cookie)));
    expectNoContent(await merge(id(CRM, crm), id(WEB, cookie)));
    expect((await patchV2(EMAIL, email, { [A_FIRST]: name, [A_LAST]: name })).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: `${name}-club` }, CLUB_S)).status).toBe(204);
    expect((await addPageView(WEB, cookie, title)).status).toBe(204);
    const exportKeys = [
      await exportKeyOf(EMAIL, email),
      await exportKeyOf(WEB, cookie),
      await exportKeyOf(MOBILE, mobile),
      await exportKeyOf(CRM, crm),
    ];
    const needles = [email, cookie, crm, mobile, mobile.slice(3), name, title, ...exportKeys];
    const {
      rows: [before],
    } = await db.query<{ n: number }>('select count(*)::int as n from locked_identities');

    // The search finds the data while it exists…
    for (const needle of needles) expect(await findPlaintext(needle), needle).not.toEqual([]);
    expectNoContent(await lock(MOBILE, mobile));
    // …and nowhere once the profile is locked.
    for (const needle of needles) expect(await findPlaintext(needle), needle).toEqual([]);

    // What remains is one keyed hash per identifier (four keys and four export keys)…
    const {
      rows: [after],
    } = await db.query<{ n: number }>('select count(*)::int as n from locked_identities');
    expect(after.n - before.n).toBe(8);
    // …which still refuses every one of them.
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [CRM, crm],
      [MOBILE, mobile],
    ])
      expectProblem(await create(ks, key), 410, 'AUD-1202');
    for (const ek of exportKeys) expectProblem(await getSection(EXPORT, ek, 'tags'), 410, 'AUD-1202');
  });
});

// ---- MRG: merge ----

describe('profiles: merge', () => {
  it('MRG-01 PUT /audience/profiles/merges with two profiles → 204 with an empty body', async () => {
    const a = mail('m01');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(WEB, b)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    // Merging members of one cluster again changes nothing.
    expectNoContent(await merge(id(WEB, b), id(EMAIL, a)));
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
  });

  it('MRG-02 profiles without exactly two entries → 400', async () => {
    const one = [id(EMAIL, mail())];
    const three = [id(EMAIL, mail()), id(WEB, uid()), id(CRM, uid())];
    for (const profiles of [[], one, three]) {
      expectProblem(
        await server.request('PUT', '/audience/profiles/merges', { token, body: { profiles } }),
        400,
        'AUD-1214',
      );
    }
    expectProblem(await server.request('PUT', '/audience/profiles/merges', { token, body: {} }), 400);
    expectProblem(await server.request('PUT', '/audience/profiles/merges', { token, body: { profiles: 'x' } }), 400);
    // None of the named profiles was created.
    for (const p of three)
      expectProblem(await getSection(p.keyspace_discriminator, p.profile_key, 'tags'), 404, 'AUD-1201');
  });

  it('MRG-03 an invalid profile_key → 400, and nothing is created', async () => {
    const cookie = uid('cookie');
    expectProblem(await merge(id(WEB, cookie), id(EMAIL, 'not-an-email')), 400, 'AUD-1205');
    expectProblem(await merge(id(MOBILE, '123'), id(WEB, cookie)), 400, 'AUD-1205');
    expectProblem(await merge(id(WEB, cookie), id(WEB, '')), 400, 'AUD-1205');
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: { profiles: [id(WEB, cookie), { keyspace_discriminator: WEB, profile_key: 7 }] },
      }),
      400,
    );
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: { profiles: [id(WEB, cookie), { keyspace_discriminator: WEB }] },
      }),
      400,
    );
    expectProblem(await getSection(WEB, cookie, 'tags'), 404, 'AUD-1201');
  });

  it('MRG-04 profiles named in a merge that do not exist are created', async () => {
    const a = mail('m04');
    const b = uid('cookie');
    expectNoContent(await merge(id(EMAIL, ` ${a.toUpperCase()}`), id(WEB, b)));
    expect(await attrs(EMAIL, a)).toEqual({});
    expect(await attrs(WEB, b)).toEqual({});
    expectProblem(await create(EMAIL, a), 409, 'AUD-1204');
    expectProblem(await create(WEB, b), 409, 'AUD-1204');
    // Each got its own export key.
    expect(await exportKeyOf(EMAIL, a)).not.toBe(await exportKeyOf(WEB, b));
  });

  it('MRG-05 after a merge both keys read and write the same data', async () => {
    const a = mail('m05');
    const b = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(CRM, b, CLUB_S)).status).toBe(201);
    expect((await patchV2(CRM, b, { [A_LAST]: 'Crm' })).status).toBe(204);
    expect((await addPageView(CRM, b, 'before merge')).status).toBe(204);
    expectNoContent(await merge(id(EMAIL, a), id(CRM, b)));
    expect((await patchV2(EMAIL, a, { [A_FIRST]: 'Both' })).status).toBe(204);
    expect((await patchTags(CRM, b, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, a, 'after merge')).status).toBe(204);
    for (const s of [SHOP_S, CLUB_S]) expect(await attrs(EMAIL, a, s)).toEqual(await attrs(CRM, b, s));
    expect(await attrs(CRM, b)).toEqual({ [A_EMAIL]: a, [A_FIRST]: 'Both', [A_LAST]: 'Crm' });
    expect(await attrs(EMAIL, a, CLUB_S)).toEqual({ [A_CRM]: b });
    expect(await tags(EMAIL, a)).toEqual({ [VIP]: true });
    expect(await tags(CRM, b)).toEqual({ [VIP]: true });
    const titles = (await events(EMAIL, a)).map((e) => e.data.title).sort();
    expect(titles).toEqual(['after merge', 'before merge']);
    expect((await events(CRM, b)).map((e) => e.data.title).sort()).toEqual(titles);
  });

  it('MRG-07 any two profiles merge, whatever their data says about the person', async () => {
    const a = uid('crm');
    const b = uid('cookie');
    expect((await create(CRM, a, CLUB_S)).status).toBe(201);
    expect((await create(WEB, b)).status).toBe(201);
    expect((await patchV2(CRM, a, { [A_FIRST]: 'Alice', [A_LAST]: 'Smith' })).status).toBe(204);
    expect((await patchV2(WEB, b, { [A_FIRST]: 'Bob', [A_LAST]: 'Jones' })).status).toBe(204);
    expectNoContent(await merge(id(CRM, a), id(WEB, b)));
    expect(await attrs(WEB, b)).toEqual(await attrs(CRM, a));
  });

  it('MRG-08 conflicting email, mobile or CRM ID values → 409 AUD-1215 and nothing is merged', async () => {
    for (const [ks, key1, key2] of [
      [EMAIL, mail('m08a'), mail('m08b')],
      [MOBILE, '+4741230081', '+4741230082'],
      [CRM, uid('crm'), uid('crm')],
    ]) {
      expect((await create(ks, key1)).status).toBe(201);
      expect((await create(ks, key2)).status).toBe(201);
      expect((await patchV2(ks, key1, { [A_FIRST]: 'One' })).status).toBe(204);
      expect((await patchV2(ks, key2, { [A_FIRST]: 'Two' })).status).toBe(204);
      const fresh = uid('cookie');
      // Through a new cookie that joins key1 first: its cluster conflicts with key2.
      expectNoContent(await merge(id(ks, key1), id(WEB, fresh)));
      expectProblem(await merge(id(ks, key2), id(ks, key1)), 409, 'AUD-1215');
      expectProblem(await merge(id(WEB, fresh), id(ks, key2)), 409, 'AUD-1215');
      expect((await attrs(ks, key1))[A_FIRST]).toBe('One');
      expect((await attrs(ks, key2))[A_FIRST]).toBe('Two');
      expect((await patchV2(ks, key2, { [A_LAST]: 'Separate' })).status).toBe(204);
      expect((await attrs(ks, key1))[A_LAST]).toBeUndefined();
      expect((await attrs(WEB, fresh))[A_FIRST]).toBe('One');
      // A profile created by the refused merge is rolled back too.
      const other = uid('cookie');
      expectNoContent(await merge(id(ks, key2), id(WEB, other)));
      expectProblem(await merge(id(WEB, other), id(WEB, fresh)), 409, 'AUD-1215');
    }
    // Equal values do not conflict.
    const same = mail('m08same');
    expect((await create(EMAIL, same)).status).toBe(201);
    const crm = uid('crm');
    expect((await patchV1(CRM, crm, { [A_EMAIL]: same })).status).toBe(204);
    expectNoContent(await merge(id(CRM, crm), id(EMAIL, same)));
  });

  it('MRG-09 a merge beyond the merge limit → 409 AUD-1216; the cluster stays as it was', async () => {
    const limited = await server.login(TWO, { ...UNLIMITED, merges_per_profile: 3 });
    const t = limited.token;
    const [a, b, c, d] = [uid('a'), uid('b'), uid('c'), uid('d')];
    expectNoContent(await merge(id(WEB, a), id(WEB, b), t));
    expectNoContent(await merge(id(WEB, c), id(WEB, a), t));
    // Already in the cluster: no growth, no error.
    expectNoContent(await merge(id(WEB, b), id(WEB, c), t));
    expectProblem(await merge(id(WEB, d), id(WEB, b), t), 409, 'AUD-1216');
    expectProblem(await getSection(WEB, d, 'tags', SHOP_S, t), 404, 'AUD-1201');
    expect((await create(WEB, d, SHOP_S, t)).status).toBe(201);
    expectProblem(await merge(id(WEB, a), id(WEB, d), t), 409, 'AUD-1216');
    expect((await patchV2(WEB, d, { [A_FIRST]: 'Alone' }, SHOP_S, t)).status).toBe(204);
    expect(await attrs(WEB, a, SHOP_S, t)).toEqual({});

    // Two clusters of two make four: refused as well.
    const [e, f, g, h] = [uid('e'), uid('f'), uid('g'), uid('h')];
    expectNoContent(await merge(id(WEB, e), id(WEB, f), t));
    expectNoContent(await merge(id(WEB, g), id(WEB, h), t));
    expectProblem(await merge(id(WEB, f), id(WEB, h), t), 409, 'AUD-1216');
    expect((await patchV2(WEB, e, { [A_FIRST]: 'EF' }, SHOP_S, t)).status).toBe(204);
    expect(await attrs(WEB, h, SHOP_S, t)).toEqual({});
  });

  it('MRG-10 a cluster with a transactional-email profile is held to the same limit', async () => {
    const limited = await server.login(TWO, { ...UNLIMITED, merges_per_profile: 3 });
    const t = limited.token;
    const [a, b] = [uid('a'), uid('b')];
    const tx = mail('tx');
    expectNoContent(await merge(id(WEB, a), id(TX, tx), t));
    expectNoContent(await merge(id(WEB, b), id(TX, tx), t));
    expectProblem(await merge(id(TX, tx), id(WEB, uid('c')), t), 409, 'AUD-1216');
  });

  it('MRG-11 merging a locked profile with an unlocked one succeeds and leaves both locked', async () => {
    const lockedKey = mail('m11');
    const open = uid('crm');
    expect((await create(EMAIL, lockedKey)).status).toBe(201);
    expectNoContent(await lock(EMAIL, lockedKey));
    expect((await create(CRM, open)).status).toBe(201);
    expect((await patchV2(CRM, open, { [A_FIRST]: 'Open' })).status).toBe(204);
    expectNoContent(await merge(id(CRM, open), id(EMAIL, lockedKey)));
    expectProblem(await getSection(CRM, open), 410, 'AUD-1202');
    expectProblem(await getSection(EMAIL, lockedKey), 410, 'AUD-1202');
    expectProblem(await create(CRM, open), 410, 'AUD-1202');
    // A key named in the merge that did not exist is locked as well.
    const fresh = uid('cookie');
    expectNoContent(await merge(id(EMAIL, lockedKey), id(WEB, fresh)));
    expectProblem(await create(WEB, fresh), 410, 'AUD-1202');
  });

  it('MRG-12 the canonical profile is the earliest created, whatever the argument order', async () => {
    for (const order of ['older first', 'newer first']) {
      const older = uid('older');
      const newer = uid('newer');
      expect((await create(WEB, older)).status).toBe(201);
      expect((await create(WEB, newer)).status).toBe(201);
      expect((await patchV2(WEB, older, { [A_FIRST]: 'Older' })).status).toBe(204);
      expect((await patchV2(WEB, newer, { [A_FIRST]: 'Newer', [A_LAST]: 'Newer' })).status).toBe(204);
      const pair = [id(WEB, older), id(WEB, newer)];
      if (order === 'newer first') pair.reverse();
      expectNoContent(await merge(pair[0], pair[1]));
      // The earliest-created member's values win, others fill the gaps.
      expect(await attrs(WEB, newer)).toEqual({ [A_FIRST]: 'Older', [A_LAST]: 'Newer' });
      expectProblem(await unmerge(WEB, older), 400, 'AUD-1217');
      expectNoContent(await unmerge(WEB, newer));
    }
  });

  it('COMP-13 a form-urlencoded merge with bracket keys works like JSON', async () => {
    const a = mail('c13');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    const form = new URLSearchParams({
      'profiles[0][keyspace_discriminator]': EMAIL,
      'profiles[0][profile_key]': a,
      'profiles[1][keyspace_discriminator]': WEB,
      'profiles[1][profile_key]': b,
    }).toString();
    expect(form).toContain('%5B0%5D');
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    expectNoContent(await server.request('PUT', '/audience/profiles/merges', { token, raw: form, headers }));
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // Unencoded brackets too, and the same validation as JSON.
    const raw = `profiles[0][keyspace_discriminator]=${WEB}&profiles[0][profile_key]=${uid('x')}&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}`;
    expectNoContent(await server.request('PUT', '/audience/profiles/merges', { token, raw, headers }));
    const single = `profiles[0][keyspace_discriminator]=${WEB}&profiles[0][profile_key]=${b}`;
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: single, headers }),
      400,
      'AUD-1214',
    );
    const invalid = `profiles[0][keyspace_discriminator]=${EMAIL}&profiles[0][profile_key]=nope&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}`;
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: invalid, headers }),
      400,
      'AUD-1205',
    );
    const conflicting = mail('c13other');
    expect((await create(EMAIL, conflicting)).status).toBe(201);
    const conflict = new URLSearchParams({
      'profiles[0][keyspace_discriminator]': EMAIL,
      'profiles[0][profile_key]': conflicting,
      'profiles[1][keyspace_discriminator]': WEB,
      'profiles[1][profile_key]': b,
    }).toString();
    expectProblem(
      await server.request('PUT', '/audience/profiles/merges', { token, raw: conflict, headers }),
      409,
      'AUD-1215',
    );
  });

  it("COMP-13 the Drupal module's form-encoded merge, which adds time_zone, merges: unknown top-level fields are ignored", async () => {
    const a = mail('drupal');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    const raw = `profiles[0][keyspace_discriminator]=${EMAIL}&profiles[0][profile_key]=${encodeURIComponent(a)}&profiles[1][keyspace_discriminator]=${WEB}&profiles[1][profile_key]=${b}&time_zone=Europe%2FOslo`;
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        raw,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    );
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // The same in JSON; fields inside a profile reference are not top-level and stay checked.
    const c = uid('cookie');
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: a },
            { keyspace_discriminator: WEB, profile_key: c },
          ],
          time_zone: 'Europe/Oslo',
        },
      }),
    );
    expect(await attrs(WEB, c)).toEqual({ [A_EMAIL]: a });
    const nested = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: a, extra: 1 },
          { keyspace_discriminator: WEB, profile_key: uid('cookie') },
        ],
      },
    });
    expectProblem(nested, 400);
    expect(nested.body.detail).toContain('profiles[0].extra');
  });

  it('COMP-15 COMP-16 web visitors merge like other profiles; after a 409 a new web key merges with the known profile', async () => {
    const ann = mail('ann');
    const bob = mail('bob');
    const cookie = uid('cookie');
    expect((await create(EMAIL, ann)).status).toBe(201);
    expect((await create(EMAIL, bob)).status).toBe(201);
    // The visitor is a profile of the web keyspace with the usual operations.
    expect((await patchV1(WEB, cookie, { [A_LAST]: 'Visitor' })).status).toBe(204);
    expect((await addPageView(WEB, cookie, 'visit')).status).toBe(204);
    expectNoContent(await merge(id(WEB, cookie), id(EMAIL, ann)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: ann, [A_LAST]: 'Visitor' });
    // The shared computer: Bob logs in with Ann's cookie.
    expectProblem(await merge(id(WEB, cookie), id(EMAIL, bob)), 409, 'AUD-1215');
    const next = uid('cookie');
    expectNoContent(await merge(id(WEB, next), id(EMAIL, bob)));
    expect(await attrs(WEB, next)).toEqual({ [A_EMAIL]: bob });
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: ann, [A_LAST]: 'Visitor' });
    expect((await events(EMAIL, ann)).map((e) => e.data.title)).toEqual(['visit']);
    expect(await events(EMAIL, bob)).toEqual([]);
  });
});

// ---- MRG-06: commutativity and associativity, generated ----

interface Seeded {
  first?: string;
  last?: string;
  vip: boolean;
}

/** Merge steps (pairs of profile indexes) that join exactly the given groups, ordered by `rnd`. */
function mergePlan(groups: number[], rnd: number[]): [number, number][] {
  let at = 0;
  const next = (bound: number) => (bound <= 1 ? 0 : rnd[at++ % rnd.length] % bound);
  const shuffle = <T>(xs: T[]) => {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = next(i + 1);
      [xs[i], xs[j]] = [xs[j], xs[i]];
    }
    return xs;
  };
  const steps: [number, number][] = [];
  for (const label of new Set(groups)) {
    const members = shuffle(groups.flatMap((g, i) => (g === label ? [i] : [])));
    // A random spanning tree of the group, each edge in a random argument order…
    for (let i = 1; i < members.length; i++) {
      const edge: [number, number] = [members[i], members[next(i)]];
      steps.push(next(2) === 0 ? edge : [edge[1], edge[0]]);
    }
    // …and sometimes a redundant merge inside the group.
    if (members.length > 2 && next(2) === 0) steps.push([members[members.length - 1], members[0]]);
  }
  return shuffle(steps);
}

describe('profiles: merge algebra', () => {
  it('MRG-06 argument order and grouping of merges do not change the clusters, their data or their canonical profile', async () => {
    const names = fc.option(fc.constantFrom('Ann', 'Bob', 'Cy', 'Dee'), { nil: undefined });
    const scenario = fc.integer({ min: 2, max: 5 }).chain((n) =>
      fc.record({
        seeds: fc.array(fc.record({ first: names, last: names, vip: fc.boolean() }), { minLength: n, maxLength: n }),
        groups: fc.array(fc.integer({ min: 0, max: n - 1 }), { minLength: n, maxLength: n }),
        orderA: fc.array(fc.nat(), { minLength: 4 * n, maxLength: 4 * n }),
        orderB: fc.array(fc.nat(), { minLength: 4 * n, maxLength: 4 * n }),
      }),
    );

    type Observed = { attributes: Record<string, unknown>; tags: Record<string, boolean> };
    const run = async (seeds: Seeded[], plan: [number, number][]) => {
      const keys = seeds.map(() => uid('m06'));
      // Created one after the other: index order is creation order.
      for (const [i, s] of seeds.entries()) {
        expect((await create(WEB, keys[i])).status).toBe(201);
        const values = { ...(s.first ? { [A_FIRST]: s.first } : {}), ...(s.last ? { [A_LAST]: s.last } : {}) };
        if (Object.keys(values).length > 0) expect((await patchV2(WEB, keys[i], values)).status).toBe(204);
        if (s.vip) expect((await patchTags(WEB, keys[i], { [VIP]: true })).status).toBe(204);
      }
      for (const [x, y] of plan) expectNoContent(await merge(id(WEB, keys[x]), id(WEB, keys[y])));
      const observed: Observed[] = [];
      for (const key of keys) observed.push({ attributes: await attrs(WEB, key), tags: await tags(WEB, key) });
      return { keys, observed };
    };

    /** The clusters as seen through HTTP: a marker written through one key shows through the others. */
    const clustersOf = async (keys: string[]) => {
      const label: number[] = keys.map(() => -1);
      for (let i = 0; i < keys.length; i++) {
        if (label[i] !== -1) continue;
        label[i] = i;
        const marker = `marker-${i}-${uid()}`;
        expect((await patchV2(WEB, keys[i], { [A_LAST]: marker })).status).toBe(204);
        for (let j = i + 1; j < keys.length; j++) if ((await attrs(WEB, keys[j]))[A_LAST] === marker) label[j] = i;
      }
      return label;
    };

    await fc.assert(
      fc.asyncProperty(scenario, async ({ seeds, groups, orderA, orderB }) => {
        const a = await run(seeds, mergePlan(groups, orderA));
        const b = await run(seeds, mergePlan(groups, orderB));
        // The same data through every key, whatever the order…
        expect(b.observed).toEqual(a.observed);
        // …which is, per cluster, the earliest-created member's value of each attribute, and every tag set.
        const expected = seeds.map((_, i): Observed => {
          const members = seeds.filter((__, j) => groups[j] === groups[i]);
          const first = members.find((m) => m.first)?.first;
          const last = members.find((m) => m.last)?.last;
          return {
            attributes: { ...(first ? { [A_FIRST]: first } : {}), ...(last ? { [A_LAST]: last } : {}) },
            tags: members.some((m) => m.vip) ? { [VIP]: true } : {},
          };
        });
        expect(a.observed).toEqual(expected);
        // The same clusters: each labelled by its earliest member.
        const clusters = groups.map((g) => groups.indexOf(g));
        expect(await clustersOf(a.keys)).toEqual(clusters);
        expect(await clustersOf(b.keys)).toEqual(clusters);
        // The same canonical profile: the earliest member cannot be unmerged, the others can.
        for (const { keys } of [a, b]) {
          for (const [i, key] of keys.entries()) {
            const size = groups.filter((g) => g === groups[i]).length;
            if (size > 1 && clusters[i] === i) expectProblem(await unmerge(WEB, key), 400, 'AUD-1217');
          }
          for (const [i, key] of keys.entries()) if (clusters[i] !== i) expectNoContent(await unmerge(WEB, key));
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});

// ---- MRG: unmerge ----

describe('profiles: unmerge', () => {
  it('MRG-13 DELETE /audience/profiles/merges/keyspaces/{ks}/profiles/{pk} → 204', async () => {
    const a = mail('m13');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    expectNoContent(await unmerge(WEB, b));
  });

  it('MRG-14 an unmerged member is standalone with its own key and values; the group keeps the data', async () => {
    const [p1, p2, p3] = [uid('p1'), uid('p2'), uid('p3')];
    for (const key of [p1, p2, p3]) expect((await create(WEB, key)).status).toBe(201);
    expect((await patchV2(WEB, p1, { [A_FIRST]: 'One' })).status).toBe(204);
    expect((await patchV2(WEB, p2, { [A_LAST]: 'Two' })).status).toBe(204);
    expect((await patchV2(WEB, p3, { [A_FIRST]: 'Three', [A_LAST]: 'Three' })).status).toBe(204);
    expect((await patchTags(WEB, p3, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(WEB, p2, 'p2 own page')).status).toBe(204);
    expectNoContent(await merge(id(WEB, p1), id(WEB, p2)));
    expectNoContent(await merge(id(WEB, p3), id(WEB, p2)));
    expect(await attrs(WEB, p3)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect((await addPageView(WEB, p3, 'cluster page')).status).toBe(204);

    expectNoContent(await unmerge(WEB, p2));
    // p2 stands alone with the values it had.
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Two' });
    expect(await tags(WEB, p2)).toEqual({});
    expect((await events(WEB, p2)).map((e) => e.data.title)).toEqual(['p2 own page']);
    // Events stay on the profile that received them (docs/profiles.md): the cluster keeps those it received while merged.
    expect((await events(WEB, p1)).map((e) => e.data.title)).toEqual(['cluster page']);
    // The group keeps everything it showed, p2's contribution included, and stays merged.
    expect(await attrs(WEB, p1)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect(await attrs(WEB, p3)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect(await tags(WEB, p1)).toEqual({ [VIP]: true });
    expect((await patchV2(WEB, p3, { [A_FIRST]: 'Together' })).status).toBe(204);
    expect((await attrs(WEB, p1))[A_FIRST]).toBe('Together');
    expect((await attrs(WEB, p2))[A_FIRST]).toBeUndefined();
    // The standalone profile can be written on its own and merged again.
    expect((await patchV2(WEB, p2, { [A_FIRST]: 'Solo' })).status).toBe(204);
    expect((await attrs(WEB, p1))[A_FIRST]).toBe('Together');
    expectNoContent(await merge(id(WEB, p2), id(WEB, p1)));
  });

  it('MRG-14 values cleared in the group stay cleared after a member is unmerged', async () => {
    const [p1, p2, p3] = [uid('p1'), uid('p2'), uid('p3')];
    for (const key of [p1, p2, p3]) expect((await create(WEB, key)).status).toBe(201);
    expect((await patchV2(WEB, p2, { [A_FIRST]: 'Cleared', [A_LAST]: 'Kept' })).status).toBe(204);
    expect((await patchTags(WEB, p2, { [VIP]: true })).status).toBe(204);
    expectNoContent(await merge(id(WEB, p1), id(WEB, p2)));
    expectNoContent(await merge(id(WEB, p1), id(WEB, p3)));
    expect((await patchV2(WEB, p1, { [A_FIRST]: null })).status).toBe(204);
    expect((await patchTags(WEB, p1, { [VIP]: false })).status).toBe(204);
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Kept' });
    expect(await tags(WEB, p2)).toEqual({});

    expectNoContent(await unmerge(WEB, p3));
    expect(await attrs(WEB, p1)).toEqual({ [A_LAST]: 'Kept' });
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Kept' });
    expect(await tags(WEB, p1)).toEqual({});
  });

  it('MRG-15 unmerging a standalone profile → 204 and no change', async () => {
    const a = mail('m15');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await patchV2(EMAIL, a, { [A_FIRST]: 'Alone' })).status).toBe(204);
    expectNoContent(await unmerge(EMAIL, a));
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a, [A_FIRST]: 'Alone' });
  });

  it('MRG-16 unmerging the canonical profile → 400 AUD-1217 and nothing changes', async () => {
    const a = mail('m16');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(WEB, b), id(EMAIL, a)));
    expectProblem(await unmerge(EMAIL, ` ${a.toUpperCase()}`), 400, 'AUD-1217');
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // Its export key names the same canonical member.
    expectProblem(await unmerge(EXPORT, await exportKeyOf(EMAIL, a)), 400, 'AUD-1217');
  });

  it('MRG-17 unmerging a locked profile → 410', async () => {
    const a = mail('m17');
    const b = uid('cookie');
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    expectNoContent(await lock(EMAIL, a));
    expectProblem(await unmerge(WEB, b), 410, 'AUD-1202');
    expectProblem(await unmerge(EMAIL, a), 410, 'AUD-1202');
  });

  it('MRG-18 unmerging an unknown profile → 404', async () => {
    expectProblem(await unmerge(WEB, uid('nobody')), 404, 'AUD-1201');
    expectProblem(await unmerge(`${NS}.keyspaces.nope`, 'x'), 404, 'AUD-1101');
  });
});

// ---- MRG: switch identifier ----

describe('profiles: switch identifier', () => {
  it('MRG-26 MRG-33 PUT …/profiles/{pk}/sections/{s} {from, to} → 204; `to` locates the profile and `from` no longer does', async () => {
    const old = mail('m26old');
    const next = mail('m26new');
    expect((await create(EMAIL, old)).status).toBe(201);
    expect((await patchV2(EMAIL, old, { [A_FIRST]: 'Switch' })).status).toBe(204);
    // Version 1 changes only the attribute, so the section's email can name the new address.
    expect((await patchV1(EMAIL, old, { [A_EMAIL]: next })).status).toBe(204);
    expectNoContent(
      await switchId(EMAIL, old, SHOP_S, { from: id(EMAIL, old), to: id(EMAIL, ` ${next.toUpperCase()} `) }),
    );
    expect(await attrs(EMAIL, next)).toEqual({ [A_EMAIL]: next, [A_FIRST]: 'Switch' });
    expectProblem(await getSection(EMAIL, old), 404, 'AUD-1201');
    // The old key is free again.
    expect((await create(EMAIL, old, CLUB_S)).status).toBe(201);

    // Into a keyspace without a mapped attribute, located through another identifier.
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(CRM, crm)).status).toBe(201);
    expectNoContent(await merge(id(CRM, crm), id(WEB, cookie)));
    expectNoContent(await switchId(WEB, cookie, SHOP_S, { from: id(CRM, crm), to: id(WEB, uid('cookie2')) }));
    expectProblem(await getSection(CRM, crm), 404, 'AUD-1201');
    expect(await attrs(WEB, cookie)).toEqual({ [A_CRM]: crm });
  });

  it('MRG-27 a switch without `from` or `to` → 400', async () => {
    const a = mail('m27');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { to: id(WEB, uid()) }), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a) }), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, {}), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: { keyspace_discriminator: WEB } }), 400);
    expectProblem(
      await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(EMAIL, 'not-an-email') }),
      400,
      'AUD-1205',
    );
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a });
  });

  it('MRG-28 a switch on a profile that cannot be located → 404', async () => {
    const a = mail('m28');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(WEB, uid()) }), 404, 'AUD-1201');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectProblem(
      await switchId(EMAIL, a, `${NS}.sections.user-created.nope`, { from: id(EMAIL, a), to: id(WEB, uid()) }),
      404,
      'AUD-1102',
    );
  });

  it('MRG-29 `from` must be an identifier of the located profile → else 400', async () => {
    const a = mail('m29');
    const other = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(CRM, other)).status).toBe(201);
    const to = uid('cookie');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(CRM, other), to: id(WEB, to) }), 400, 'AUD-1221');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(CRM, uid('nobody')), to: id(WEB, to) }), 400, 'AUD-1221');
    expectProblem(await getSection(WEB, to, 'tags'), 404, 'AUD-1201');
    expect((await attrs(CRM, other))[A_CRM]).toBe(other);
  });

  it('MRG-30 `to` must not exist on this or any other profile → else 409', async () => {
    const a = mail('m30');
    const mine = uid('cookie');
    const theirs = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, mine)));
    expect((await create(CRM, theirs, CLUB_S)).status).toBe(201);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, theirs) }), 409, 'AUD-1222');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(WEB, mine) }), 409, 'AUD-1222');
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a });
    expect(await attrs(CRM, theirs, CLUB_S)).toEqual({ [A_CRM]: theirs });
  });

  it('MRG-31 a mapped attribute value in the section must equal `to` → else 400', async () => {
    const a = mail('m31');
    expect((await create(EMAIL, a)).status).toBe(201);
    const held = uid('held-crm');
    expect((await patchV1(EMAIL, a, { [A_CRM]: held })).status).toBe(204);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, uid('crm')) }), 400, 'AUD-1223');
    // Another section's value does not count, and the equal value passes.
    expect((await patchV1(EMAIL, a, { [A_CRM]: 'club-crm' }, CLUB_S)).status).toBe(204);
    expectNoContent(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, held) }));
    expect(await attrs(CRM, held)).toEqual({ [A_EMAIL]: a, [A_CRM]: held });
  });

  it('MRG-32 a `to` in the email keyspace must equal the email attribute → else 400', async () => {
    const crm = uid('crm');
    expect((await create(CRM, crm)).status).toBe(201);
    // No email attribute at all.
    expectProblem(
      await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, mail('m32')) }),
      400,
      'AUD-1223',
    );
    // Another email attribute.
    expect((await patchV1(CRM, crm, { [A_EMAIL]: 'held@example.com' })).status).toBe(204);
    expectProblem(
      await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, mail('m32')) }),
      400,
      'AUD-1223',
    );
    // The email attribute of another section does not count.
    const club = mail('m32club');
    expect((await patchV1(CRM, crm, { [A_EMAIL]: club }, CLUB_S)).status).toBe(204);
    expectProblem(await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, club) }), 400, 'AUD-1223');
    expectNoContent(await switchId(CRM, crm, CLUB_S, { from: id(CRM, crm), to: id(EMAIL, club) }));
    expect(await attrs(EMAIL, club, CLUB_S)).toEqual({ [A_EMAIL]: club });
  });

  it('MRG-34 `from` is kept when another section holds it as its mapped attribute, and `to` is created', async () => {
    const a = mail('m34a');
    const b = mail('m34b');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await patchV1(EMAIL, a, { [A_EMAIL]: a }, CLUB_S)).status).toBe(204);
    expect((await patchV1(EMAIL, a, { [A_EMAIL]: b }, SHOP_S)).status).toBe(204);
    expectNoContent(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(EMAIL, b) }));
    expect(await attrs(EMAIL, a, CLUB_S)).toEqual({ [A_EMAIL]: a });
    expect(await attrs(EMAIL, b, CLUB_S)).toEqual({ [A_EMAIL]: a });
    expect((await patchV2(EMAIL, b, { [A_FIRST]: 'Same' })).status).toBe(204);
    expect((await attrs(EMAIL, a))[A_FIRST]).toBe('Same');
    expectProblem(await create(EMAIL, a), 409, 'AUD-1204');
  });
});

// ---- LIM-07 ----

describe('profiles: operations per key', () => {
  it('LIM-07 the 11th operation on one key within a second → 429; another key is free; a second later it is free again', async () => {
    const limited = await server.login(TWO, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_key_operations_per_second: 10,
    });
    const t = limited.token;
    const busy = mail('busy');
    const other = mail('other');
    expect((await create(EMAIL, busy, SHOP_S, t)).status).toBe(201);
    expect((await create(EMAIL, other, SHOP_S, t)).status).toBe(201);
    const operations = [
      () => getSection(EMAIL, busy, 'attributes', SHOP_S, t),
      () => getSection(EMAIL, busy, 'tags', SHOP_S, t),
      () => patchV2(EMAIL, busy, { [A_FIRST]: 'Busy' }, SHOP_S, t),
      () => getSection(EMAIL, busy, 'events', SHOP_S, t),
      () => patchTags(EMAIL, busy, { [VIP]: true }, SHOP_S, t),
    ];
    for (let i = 0; i < 10; i++) {
      const r = await operations[i % operations.length]();
      expect(r.status, `operation ${i + 1}: ${r.text}`).toBeLessThan(300);
    }
    const refused = await getSection(EMAIL, busy, 'attributes', SHOP_S, t);
    expectProblem(refused, 429, 'AUD-1002');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The raw spelling of the key is the same key.
    expectProblem(
      await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/${busy}/sections/${SHOP_S}/tags`, {
        token: t,
      }),
      429,
      'AUD-1002',
    );
    expectProblem(await lock(EMAIL, busy, t), 429, 'AUD-1002');
    // So is another spelling of the same address: the limit is on the profile key, not on the text.
    expectProblem(await getSection(EMAIL, ` ${busy.toUpperCase()}`, 'attributes', SHOP_S, t), 429, 'AUD-1002');
    // Another key is not affected.
    expect((await getSection(EMAIL, other, 'attributes', SHOP_S, t)).status).toBe(200);

    server.clock.advance(1000);
    expect(await attrs(EMAIL, busy, SHOP_S, t)).toEqual({ [A_EMAIL]: busy, [A_FIRST]: 'Busy' });
  });
});

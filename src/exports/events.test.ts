import zlib from 'node:zlib';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  BLOG,
  CRM,
  EMAIL,
  EXPORT,
  exportHelpers,
  MANIFEST,
  NO_LIMITS,
  pollPath,
  SHOP,
  sleep,
  V,
  v2,
  VIP,
} from '../../test/exports.ts';
import type { Manifest } from '../definitions/schemas.ts';

// The profile in segment event export (SPEC §2.16, §4.7; docs/exports.md "Event export"), through
// the real HTTP interface and worker, its file compared with what the profiles hold as the
// profile routes read it.

const WRITER = `${V}.tags.user-created.writer`;
const PAGE_VIEW = `${V}.events.user-created.page-view`;
const PURCHASE = `${V}.events.user-created.purchase`;
const HIDDEN_VISIT = `${V}.events.user-created.hidden-visit`;
const COMMENT = `${V}.events.user-created.comment`;
const POINTS = `${V}.segments.user-created.points`;
const WEEK = 7 * 24 * 60 * 60 * 1000;
/** The event export's own limit lifted too, for the tests that are not about it. */
const LIFTED = { ...NO_LIMITS, event_export_requests_per_minute: null };

const [shopSection, blogSection] = MANIFEST.sections!;
const EVENTS_MANIFEST: Manifest = {
  ...MANIFEST,
  sections: [
    {
      ...shopSection,
      events: [
        { name: 'Page view', versions: [{ type: [{ name: 'url', type: 'Text' }] }] },
        {
          name: 'Purchase',
          versions: [
            { type: [{ name: 'amount', type: 'Number' }] },
            {
              type: [
                { name: 'amount', type: 'Number' },
                { name: 'currency', type: 'Text' },
              ],
            },
          ],
        },
        { name: 'Hidden visit', hidden: true, versions: [{ type: [{ name: 'url', type: 'Text' }] }] },
      ],
    },
    {
      ...blogSection,
      attributes: [{ name: 'Nickname', versions: [{ type: ['Text'] }] }],
      tags: [{ name: 'Writer' }],
      events: [{ name: 'Comment', versions: [{ type: [{ name: 'text', type: 'Text' }] }] }],
    },
  ],
  segments: [
    ...MANIFEST.segments!,
    {
      name: 'Points',
      section: SHOP,
      versions: [
        { query: `section({section}).attribute({attribute:${V}.attributes.user-created.points}).gt(100)` },
        { query: `section({section}).attribute({attribute:${V}.attributes.user-created.points}).gt(250)` },
      ],
    },
  ],
};

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});
const { account, ok, person, whenReady, rawGet, expectNothingQueued, withoutWorker, changeDefinitions } = exportHelpers(
  () => ({
    server,
    db,
  }),
);

/** An account with the events manifest, and the ids its tests need: sections, versions of Blog's attribute and of each event, the Points segment's versions. */
async function eventAccount(limits: Record<string, number | null> = LIFTED) {
  const a = await account(limits, EVENTS_MANIFEST);
  const get = async (path: string) => (await ok(server.request('GET', path, { token: a.token }), 200)).body;
  const sections = Object.fromEntries(
    (await get('/audience/sections')).items.map((s: { discriminator: string; id: string }) => [s.discriminator, s.id]),
  );
  const versions = (items: { discriminator: string; versions: { id: string }[] }[]) =>
    Object.fromEntries(items.map((i) => [i.discriminator, i.versions.map((v) => v.id)]));
  const events = {
    ...versions((await get(`/audience/sections/${SHOP}/events`)).items),
    ...versions((await get(`/audience/sections/${BLOG}/events`)).items),
  };
  // Lists leave hidden events out.
  const { rows } = await db.query(
    'select v.version_id::text as id from event_versions v join events e using (account_id, event_id) where e.account_id = $1::bigint and e.hidden',
    [a.accountId],
  );
  events[HIDDEN_VISIT] = [rows[0].id];
  const nickname = (await get(`/audience/sections/${BLOG}/attributes`)).items.find((x: { discriminator: string }) =>
    x.discriminator.endsWith('nickname'),
  ).versions[0].id as string;
  const points = (await get(`/audience/segments/${POINTS}`)).versions.map((v: { id: string }) => v.id) as string[];
  return { ...a, sections: sections as Record<string, string>, events, nickname, pointsSegment: points };
}
type EventAccount = Awaited<ReturnType<typeof eventAccount>>;

/** Adds events to a profile (keyed by email unless another keyspace is given) in a section: [event version id, ISO time, data]. */
async function addEvents(
  a: Account,
  key: string,
  section: string,
  items: [string, string, Record<string, unknown>][],
  keyspace = EMAIL,
): Promise<void> {
  await ok(
    server.request('POST', `/audience/keyspaces/${keyspace}/profiles/${key}/sections/${section}/events`, {
      token: a.token,
      body: { items: items.map(([version_id, event_time, data]) => ({ version_id, event_time, data })) },
    }),
    204,
  );
}

async function patch(
  a: Account,
  email: string,
  section: string,
  what: 'attributes' | 'tags',
  body: Record<string, unknown>,
  version = '/v2',
): Promise<void> {
  await ok(
    server.request(
      'PATCH',
      `${what === 'attributes' ? version : ''}/audience/keyspaces/${EMAIL}/profiles/${email}/sections/${section}/${what}`,
      {
        token: a.token,
        body,
        headers: { 'content-type': 'application/merge-patch+json' },
      },
    ),
    204,
  );
}

async function requestEventExport(a: Account, body: unknown): Promise<string> {
  const res = await ok(server.request('POST', '/audience/profiles/exports', { token: a.token, body }), 201);
  expect(Object.keys(res.body)).toEqual(['file_download_url']);
  expect(res.body.file_download_url).toMatch(/\/audience\/profiles\/reports\/[0-9a-f-]{36}$/);
  return res.body.file_download_url;
}

type Document = Record<
  string,
  { sections: Record<string, { attributes: Record<string, { value: unknown }>; events?: EventItem[] }> }
>;
interface EventItem {
  correlationId: string;
  sourceEventTime: number;
  typeId: string;
  createdAt: number;
  data: unknown;
}

/** The file of a ready event export, as sent without Accept-Encoding: uncompressed JSON (EXP-40). */
async function eventFile(a: Account, body: unknown): Promise<Document> {
  const url = await requestEventExport(a, body);
  await whenReady(a, url);
  const res = await rawGet(pollPath(url), { authorization: `Bearer ${a.token}` });
  expect(res.status, res.body.toString()).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json\b/);
  expect(res.headers['content-encoding']).toBeUndefined();
  return JSON.parse(res.body.toString());
}

/** The export key of the profile keyed by an email address. */
async function exportKeyOf(a: Account, email: string): Promise<string> {
  const { rows } = await db.query(
    `select p.export_key from profiles p join profile_identifiers i using (account_id, profile_id) join keyspaces k using (account_id, keyspace_id)
    where p.account_id = $1::bigint and k.discriminator = $2 and i.profile_key = $3`,
    [a.accountId, EMAIL, email],
  );
  return rows[0].export_key;
}

/**
 * What the file should hold for a profile in a section, read through the profile routes (by
 * export key): the wanted attributes it has a value of, the wanted tags it has set, and its events
 * of the wanted versions in [from, to), oldest first, in the file's form (SPEC §2.16, §6.4).
 */
async function expected(
  a: Account,
  exportKey: string,
  section: string,
  wanted: { attributes: string[]; tags: string[]; events?: { versions: string[]; from: number; to: number } },
) {
  const at = `/audience/keyspaces/${EXPORT}/profiles/${exportKey}/sections/${section}`;
  const attributes = (await ok(server.request('GET', `${at}/attributes`, { token: a.token }), 200)).body as Record<
    string,
    unknown
  >;
  const tags = (await ok(server.request('GET', `${at}/tags`, { token: a.token }), 200)).body as Record<string, boolean>;
  const values: Record<string, { value: unknown }> = {};
  for (const id of wanted.attributes)
    if (attributes[id] !== undefined && attributes[id] !== null) values[id] = { value: attributes[id] };
  for (const tag of wanted.tags) if (tags[tag] === true) values[tag] = { value: null };
  if (!wanted.events) return { attributes: values };
  const { versions, from, to } = wanted.events;
  const listed = (await ok(server.request('GET', `${at}/events`, { token: a.token }), 200)).body.items as {
    event_time: string;
    version_id: string;
    correlation_id: string;
    created_at: string;
    data: unknown;
  }[];
  const events = listed
    .filter((e) => versions.includes(e.version_id) && Date.parse(e.event_time) >= from && Date.parse(e.event_time) < to)
    .reverse()
    .map((e) => ({
      correlationId: e.correlation_id,
      sourceEventTime: Date.parse(e.event_time) < Date.UTC(2020, 0, 1) ? 0 : Date.parse(e.event_time),
      typeId: e.version_id,
      createdAt: Date.parse(e.created_at),
      data: e.data,
    }));
  return { attributes: values, events };
}

describe('profile in segment event export', () => {
  let a: EventAccount;
  const start = Date.parse('2026-03-02T00:00:00Z');
  const iso = (ms: number) => new Date(ms).toISOString();
  beforeAll(async () => {
    a = await eventAccount();
    const view = a.events[PAGE_VIEW][0];
    const [purchase1, purchase2] = a.events[PURCHASE];
    await person(a, 'ann@example.com', { points: 150, birthday: '1990-05-01', vip: true });
    await patch(a, 'ann@example.com', BLOG, 'attributes', { [a.nickname]: 'Annie' }, '');
    await patch(a, 'ann@example.com', BLOG, 'tags', { [WRITER]: true });
    await addEvents(a, 'ann@example.com', SHOP, [
      [view, iso(start - 1), { url: '/before' }],
      [view, iso(start), { url: '/first' }],
      [purchase1, iso(start + 1000), { amount: 10 }],
      [purchase2, iso(start + 2000), { amount: 20, currency: 'NOK' }],
      [view, iso(start + WEEK - 1), { url: '/last' }],
      [view, iso(start + WEEK), { url: '/after' }],
    ]);
    // An event of the hidden type, as one written before the type was hidden (the API takes no new ones).
    await db.query(
      `insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
      select p.account_id, p.profile_id, $2::bigint, $3::bigint, $4, now(), 'hidden-1', '{"url": "/hidden"}' from profiles p where p.account_id = $1::bigint and p.export_key = $5`,
      [
        a.accountId,
        a.sections[SHOP],
        a.events[HIDDEN_VISIT][0],
        iso(start + 5000),
        await exportKeyOf(a, 'ann@example.com'),
      ],
    );
    await addEvents(a, 'ann@example.com', BLOG, [[a.events[COMMENT][0], iso(start + 3000), { text: 'Nice' }]]);
    await person(a, 'bob@example.com', { points: 50 });
    // Bob's event from 2019: its source time is exported as 0 (SPEC §6.4).
    await addEvents(a, 'bob@example.com', SHOP, [
      [view, '2019-06-01T00:00:00Z', { url: '/old' }],
      [view, iso(start + 10), { url: '/bob' }],
    ]);
    await person(a, 'cid@example.com', { points: 300 });
    // A profile known by its CRM id merges into Cid's: the cluster is one profile, with that profile's events too.
    await ok(
      server.request('POST', `/audience/keyspaces/${CRM}/sections/${SHOP}/profiles`, {
        token: a.token,
        body: { profile_key: 'crm-1' },
      }),
      201,
    );
    await addEvents(a, 'crm-1', SHOP, [[view, iso(start + 20), { url: '/crm' }]], CRM);
    await ok(
      server.request('PUT', '/audience/profiles/merges', {
        token: a.token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: 'cid@example.com' },
            { keyspace_discriminator: CRM, profile_key: 'crm-1' },
          ],
        },
      }),
      204,
    );
  });

  it('EXP-24, EXP-29, EXP-30, EXP-31, EXP-40: 201 {file_download_url}; uncompressed JSON keyed by export key, each requested section with the attributes and tags the profile has and its events in the window, as the profile routes read them', async () => {
    const versions = [...a.events[PAGE_VIEW], ...a.events[PURCHASE], ...a.events[COMMENT]];
    const body = {
      attributes: [
        { section_discriminator: SHOP, attribute_version_id: a.v.points },
        { section_discriminator: SHOP, attribute_version_id: a.v.birthday },
        { section_discriminator: BLOG, attribute_version_id: a.nickname },
      ],
      tags: [
        { section_discriminator: SHOP, tag_discriminator: VIP },
        { section_discriminator: BLOG, tag_discriminator: WRITER },
      ],
      events: {
        start_at: '2019-01-01T00:00:00Z',
        end_at: iso(start + WEEK),
        types: versions.map((id) => ({
          section_discriminator: a.events[COMMENT].includes(id) ? BLOG : SHOP,
          event_version_id: id,
        })),
      },
    };
    const file = await eventFile(a, body);
    const keys = await Promise.all(['ann', 'bob', 'cid'].map((n) => exportKeyOf(a, `${n}@example.com`)));
    // The CRM profile is a member of Cid's cluster: not a profile of its own.
    expect(Object.keys(file).sort()).toEqual([...keys].sort());
    for (const key of keys) {
      expect(Object.keys(file[key])).toEqual(['sections']);
      expect(Object.keys(file[key].sections).sort()).toEqual([a.sections[SHOP], a.sections[BLOG]].sort());
      const window = { versions, from: Date.parse('2019-01-01T00:00:00Z'), to: start + WEEK };
      expect(file[key].sections[a.sections[SHOP]]).toEqual(
        await expected(a, key, SHOP, { attributes: [a.v.points, a.v.birthday], tags: [VIP], events: window }),
      );
      expect(file[key].sections[a.sections[BLOG]]).toEqual(
        await expected(a, key, BLOG, { attributes: [a.nickname], tags: [WRITER], events: window }),
      );
    }
    const [ann, bob, cid] = keys;
    // What that means here, spelled out.
    expect(file[ann].sections[a.sections[SHOP]].attributes).toEqual({
      [a.v.points]: { value: 150 },
      [a.v.birthday]: { value: '1990-05-01' },
      [VIP]: { value: null },
    });
    expect(file[ann].sections[a.sections[BLOG]].attributes).toEqual({
      [a.nickname]: { value: 'Annie' },
      [WRITER]: { value: null },
    });
    expect(file[ann].sections[a.sections[SHOP]].events!.map((e) => e.data)).toEqual([
      { url: '/before' },
      { url: '/first' },
      { amount: 10 },
      { amount: 20, currency: 'NOK' },
      { url: '/last' },
    ]);
    expect(file[ann].sections[a.sections[SHOP]].events![1]).toEqual({
      correlationId: expect.any(String),
      sourceEventTime: start,
      typeId: a.events[PAGE_VIEW][0],
      createdAt: expect.any(Number),
      data: { url: '/first' },
    });
    expect(file[ann].sections[a.sections[BLOG]].events!.map((e) => e.data)).toEqual([{ text: 'Nice' }]);
    expect(file[bob].sections[a.sections[SHOP]].events!.map((e) => [e.sourceEventTime, e.data])).toEqual([
      [0, { url: '/old' }],
      [start + 10, { url: '/bob' }],
    ]);
    expect(file[bob].sections[a.sections[BLOG]]).toEqual({ attributes: {}, events: [] });
    expect(file[cid].sections[a.sections[SHOP]].events!.map((e) => e.data)).toEqual([{ url: '/crm' }]);
    expect(file[cid].sections[a.sections[SHOP]].attributes[a.v.points]).toEqual({ value: 300 });
  });

  it('EXP-25, EXP-31: end_at defaults to one week after start_at; start inclusive, end exclusive', async () => {
    const file = await eventFile(a, {
      attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }],
      events: {
        start_at: iso(start),
        types: [{ section_discriminator: SHOP, event_version_id: a.events[PAGE_VIEW][0] }],
      },
    });
    const ann = await exportKeyOf(a, 'ann@example.com');
    expect(file[ann].sections[a.sections[SHOP]].events!.map((e) => e.data)).toEqual([
      { url: '/first' },
      { url: '/last' },
    ]);
    const shorter = await eventFile(a, {
      attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }],
      events: { start_at: iso(start - 1), end_at: iso(start + 1) },
    });
    expect(shorter[ann].sections[a.sections[SHOP]].events!.map((e) => e.data)).toEqual([
      { url: '/before' },
      { url: '/first' },
    ]);
  });

  it("EXP-25, EXP-28: without types, every visible event of the sections the request names (not the hidden event, not Blog's when only Shop is named)", async () => {
    const file = await eventFile(a, {
      tags: [{ section_discriminator: SHOP, tag_discriminator: VIP }],
      events: { start_at: iso(start), end_at: iso(start + 10_000) },
    });
    const ann = await exportKeyOf(a, 'ann@example.com');
    expect(Object.keys(file[ann].sections)).toEqual([a.sections[SHOP]]);
    expect(file[ann].sections[a.sections[SHOP]]).toEqual({
      attributes: { [VIP]: { value: null } },
      events: expect.any(Array),
    });
    expect(file[ann].sections[a.sections[SHOP]].events!.map((e) => e.data)).toEqual([
      { url: '/first' },
      { amount: 10 },
      { amount: 20, currency: 'NOK' },
    ]);
  });

  it('EXP-28, EXP-29: without events, sections hold attributes only; with no attribute and no tag, no profile', async () => {
    const file = await eventFile(a, {
      attributes: [{ section_discriminator: BLOG, attribute_version_id: a.nickname }],
    });
    const ann = await exportKeyOf(a, 'ann@example.com');
    expect(file[ann]).toEqual({
      sections: { [a.sections[BLOG]]: { attributes: { [a.nickname]: { value: 'Annie' } } } },
    });
    expect(Object.keys(file)).toHaveLength(3);
    expect(
      await eventFile(a, {
        events: {
          start_at: iso(start),
          types: [{ section_discriminator: SHOP, event_version_id: a.events[PAGE_VIEW][0] }],
        },
      }),
    ).toEqual({});
    expect(await eventFile(a, {})).toEqual({});
  });

  it('EXP-27: with segment_filter only the profiles matching it (its latest version, or the version named); without, every profile', async () => {
    const attributes = [{ section_discriminator: SHOP, attribute_version_id: a.v.points }];
    const points = async (file: Document) =>
      Object.values(file)
        .map((p) => p.sections[a.sections[SHOP]].attributes[a.v.points]?.value)
        .sort();
    expect(await points(await eventFile(a, { attributes }))).toEqual([150, 300, 50]);
    expect(
      await points(await eventFile(a, { attributes, segment_filter: { timezone: 'Europe/Oslo', discriminator: BIG } })),
    ).toEqual([150, 300]);
    expect(
      await points(await eventFile(a, { attributes, segment_filter: { timezone: 'UTC', discriminator: POINTS } })),
    ).toEqual([300]);
    expect(
      await points(
        await eventFile(a, {
          attributes,
          segment_filter: { timezone: 'UTC', discriminator: POINTS, version_id: a.pointsSegment[0] },
        }),
      ),
    ).toEqual([150, 300]);
  });

  it('EXP-36: Accept-Encoding gzip gives Content-Encoding gzip, which decompresses to the same document', async () => {
    const url = await requestEventExport(a, {
      attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }],
      events: { start_at: iso(start) },
    });
    await whenReady(a, url);
    const auth = { authorization: `Bearer ${a.token}` };
    const gzipped = await rawGet(pollPath(url), { ...auth, 'accept-encoding': 'gzip' });
    const plain = await rawGet(pollPath(url), auth);
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toMatch(/^application\/json\b/);
    expect(zlib.gunzipSync(gzipped.body).toString()).toBe(plain.body.toString());
    expect(Object.keys(JSON.parse(plain.body.toString()))).toHaveLength(3);
  });

  it('EXP-29: streamed from a cursor over many profiles (past a batch of the cursor and a piece of the document), every one once and whole', async () => {
    const b = await eventAccount();
    const count = 400;
    for (let i = 0; i < count; i++) {
      const email = `p${i}@example.com`;
      await person(b, email, { points: i });
      if (i % 4 === 0) await addEvents(b, email, SHOP, [[b.events[PAGE_VIEW][0], iso(start + i), { url: `/${i}` }]]);
    }
    // Two sections per profile and their events: more rows than one fetch of the cursor (1,000).
    const file = await eventFile(b, {
      attributes: [
        { section_discriminator: SHOP, attribute_version_id: b.v.points },
        { section_discriminator: BLOG, attribute_version_id: b.nickname },
      ],
      events: { start_at: iso(start) },
    });
    const profiles = Object.values(file);
    expect(profiles).toHaveLength(count);
    expect(
      profiles
        .map((p) => p.sections[b.sections[SHOP]].attributes[b.v.points].value)
        .sort((x, y) => Number(x) - Number(y)),
    ).toEqual(Array.from({ length: count }, (_, i) => i));
    expect(profiles.flatMap((p) => p.sections[b.sections[SHOP]].events!.map((e) => e.data))).toHaveLength(count / 4);
    // 500 writes one after the other: on a Citus cluster each profile write is several round trips.
  }, 120_000);
});

describe('event export body rules: a problem document and nothing queued', () => {
  const at = (section: string, id: string) => ({ section_discriminator: section, attribute_version_id: id });
  const cases: [string, (a: EventAccount) => Record<string, unknown>, number, string, RegExp][] = [
    [
      'EXP-26 over 75 attributes',
      (a) => ({ attributes: Array(76).fill(at(SHOP, a.v.points)) }),
      413,
      'AUD-1007',
      /attributes/,
    ],
    [
      'EXP-26 over 25 tags',
      () => ({ tags: Array(26).fill({ section_discriminator: SHOP, tag_discriminator: VIP }) }),
      413,
      'AUD-1007',
      /tags/,
    ],
    [
      'EXP-26 an attribute without its section',
      (a) => ({ attributes: [{ attribute_version_id: a.v.points }] }),
      400,
      'AUD-1003',
      /attributes\/0|attributes\[0\]|section_discriminator/,
    ],
    [
      'EXP-26 an unknown section',
      (a) => ({ attributes: [at(`${V}.sections.user-created.none`, a.v.points)] }),
      404,
      'AUD-1102',
      /attributes\[0\]\.section_discriminator/,
    ],
    [
      'EXP-26 an attribute version of another section',
      (a) => ({ attributes: [at(BLOG, a.v.points)] }),
      400,
      'AUD-1206',
      /attributes\[0\]\.attribute_version_id/,
    ],
    ['EXP-26 a hidden attribute', (a) => ({ attributes: [at(SHOP, a.v.hidden)] }), 400, 'AUD-1211', /attributes\[0\]/],
    [
      'EXP-26 a hidden tag',
      () => ({ tags: [{ section_discriminator: SHOP, tag_discriminator: `${V}.tags.user-created.hidden` }] }),
      400,
      'AUD-1218',
      /tags\[0\]\.tag_discriminator/,
    ],
    [
      'EXP-26 a tag of another section',
      () => ({ tags: [{ section_discriminator: BLOG, tag_discriminator: VIP }] }),
      400,
      'AUD-1218',
      /tags\[0\]\.tag_discriminator/,
    ],
    [
      'EXP-26 an unknown field in an attribute',
      (a) => ({ attributes: [{ ...at(SHOP, a.v.points), field_name: 'x' }] }),
      400,
      'AUD-0',
      /field_name/,
    ],
    [
      'EXP-25 events without start_at',
      () => ({ events: { end_at: '2026-01-01T00:00:00Z' } }),
      400,
      'AUD-1003',
      /start_at/,
    ],
    ['EXP-25 start_at not a date-time', () => ({ events: { start_at: 'yesterday' } }), 400, 'AUD-0', /start_at/],
    [
      'EXP-25 end_at before start_at',
      () => ({ events: { start_at: '2026-01-02T00:00:00Z', end_at: '2026-01-01T00:00:00Z' } }),
      400,
      'AUD-1910',
      /events\.end_at .* must be after events\.start_at/,
    ],
    [
      'EXP-25 end_at equal to start_at',
      () => ({ events: { start_at: '2026-01-01T00:00:00Z', end_at: '2026-01-01T00:00:00Z' } }),
      400,
      'AUD-1910',
      /end_at/,
    ],
    [
      'EXP-25 no event types',
      () => ({ events: { start_at: '2026-01-01T00:00:00Z', types: [] } }),
      400,
      'AUD-0',
      /types/,
    ],
    [
      'EXP-25 an unknown event version',
      () => ({
        events: {
          start_at: '2026-01-01T00:00:00Z',
          types: [{ section_discriminator: SHOP, event_version_id: '999999999' }],
        },
      }),
      400,
      'AUD-1220',
      /events\.types\[0\]\.event_version_id/,
    ],
    [
      'EXP-25 a hidden event',
      (a) => ({
        events: {
          start_at: '2026-01-01T00:00:00Z',
          types: [{ section_discriminator: SHOP, event_version_id: a.events[HIDDEN_VISIT][0] }],
        },
      }),
      400,
      'AUD-1220',
      /events\.types\[0\]/,
    ],
    [
      'EXP-25 an event of another section',
      (a) => ({
        events: {
          start_at: '2026-01-01T00:00:00Z',
          types: [{ section_discriminator: SHOP, event_version_id: a.events[COMMENT][0] }],
        },
      }),
      400,
      'AUD-1220',
      /events\.types\[0\]/,
    ],
    [
      'EXP-27 an unknown segment',
      () => ({ segment_filter: { timezone: 'UTC', discriminator: `${V}.segments.user-created.none` } }),
      400,
      'AUD-1711',
      /segment_filter/,
    ],
    [
      'EXP-27 a version of another segment',
      (a) => ({ segment_filter: { timezone: 'UTC', discriminator: BIG, version_id: a.pointsSegment[0] } }),
      400,
      'AUD-1713',
      /segment_filter/,
    ],
    [
      'EXP-27 an unknown time zone',
      () => ({ segment_filter: { timezone: 'Mars/Olympus', discriminator: BIG } }),
      400,
      'AUD-1712',
      /segment_filter\.timezone/,
    ],
    [
      'EXP-27 segment_filter without timezone',
      () => ({ segment_filter: { discriminator: BIG } }),
      400,
      'AUD-1003',
      /timezone/,
    ],
  ];
  for (const [name, body, status, code, detail] of cases) {
    it(name, async () => {
      const a = await eventAccount();
      const res = await server.request('POST', '/audience/profiles/exports', { token: a.token, body: body(a) });
      expect(expectProblem(res, status, code)).toMatch(detail);
      await expectNothingQueued(a);
    });
  }
});

describe('event export: failure, access and limits', () => {
  it('EXP-34: an export that fails (its request no longer holds when the worker takes it) answers 503 in both poll forms, and goes on doing so', async () => {
    const a = await eventAccount();
    await person(a, 'ann@example.com', { points: 1 });
    const url = await withoutWorker(async () => {
      const created = await requestEventExport(a, {
        attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }],
      });
      // As if the attribute had been hidden since the request: the definitions changed, and the request names a hidden one.
      await db.query(
        `update exports set request = json_build_object('attributes', json_build_array(json_build_object('section_discriminator', $2::text, 'attribute_version_id', $3::text))) where account_id = $1::bigint`,
        [a.accountId, SHOP, a.v.hidden],
      );
      await changeDefinitions(a);
      return created;
    });
    let res = await server.request('GET', pollPath(url), { token: a.token });
    for (let i = 0; i < 200 && res.status === 404; i++) {
      await sleep(25);
      res = await server.request('GET', pollPath(url), { token: a.token });
    }
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(
      /attributes\[0\]\.attribute_version_id: the attribute .* is hidden\); request a new export/,
    );
    expectProblem(await server.request('GET', v2(url), { token: a.token }), 503, 'AUD-1904');
    expectProblem(await server.request('GET', pollPath(url), { token: a.token }), 503, 'AUD-1904');
  });

  it('EXP-41: a key restricted to some sections is refused the event export (403) and nothing is queued', async () => {
    const a = await eventAccount();
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    const res = await server.request('POST', '/audience/profiles/exports', {
      token: restricted,
      body: { attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }] },
    });
    expectProblem(res, 403, 'AUD-1107');
    await expectNothingQueued(a);
  });

  it('LIM-05: at most event_export_requests_per_minute event exports (1 by default); beyond, 429 with Retry-After and nothing queued; a minute later, one more', async () => {
    const a = await eventAccount({ ...NO_LIMITS, event_export_requests_per_minute: 1 });
    const body = { attributes: [{ section_discriminator: SHOP, attribute_version_id: a.v.points }] };
    await requestEventExport(a, body);
    const refused = await server.request('POST', '/audience/profiles/exports', { token: a.token, body });
    expectProblem(refused, 429, 'AUD-1002');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const { rows } = await db.query('select count(*)::int as n from exports where account_id = $1::bigint', [
      a.accountId,
    ]);
    expect(rows[0].n).toBe(1);
    // The other exports have their own limit.
    await ok(
      server.request('POST', '/audience/profiles/reports/segments', {
        token: a.token,
        body: { section_discriminator: SHOP, segment: { timezone: 'UTC', segment_discriminator: BIG } },
      }),
      201,
    );
    server.clock.advance(60_000);
    await requestEventExport(a, body);
  });
});

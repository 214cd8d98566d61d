import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { parse as parseCsv } from 'csv-parse/sync';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import {
  type Account,
  BIG,
  BLOG,
  DAY,
  EMAIL,
  exportHelpers,
  MANIFEST,
  NEWS,
  NO_LIMITS,
  SHOP,
  V,
  VIP,
} from '../../test/exports.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { EMAIL_EVENT_COLUMNS } from './email-events.ts';

// The email event export (SPEC §2.16, §3.3, §4.8; docs/activities.md "The email event export
// file") through the real HTTP interface and worker: events ingested through the operator's
// ingestion endpoint, the file downloaded from the URL of a status answer, decompressed and
// parsed back, column by column.

const LIFTED = { ...NO_LIMITS, event_export_requests_per_minute: null };
const DIGEST = `${V}.topics.user-created.digest`;
const WRITER = `${V}.tags.user-created.writer`;
const EMAIL_EVENTS_MANIFEST: Manifest = {
  ...MANIFEST,
  sections: [
    MANIFEST.sections![0],
    {
      ...MANIFEST.sections![1],
      attributes: [{ name: 'Nickname', versions: [{ type: ['Text'] }] }],
      tags: [{ name: 'Writer' }],
    },
  ],
};

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  t0 = server.clock.now;
  db = d;
});
const { account, ok, person, rawGet, expectNothingQueued, withoutWorker, changeDefinitions } = exportHelpers(() => ({
  server,
  db,
}));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The test clock's time when the file starts: fixtures are placed around it. */
let t0: number;
/** An ISO time `days` (may be fractional) after t0. */
const at = (days: number) => new Date(t0 + days * DAY).toISOString();
const ms = (iso: string) => String(Date.parse(iso));

async function activity(a: Account, id: string, body: Record<string, unknown>): Promise<void> {
  await ok(
    server.admin('PUT', `/admin/accounts/${a.accountId}/activities/${id}`, { kind: 'email', status: 'sent', ...body }),
    201,
  );
}

/** Ingests events through the operator's endpoint (keyed by email); answers the server time they were received at. */
async function ingest(a: Account, items: Record<string, unknown>[]): Promise<string> {
  const res = await ok(
    server.admin('POST', `/admin/accounts/${a.accountId}/activity-events`, {
      items: items.map((i) => ({ keyspace_discriminator: EMAIL, ...i })),
    }),
    200,
  );
  expect(res.body.recorded, res.text).toBe(items.length);
  return String(server.clock.now);
}

async function requestReport(a: Account, body: unknown): Promise<string> {
  const res = await ok(server.request('POST', '/emails/reports', { token: a.token, body }), 201);
  expect(Object.keys(res.body)).toEqual(['report_id']);
  expect(typeof res.body.report_id).toBe('string');
  return res.body.report_id;
}

/** Status calls until the report is no longer `requested` (a few seconds at most). */
async function settled(a: Account, id: string, query = ''): Promise<{ body: any; headers: Headers }> {
  for (let i = 0; i < 400; i++) {
    const res = await ok(server.request('GET', `/emails/reports/${id}${query}`, { token: a.token }), 200);
    if (res.body.result.status !== 'requested') return res;
    await sleep(25);
  }
  throw new Error(`report ${id} not settled`);
}

/** The path and query of a download URL. */
const local = (url: string) => {
  const u = new URL(url);
  return u.pathname + u.search;
};

/** Downloads a file: its bytes must be gzip; answers header and rows of the CSV inside. */
async function fetchFile(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ header: string[]; rows: string[][] }> {
  const res = await rawGet(local(url), headers);
  expect(res.status, res.body.toString()).toBe(200);
  expect(res.headers['content-type']).toBe('application/gzip');
  expect(res.headers['content-encoding']).toBeUndefined();
  const [header, ...rows] = parseCsv(zlib.gunzipSync(res.body), { relax_column_count: false }) as string[][];
  return { header, rows };
}

/** Requests a report, waits for it, and downloads its file. */
async function exportFile(a: Account, body: unknown) {
  const id = await requestReport(a, body);
  const status = await settled(a, id);
  expect(status.body.result.status, JSON.stringify(status.body)).toBe('completed');
  return fetchFile(status.body.result.file_download_url);
}

/** The rows as objects by column name. */
const records = (file: { header: string[]; rows: string[][] }) =>
  file.rows.map((r) => Object.fromEntries(file.header.map((h, i) => [h, r[i]])));

const BLANK = Object.fromEntries(EMAIL_EVENT_COLUMNS.map((c) => [c, '']));

describe('the file', () => {
  let a: Account;
  let shopTime: string;
  let blogTime: string;
  beforeAll(async () => {
    a = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    await person(a, 'ann@example.com', { points: 150, birthday: '1990-04-01', vip: true });
    await person(a, 'bob@example.com', { points: 5 });
    await activity(a, 'spring', {
      section_discriminator: SHOP,
      name: 'Spring sale',
      sender_name: 'Shop',
      sender_email_address: 'news@shop.example',
      email_subject: 'Spring is here',
    });
    await activity(a, 'spring-b', {
      section_discriminator: SHOP,
      name: 'Spring sale B',
      sender_name: 'Shop team',
      sender_email_address: 'news@shop.example',
      email_subject: 'Spring, version B',
    });
    await activity(a, 'digest', {
      section_discriminator: BLOG,
      name: 'Weekly digest',
      sender_name: 'Blog',
      sender_email_address: 'digest@blog.example',
      email_subject: 'This week',
    });
    await ok(
      server.admin('PUT', `/admin/accounts/${a.accountId}/activities/sms-1`, {
        kind: 'sms',
        section_discriminator: SHOP,
        name: 'Text',
        text: 'Hi',
      }),
      201,
    );
    const spring = { activity_id: 'spring' };
    shopTime = await ingest(a, [
      { ...spring, type: 'SENT', profile_key: 'ann@example.com', correlation_id: 'c1', event_time: at(-10) },
      { ...spring, type: 'DELIVERED', profile_key: 'ann@example.com', correlation_id: 'c1', event_time: at(-9.9) },
      {
        ...spring,
        type: 'OPENED',
        profile_key: 'ann@example.com',
        correlation_id: 'c1:o',
        event_time: at(-9),
        device: 'MOBILE',
        location: 'NO',
      },
      {
        ...spring,
        type: 'CLICKED',
        profile_key: 'ann@example.com',
        correlation_id: 'c1:k',
        event_time: at(-8),
        device: 'DESKTOP;Linux',
        location: 'SE',
        link_id: 'cta',
        link_url: 'https://shop.example/sale',
        link_title: 'The "big",\r\nsale',
      },
      {
        ...spring,
        type: 'SENT',
        profile_key: 'bob@example.com',
        correlation_id: 'c2',
        event_time: at(-7),
        split_id: 'spring-b',
        variation: 'B',
      },
      {
        ...spring,
        type: 'BOUNCED',
        profile_key: 'bob@example.com',
        correlation_id: 'c2:b',
        event_time: at(-6.9),
        split_id: 'spring-b',
        variation: 'B',
        bounce_code: 2001,
      },
      {
        ...spring,
        type: 'UNSUBSCRIBED',
        profile_key: 'bob@example.com',
        correlation_id: 'c2:u',
        event_time: at(-6),
        unsubscribe_topic: NEWS,
      },
      { ...spring, type: 'ABUSE', profile_key: 'bob@example.com', correlation_id: 'c2:a', event_time: at(-5) },
      {
        ...spring,
        type: 'SENT',
        profile_key: 'carl@example.com',
        correlation_id: 'c3',
        event_time: at(-4),
        split_id: 'spring',
        variation: 'A',
      },
      // No source time: exported as 0, and in the window by the server's time.
      { ...spring, type: 'DELIVERED', profile_key: 'carl@example.com', correlation_id: 'c3' },
      // Outside the window (before it; at its end, which it excludes).
      { ...spring, type: 'OPENED', profile_key: 'carl@example.com', correlation_id: 'c3:early', event_time: at(-40) },
      { ...spring, type: 'OPENED', profile_key: 'carl@example.com', correlation_id: 'c3:late', event_time: at(1) },
      // Not an email activity's event.
      { activity_id: 'sms-1', type: 'SENT', profile_key: 'ann@example.com', correlation_id: 's1', event_time: at(-3) },
    ]);
    server.clock.advance(1000);
    blogTime = await ingest(a, [
      {
        activity_id: 'digest',
        type: 'OPENED',
        profile_key: 'ann@example.com',
        correlation_id: 'd1',
        event_time: at(-2),
        device: 'TABLET',
        location: 'DE',
      },
    ]);
  });
  const window = () => ({ start_at: at(-30), end_at: at(1) });

  it('EEX-01, EEX-07, EEX-08, EEX-09, EEX-16: 201 {report_id}; the status turns completed; the file is gzip-compressed CSV with the default columns in order', async () => {
    const id = await requestReport(a, window());
    const status = await settled(a, id);
    expect(Object.keys(status.body)).toEqual(['report_id', 'result']);
    expect(status.body.report_id).toBe(id);
    expect(Object.keys(status.body.result).sort()).toEqual([
      'file_download_url',
      'file_download_url_expires_at',
      'file_expires_at',
      'message',
      'status',
    ]);
    expect(status.body.result).toMatchObject({ status: 'completed', message: null });
    const file = await fetchFile(status.body.result.file_download_url);
    expect(file.header).toEqual([
      'activity_id',
      'split_id',
      'activity_name',
      'split_activity_name',
      'sender',
      'subject',
      'address',
      'variation',
      'type',
      'correlation_id',
      'event_time',
      'server_time',
      'device',
      'location',
      'link_id',
      'link_url',
      'link_title',
      'bounce_code',
      'unsubscribe_topic',
      'abuse_section',
    ]);
    expect(file.rows).toHaveLength(11);
  });

  it("EEX-17, EEX-18, EEX-19, EEX-20, EEX-21, EEX-22, EEX-23, EEX-24, EEX-25, EEX-26, EEX-28: every column of every row, against the ingested events; only the window's email events", async () => {
    const rows = records(await exportFile(a, window()));
    const spring = {
      ...BLANK,
      activity_id: 'spring',
      split_id: 'spring',
      activity_name: 'Spring sale',
      split_activity_name: 'Spring sale',
      sender: 'Shop',
      subject: 'Spring is here',
      server_time: shopTime,
    };
    const splitB = {
      ...spring,
      split_id: 'spring-b',
      split_activity_name: 'Spring sale B',
      sender: 'Shop team',
      subject: 'Spring, version B',
      variation: 'B',
    };
    const ann = { address: 'ann@example.com' };
    const bob = { address: 'bob@example.com' };
    const carl = { address: 'carl@example.com' };
    expect(rows).toEqual([
      { ...spring, ...ann, type: 'SENT', correlation_id: 'c1', event_time: ms(at(-10)) },
      { ...spring, ...ann, type: 'DELIVERED', correlation_id: 'c1', event_time: ms(at(-9.9)) },
      {
        ...spring,
        ...ann,
        type: 'OPENED',
        correlation_id: 'c1:o',
        event_time: ms(at(-9)),
        device: 'MOBILE',
        location: 'NO',
      },
      {
        ...spring,
        ...ann,
        type: 'CLICKED',
        correlation_id: 'c1:k',
        event_time: ms(at(-8)),
        device: 'DESKTOP;Linux',
        location: 'SE',
        link_id: 'cta',
        link_url: 'https://shop.example/sale',
        link_title: 'The "big",\r\nsale',
      },
      { ...splitB, ...bob, type: 'SENT', correlation_id: 'c2', event_time: ms(at(-7)) },
      { ...splitB, ...bob, type: 'BOUNCED', correlation_id: 'c2:b', event_time: ms(at(-6.9)), bounce_code: '2001' },
      {
        ...spring,
        ...bob,
        type: 'UNSUBSCRIBED',
        correlation_id: 'c2:u',
        event_time: ms(at(-6)),
        unsubscribe_topic: NEWS,
      },
      { ...spring, ...bob, type: 'ABUSE', correlation_id: 'c2:a', event_time: ms(at(-5)), abuse_section: SHOP },
      // The winning split: split_id is the activity's id.
      { ...spring, ...carl, type: 'SENT', correlation_id: 'c3', event_time: ms(at(-4)), variation: 'A' },
      { ...spring, ...carl, type: 'DELIVERED', correlation_id: 'c3', event_time: '0' },
      // Sections in the order of their ids: Blog after Shop.
      {
        ...BLANK,
        ...ann,
        activity_id: 'digest',
        split_id: 'digest',
        activity_name: 'Weekly digest',
        split_activity_name: 'Weekly digest',
        sender: 'Blog',
        subject: 'This week',
        type: 'OPENED',
        correlation_id: 'd1',
        event_time: ms(at(-2)),
        server_time: blogTime,
        device: 'TABLET',
        location: 'DE',
      },
    ]);
  });

  it('EEX-20: event_time is 0 for a source time before 2020', async () => {
    await activity(a, 'old', { section_discriminator: SHOP, name: 'Old', sender_name: 'Shop', email_subject: 'Old' });
    await ingest(a, [
      {
        activity_id: 'old',
        type: 'SENT',
        profile_key: 'ann@example.com',
        correlation_id: 'o1',
        event_time: '2019-12-31T23:59:59.999Z',
      },
      {
        activity_id: 'old',
        type: 'DELIVERED',
        profile_key: 'ann@example.com',
        correlation_id: 'o1',
        event_time: '2020-01-01T00:00:00.000Z',
      },
    ]);
    const rows = records(await exportFile(a, { start_at: '2019-12-01T00:00:00Z', end_at: '2020-02-01T00:00:00Z' }));
    expect(rows.map((r) => [r.type, r.event_time])).toEqual([
      ['SENT', '0'],
      ['DELIVERED', String(Date.UTC(2020, 0, 1))],
    ]);
  });

  it('EEX-27: mapped columns headed "<field_name> (version_id: <id>)", in the order of the request, values of the event\'s profile, dates as the attribute type gives them, TAG for a set tag', async () => {
    const blogAttributes = (
      await ok(server.request('GET', `/audience/sections/${BLOG}/attributes`, { token: a.token }), 200)
    ).body.items as { discriminator: string; versions: { id: string }[] }[];
    const nickname = blogAttributes.find((x) => x.discriminator.endsWith('.nickname'))!.versions[0].id;
    await ok(
      server.request('PATCH', `/v2/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${BLOG}/attributes`, {
        token: a.token,
        body: { [`${V}.attributes.user-created.nickname`]: 'annie' },
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      204,
    );
    await ok(
      server.request('PATCH', `/audience/keyspaces/${EMAIL}/profiles/bob@example.com/sections/${BLOG}/tags`, {
        token: a.token,
        body: { [WRITER]: true },
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      204,
    );
    const file = await exportFile(a, {
      ...window(),
      additional_attribute_mappings: [
        { field_name: 'Points', section_discriminator: SHOP, attribute_version_id: a.v.points },
        { field_name: 'Birthday', section_discriminator: SHOP, attribute_version_id: a.v.birthday },
        { field_name: 'Nick', section_discriminator: BLOG, attribute_version_id: nickname },
      ],
      additional_tag_mappings: [
        { field_name: 'VIP', section_discriminator: SHOP, tag_discriminator: VIP },
        { field_name: 'Writer', section_discriminator: BLOG, tag_discriminator: WRITER },
      ],
    });
    expect(file.header.slice(EMAIL_EVENT_COLUMNS.length)).toEqual([
      `Points (version_id: ${a.v.points})`,
      `Birthday (version_id: ${a.v.birthday})`,
      `Nick (version_id: ${nickname})`,
      `VIP (version_id: ${VIP})`,
      `Writer (version_id: ${WRITER})`,
    ]);
    const mapped = file.rows.map((r) => [r[6], ...r.slice(EMAIL_EVENT_COLUMNS.length)]);
    const ann = ['ann@example.com', '150', '1990-04-01', 'annie', 'TAG', ''];
    const bob = ['bob@example.com', '5', '', '', '', 'TAG'];
    const carl = ['carl@example.com', '', '', '', '', ''];
    expect(mapped).toEqual([ann, ann, ann, ann, bob, bob, bob, bob, carl, carl, ann]);
  });

  it('EEX-06: segment_filter keeps the events of the profiles in the segment', async () => {
    const rows = records(
      await exportFile(a, { ...window(), segment_filter: { timezone: 'Europe/Oslo', discriminator: BIG } }),
    );
    expect(rows.map((r) => r.correlation_id)).toEqual(['c1', 'c1', 'c1:o', 'c1:k', 'd1']);
    expect(new Set(rows.map((r) => r.address))).toEqual(new Set(['ann@example.com']));
  });
});

describe('the request', () => {
  let a: Account;
  beforeAll(async () => {
    a = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
  });
  const start = '2026-01-31T10:00:00.000Z';

  /** A refused request: its problem names the field, and nothing is stored or queued. */
  async function refused(body: unknown, status: number, code: string, field: string): Promise<void> {
    const detail = expectProblem(
      await server.request('POST', '/emails/reports', { token: a.token, body }),
      status,
      code,
    );
    expect(detail).toContain(field);
    await expectNothingQueued(a);
  }

  it('EEX-02: start_at is required and must be a date-time (400 naming it); nothing queued', async () => {
    await refused({}, 400, 'AUD-1003', 'start_at');
    await refused({ start_at: 'yesterday' }, 400, 'AUD-0', 'start_at');
    await refused({ start_at: start, end_at: '2026-13-01T00:00:00Z' }, 400, 'AUD-0', 'end_at');
  });

  it('EEX-03: a window of at most three months, end_at not before start_at (400); exactly three months is accepted', async () => {
    await refused({ start_at: start, end_at: '2026-01-31T09:59:59.999Z' }, 400, 'AUD-1910', 'end_at');
    // Three calendar months from January 31 end on April 30, the last day of that month.
    await refused({ start_at: start, end_at: '2026-04-30T10:00:00.001Z' }, 400, 'AUD-1911', 'end_at');
    await requestReport(a, { start_at: start, end_at: '2026-04-30T10:00:00.000Z' });
    await requestReport(a, { start_at: start, end_at: start });
  });

  it('EEX-04: 75 attribute and 25 tag mappings are accepted; 76 or 26 are 413 naming the list; nothing queued', async () => {
    const b = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    const attributes = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        field_name: `a${i}`,
        section_discriminator: SHOP,
        attribute_version_id: b.v.points,
      }));
    const tags = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        field_name: `t${i}`,
        section_discriminator: SHOP,
        tag_discriminator: VIP,
      }));
    for (const [body, field] of [
      [{ additional_attribute_mappings: attributes(76) }, 'additional_attribute_mappings'],
      [{ additional_tag_mappings: tags(26) }, 'additional_tag_mappings'],
    ] as const) {
      const detail = expectProblem(
        await server.request('POST', '/emails/reports', { token: b.token, body: { start_at: start, ...body } }),
        413,
        'AUD-1007',
      );
      expect(detail).toContain(field);
    }
    await expectNothingQueued(b);
    await requestReport(b, {
      start_at: start,
      additional_attribute_mappings: attributes(75),
      additional_tag_mappings: tags(25),
    });
  });

  it('EEX-05: mappings spanning more than 25 sections are 413; 25 sections are accepted', async () => {
    const sections = Array.from({ length: 26 }, (_, i) => ({
      name: `S${i}`,
      attributes: [{ name: 'Score', versions: [{ type: ['Number' as const] }] }],
    }));
    const b = await server.login({ sections }, LIFTED);
    const mappings = await Promise.all(
      sections.map(async (s, i) => {
        const discriminator = `${V}.sections.user-created.s${i}`;
        const items = (
          await ok(server.request('GET', `/audience/sections/${discriminator}/attributes`, { token: b.token }), 200)
        ).body.items as { discriminator: string; versions: { id: string }[] }[];
        return {
          field_name: s.name,
          section_discriminator: discriminator,
          attribute_version_id: items.find((x) => x.discriminator.endsWith('.score'))!.versions[0].id,
        };
      }),
    );
    const detail = expectProblem(
      await server.request('POST', '/emails/reports', {
        token: b.token,
        body: { start_at: start, additional_attribute_mappings: mappings },
      }),
      413,
      'AUD-1007',
    );
    expect(detail).toContain('26 sections');
    await expectNothingQueued({ ...b, v: {} });
    await requestReport({ ...b, v: {} }, { start_at: start, additional_attribute_mappings: mappings.slice(0, 25) });
  });

  it('refuses mappings and segment filters the definitions do not hold, naming the field (400, 404); nothing queued', async () => {
    a = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    const attribute = (over: Record<string, string>) => ({
      start_at: start,
      additional_attribute_mappings: [
        { field_name: 'x', section_discriminator: SHOP, attribute_version_id: a.v.points, ...over },
      ],
    });
    await refused(
      attribute({ section_discriminator: `${V}.sections.user-created.nowhere` }),
      404,
      'AUD-1102',
      'additional_attribute_mappings[0].section_discriminator',
    );
    await refused(
      attribute({ attribute_version_id: '999999' }),
      400,
      'AUD-1206',
      'additional_attribute_mappings[0].attribute_version_id',
    );
    await refused(
      attribute({ attribute_version_id: a.v.hidden }),
      400,
      'AUD-1211',
      'additional_attribute_mappings[0].attribute_version_id',
    );
    await refused(attribute({ field_name: '' }), 400, 'AUD-0', 'additional_attribute_mappings[0].field_name');
    await refused(
      {
        start_at: start,
        additional_tag_mappings: [
          { field_name: 'x', section_discriminator: SHOP, tag_discriminator: `${V}.tags.user-created.hidden` },
        ],
      },
      400,
      'AUD-1218',
      'additional_tag_mappings[0].tag_discriminator',
    );
    await refused(
      { start_at: start, additional_tag_mappings: [{ field_name: 'x', section_discriminator: SHOP }] },
      400,
      'AUD-1003',
      'additional_tag_mappings[0].tag_discriminator',
    );
    await refused(
      {
        start_at: start,
        additional_attribute_mappings: [
          { field_name: 'x', section_discriminator: SHOP, attribute_version_id: a.v.points },
          { field_name: 'x', section_discriminator: SHOP, attribute_version_id: a.v.points },
        ],
      },
      400,
      'AUD-1908',
      'additional_attribute_mappings[1]',
    );
    await refused(
      { start_at: start, segment_filter: { timezone: 'UTC', discriminator: `${V}.segments.user-created.none` } },
      400,
      'AUD-1711',
      'segment_filter',
    );
    await refused(
      { start_at: start, segment_filter: { timezone: 'Mars/Olympus', discriminator: BIG } },
      400,
      'AUD-1712',
      'segment_filter.timezone',
    );
    await refused(
      { start_at: start, segment_filter: { discriminator: BIG } },
      400,
      'AUD-1003',
      'segment_filter.timezone',
    );
  });

  it('LIM-05: a request refused for its input (400) spends none of the event export limit; the corrected one a second later is served', async () => {
    const b = await account({ ...NO_LIMITS, event_export_requests_per_minute: 1 }, EMAIL_EVENTS_MANIFEST);
    const post = (body: unknown) => server.request('POST', '/emails/reports', { token: b.token, body });
    // A four-month window, then a date that is none: both refused for what they say.
    expectProblem(await post({ start_at: start, end_at: '2026-05-31T10:00:00.000Z' }), 400, 'AUD-1911');
    expectProblem(await post({ start_at: 'last spring' }), 400, 'AUD-0');
    server.clock.advance(1000);
    await requestReport(b, { start_at: start, end_at: '2026-04-30T10:00:00.000Z' });
    // The one a minute is spent now.
    expectProblem(await post({ start_at: start }), 429, 'AUD-1002');
    server.clock.advance(60_000);
  });

  it('needs a key granted every section (403); spends the event export limit, 1 a minute (429); holds a pending place (429)', async () => {
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    expectProblem(
      await server.request('POST', '/emails/reports', { token: restricted, body: { start_at: start } }),
      403,
      'AUD-1107',
    );
    const b = await account({ ...NO_LIMITS, event_export_requests_per_minute: 1 }, EMAIL_EVENTS_MANIFEST);
    await requestReport(b, { start_at: start });
    const limited = await server.request('POST', '/emails/reports', { token: b.token, body: { start_at: start } });
    expectProblem(limited, 429, 'AUD-1002');
    expect(limited.headers.get('retry-after')).toBeTruthy();
    server.clock.advance(60_000);
    const c = await account({ ...LIFTED, pending_exports: 1 }, EMAIL_EVENTS_MANIFEST);
    await withoutWorker(async () => {
      await requestReport(c, { start_at: start });
      expectProblem(
        await server.request('POST', '/emails/reports', { token: c.token, body: { start_at: start } }),
        429,
        'AUD-1905',
      );
    });
  });
});

describe('the status and the download URL', () => {
  let a: Account;
  beforeAll(async () => {
    a = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    await activity(a, 'news', {
      section_discriminator: SHOP,
      name: 'News',
      sender_name: 'Shop',
      email_subject: 'News',
    });
    await ingest(a, [
      { activity_id: 'news', type: 'SENT', profile_key: 'ann@example.com', correlation_id: 'n1', event_time: at(-1) },
    ]);
  });
  const body = () => ({ start_at: at(-2) });

  it('EEX-08: requested while the export is queued or written, then completed; a key restricted to some sections gets 403', async () => {
    const id = await withoutWorker(async () => {
      const created = await requestReport(a, body());
      const res = await ok(server.request('GET', `/emails/reports/${created}`, { token: a.token }), 200);
      expect(res.body).toEqual({
        report_id: created,
        result: {
          status: 'requested',
          message: null,
          file_download_url: null,
          file_download_url_expires_at: null,
          file_expires_at: null,
        },
      });
      return created;
    });
    expect((await settled(a, id)).body.result.status).toBe('completed');
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    expectProblem(await server.request('GET', `/emails/reports/${id}`, { token: restricted }), 403, 'AUD-1107');
  });

  it('EEX-08: a report that cannot be written turns error, with the reason in message', async () => {
    const id = await withoutWorker(async () => {
      const created = await requestReport(a, body());
      // As if the attribute had been hidden since the request: the definitions changed, and the request names a hidden one.
      await db.query(
        `update exports set request = json_build_object('start_at', $2::text, 'additional_attribute_mappings', json_build_array(json_build_object('field_name', 'x', 'section_discriminator', $3::text, 'attribute_version_id', $4::text))) where account_id = $1::bigint and export_id = $5::uuid`,
        [a.accountId, at(-2), SHOP, a.v.hidden, created],
      );
      await changeDefinitions(a);
      return created;
    });
    const status = await settled(a, id);
    expect(status.body.result).toMatchObject({ status: 'error', file_download_url: null });
    expect(status.body.result.message).toMatch(
      /additional_attribute_mappings\[0\]\.attribute_version_id: the attribute .* is hidden/,
    );
  });

  it("EEX-12: an unknown report id is 404; so is the id of another kind of export, and another account's report", async () => {
    expectProblem(await server.request('GET', '/emails/reports/nope', { token: a.token }), 404, 'AUD-1903');
    expectProblem(
      await server.request('GET', `/emails/reports/${crypto.randomUUID()}`, { token: a.token }),
      404,
      'AUD-1903',
    );
    const profileExport = (
      await ok(server.request('POST', '/audience/profiles/exports', { token: a.token, body: {} }), 201)
    ).body.file_download_url as string;
    expectProblem(
      await server.request('GET', `/emails/reports/${new URL(profileExport).pathname.split('/').pop()}`, {
        token: a.token,
      }),
      404,
      'AUD-1903',
    );
    const id = await requestReport(a, body());
    const other = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    expectProblem(await server.request('GET', `/emails/reports/${id}`, { token: other.token }), 404, 'AUD-1903');
    // Nor do the poll URLs of the other exports serve it.
    expectProblem(
      await server.request('GET', `/v2/audience/profiles/reports/${id}`, { token: a.token }),
      404,
      'AUD-1903',
    );
  });

  it('EEX-15, EEX-10: the URL carries its own credential (no bearer token); each status call issues a new one; past its expiry it is refused, and a new status call gives one that works', async () => {
    const id = await requestReport(a, body());
    const first = (await settled(a, id)).body.result;
    const url = new URL(first.file_download_url);
    expect(url.searchParams.get('token')).toBeTruthy();
    expect(Date.parse(first.file_download_url_expires_at)).toBe(server.clock.now + 15 * 60 * 1000);
    const file = await fetchFile(first.file_download_url);
    expect(file.rows.map((r) => r[9])).toEqual(['n1']);
    server.clock.advance(1);
    const second = (await settled(a, id)).body.result;
    expect(second.file_download_url).not.toBe(first.file_download_url);
    expect(second.file_expires_at).toBe(first.file_expires_at);
    // A changed or missing credential is refused.
    const tampered = `${url.pathname}?token=${url.searchParams.get('token')!.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'))}`;
    expect((await rawGet(tampered, {})).status).toBe(403);
    expect((await rawGet(url.pathname, {})).status).toBe(403);
    expect((await rawGet(local(first.file_download_url).replace(`/${a.accountId}/`, '/999999999/'), {})).status).toBe(
      403,
    );
    server.clock.advance(15 * 60 * 1000);
    // The first has expired, the second (issued 1 ms later) not yet.
    const expired = await server.request('GET', local(first.file_download_url));
    expect(expectProblem(expired, 403, 'AUD-1912')).toMatch(/expired/);
    expect((await fetchFile(second.file_download_url)).rows).toEqual(file.rows);
    server.clock.advance(1);
    expectProblem(await server.request('GET', local(second.file_download_url)), 403, 'AUD-1912');
    const third = (await settled(a, id)).body.result;
    expect((await fetchFile(third.file_download_url)).rows).toEqual(file.rows);
  });

  it('EEX-13, EEX-14: with header_auth=true the URL carries no credential; the token of the x-vendor-auth header of the status answer is needed to download', async () => {
    const id = await requestReport(a, body());
    const status = await settled(a, id, '?header_auth=true');
    const token = status.headers.get('x-vendor-auth');
    expect(token).toBeTruthy();
    const url = new URL(status.body.result.file_download_url);
    expect(url.search).toBe('');
    expect(url.pathname).not.toContain(token);
    expect(await settled(a, id).then((r) => r.headers.get('x-vendor-auth'))).toBeNull();
    // Without the header, with another value, or with the token in the URL: refused.
    expectProblem(await server.request('GET', url.pathname), 403, 'AUD-1913');
    expectProblem(
      await server.request('GET', url.pathname, { headers: { 'x-vendor-auth': `${token}x` } }),
      403,
      'AUD-1913',
    );
    expectProblem(await server.request('GET', `${url.pathname}?token=${token}`), 403, 'AUD-1913');
    const file = await fetchFile(url.toString(), { 'x-vendor-auth': token! });
    expect(file.rows.map((r) => r[9])).toEqual(['n1']);
    server.clock.advance(15 * 60 * 1000 + 1);
    expectProblem(await server.request('GET', url.pathname, { headers: { 'x-vendor-auth': token! } }), 403, 'AUD-1912');
  });
});

// Last: it moves the clock a day on, past the life of every token issued before.
describe('expiry', () => {
  it('EEX-11: after file_expires_at the file is gone: its URLs and the status answer 410', async () => {
    const a = await account(LIFTED, EMAIL_EVENTS_MANIFEST);
    const id = await requestReport(a, { start_at: at(-2) });
    const status = (await settled(a, id)).body.result;
    const headerStatus = await settled(a, id, '?header_auth=true');
    expect(Date.parse(status.file_expires_at)).toBe(
      Date.parse(status.file_download_url_expires_at) + DAY - 15 * 60 * 1000,
    );
    server.clock.advance(DAY - 60_000);
    const late = (await settled(a, id)).body.result;
    // A URL issued near the end lives only as long as the file.
    expect(late.file_download_url_expires_at).toBe(late.file_expires_at);
    await fetchFile(late.file_download_url);
    server.clock.advance(60_000);
    a.token = await server.token(await server.createKey(a.accountId));
    expectProblem(await server.request('GET', local(late.file_download_url)), 410, 'AUD-1902');
    expectProblem(
      await server.request('GET', new URL(headerStatus.body.result.file_download_url).pathname, {
        headers: { 'x-vendor-auth': headerStatus.headers.get('x-vendor-auth')! },
      }),
      410,
      'AUD-1902',
    );
    expectProblem(await server.request('GET', `/emails/reports/${id}`, { token: a.token }), 410, 'AUD-1902');
  });
});

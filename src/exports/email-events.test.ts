import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { EMAIL_EVENTS_MANIFEST, emailEventHelpers, LIFTED } from '../../test/email-event-exports.ts';
import { serverWithPool, TestServer } from '../../test/app.ts';
import { type Account, BIG, BLOG, DAY, EMAIL, exportHelpers, NEWS, SHOP, V, VIP } from '../../test/exports.ts';
import { EMAIL_EVENT_COLUMNS } from './email-events.ts';

// The email event export (SPEC §2.16, §3.3, §4.8; docs/activities.md "The email event export
// file") through the real HTTP interface and worker: events ingested through the operator's
// ingestion endpoint, the file downloaded from the URL of a status answer, decompressed and
// parsed back, column by column.

const WRITER = `${V}.tags.user-created.writer`;

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  t0 = server.clock.now;
  db = d;
});

const { account, ok, person } = exportHelpers(() => ({
  server,
  db,
}));
const { activity, ingest, requestReport, settled, fetchFile } = emailEventHelpers(() => ({ server, db }));

/** The test clock's time when the file starts: fixtures are placed around it. */
let t0: number;

/** An ISO time `days` (may be fractional) after t0. */
const at = (days: number) => new Date(t0 + days * DAY).toISOString();
const ms = (iso: string) => String(Date.parse(iso));

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

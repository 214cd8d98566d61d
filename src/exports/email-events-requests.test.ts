import crypto from 'node:crypto';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { EMAIL_EVENTS_MANIFEST, emailEventHelpers, LIFTED } from '../../test/email-event-exports.ts';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { type Account, BIG, DAY, exportHelpers, NO_LIMITS, SHOP, V, VIP } from '../../test/exports.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  t0 = server.clock.now;
  db = d;
});

const { account, ok, rawGet, expectNothingQueued, withoutWorker, changeDefinitions } = exportHelpers(() => ({
  server,
  db,
}));
const { activity, ingest, requestReport, settled, local, fetchFile } = emailEventHelpers(() => ({ server, db }));

/** The test clock's time when the file starts: fixtures are placed around it. */
let t0: number;

/** An ISO time `days` (may be fractional) after t0. */
const at = (days: number) => new Date(t0 + days * DAY).toISOString();

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

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { COMMENT, type EventAccount, eventExportHelpers, HIDDEN_VISIT } from '../../test/event-exports.ts';
import { BIG, BLOG, exportHelpers, NO_LIMITS, pollPath, SHOP, V, v2, VIP } from '../../test/exports.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const { ok, person, expectNothingQueued, withoutWorker, changeDefinitions } = exportHelpers(() => ({
  server,
  db,
}));
const { eventAccount, requestEventExport } = eventExportHelpers(() => ({ server, db }));

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
    const res = await readWhen(
      'the export failed',
      () => server.request('GET', pollPath(url), { token: a.token }),
      (r) => r.status !== 404,
      STATE_BOUND_MS,
    );
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

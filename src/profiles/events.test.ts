import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  KB,
  M,
  NS,
  emailProfile,
  event,
  eventVersion,
  expectNoContent,
  fresh,
  getEvents,
  postEvents,
  profile,
  v2,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * POST and GET …/events through real HTTP (ATTR-29..36).
 */

useProfileData();

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

import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { parse as parseCsv } from 'csv-parse/sync';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, TestServer } from '../../test/app.ts';
import { readWhen, STATE_BOUND_MS, until } from '../../test/until.ts';
import {
  type Account,
  BLOG,
  CH_EMAIL,
  CSV,
  DAY,
  EMAIL,
  exportHelpers,
  MANIFEST,
  NEWS,
  NO_LIMITS,
  pollPath,
  SHOP,
  V,
  v2,
} from '../../test/exports.ts';
import { serverOnS3 } from '../../test/s3.ts';

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true }, (s, d) => {
  server = s;
  db = d;
});

const {
  account,
  ok,
  person,
  requestExport,
  whenReady,
  rawGet,
  download,
  expectNothingQueued,
  withoutWorker,
  changeDefinitions,
  shopAccount,
} = exportHelpers(() => ({ server, db }));

/** The people of the shared account: who matches which segment, and who may be sent to. */
let shop: Account;

beforeAll(async () => {
  shop = await shopAccount();
});

/**
 * An export by consent, made while the worker is stopped, whose stored request then names a topic
 * that is not there, as if it had gone since; with `definitionsChanged` the definitions change too.
 */
async function exportOfGoneTopic(a: Account, change: { definitionsChanged: boolean }): Promise<string> {
  return withoutWorker(async () => {
    const url = await requestExport(a, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    await db.query(
      `update exports set request = jsonb_set(request::jsonb, '{topic_discriminators}', '["${V}.topics.user-created.gone"]')::json where account_id = $1::bigint`,
      [a.accountId],
    );
    if (change.definitionsChanged) await changeDefinitions(a);
    return url;
  });
}

describe('poll URLs', () => {
  it('EXP-34 (reading: every export): a request that no longer holds when the worker takes it fails the export, and both forms answer 503 with the reason', async () => {
    const a = await account();
    const pollUrl = await exportOfGoneTopic(a, { definitionsChanged: true });
    const res = await readWhen(
      'the export failed',
      () => server.request('GET', pollPath(pollUrl), { token: a.token }),
      (r) => r.status !== 404,
      STATE_BOUND_MS,
    );
    expect(expectProblem(res, 503, 'AUD-1904')).toMatch(
      /topic_discriminators\[0\]: topic "com\.vendor1\.topics\.user-created\.gone" not found/,
    );
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 503, 'AUD-1904');
  });

  it('the worker runs the plan made when the export was requested, while the definitions stay as they were: the stored request is not checked again', async () => {
    const a = await account();
    const pollUrl = await exportOfGoneTopic(a, { definitionsChanged: false });
    await whenReady(a, pollUrl);
    expect((await download(a, pollUrl)).header).toEqual(['exportKey', 'Email']);
  });

  it("EXP-32, EXP-33, AUTH-17: an unknown id is 410 (v2: 404), and so is another account's export", async () => {
    const a = await account();
    const other = await account();
    for (const id of ['0b7c2a8e-1111-4c3b-9d2e-5f6a7b8c9d0e', 'not-an-id', '42']) {
      expectProblem(
        await server.request('GET', `/audience/profiles/reports/${id}`, { token: a.token }),
        410,
        'AUD-1902',
      );
      expectProblem(
        await server.request('GET', `/v2/audience/profiles/reports/${id}`, { token: a.token }),
        404,
        'AUD-1903',
      );
    }
    const pollUrl = await requestExport(other, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    await whenReady(other, pollUrl);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902');
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 404, 'AUD-1903');
  });

  it('EXP-36: Accept-Encoding gzip gives Content-Encoding gzip, which decompresses to the file; without it the file is not compressed', async () => {
    const pollUrl = await requestExport(shop, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
      attributes: [{ field_name: 'points', attribute_version_id: shop.v.points }],
    });
    await whenReady(shop, pollUrl);
    const auth = { authorization: `Bearer ${shop.token}` };
    const gzipped = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'gzip, deflate' });
    const plain = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'identity' });
    const refused = await rawGet(pollPath(pollUrl), { ...auth, 'accept-encoding': 'gzip;q=0' });
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toBe(CSV);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(refused.headers['content-encoding']).toBeUndefined();
    expect(zlib.gunzipSync(gzipped.body).toString()).toBe(plain.body.toString());
    expect(refused.body.toString()).toBe(plain.body.toString());
    expect(parseCsv(plain.body)).toHaveLength(7);
    // A count's result too.
    const countUrl = await requestExport(
      shop,
      { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL },
      'consents/count',
    );
    await whenReady(shop, countUrl);
    const count = await rawGet(pollPath(countUrl), { ...auth, 'accept-encoding': 'gzip' });
    expect(count.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(zlib.gunzipSync(count.body).toString())).toEqual({ profile_count: 6, total_profile_count: 6 });
  });
});

describe('the list of exports', () => {
  it("lists the account's exports newest first, with status, a count's result, a file's rows, the key that asked and where each is read; a key restricted to sections is refused; another account's are not listed", async () => {
    const a = await account();
    const other = await account();
    await person(a, 'ann@example.com', { consents: [[NEWS, CH_EMAIL, 'opt-in']] });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    const fileUrl = await requestExport(a, body);
    await whenReady(a, fileUrl);
    // The service's clock, which stands still in tests, dates an export.
    server.clock.advance(1);
    const countUrl = await requestExport(a, body, 'consents/count');
    await whenReady(a, countUrl);
    const listed = await ok(server.request('GET', '/audience/profiles/reports', { token: a.token }), 200);
    expect(listed.body.items).toEqual([
      {
        export_id: pollPath(countUrl).split('/').pop(),
        kind: 'consents-count',
        status: 'ready',
        result: { profile_count: 1, total_profile_count: 1 },
        request: body,
        created_at: expect.any(String),
        ready_at: expect.any(String),
        expires_at: expect.any(String),
        rows: null,
        requested_by: { client_id: a.clientId, name: '' },
        poll_path: v2(countUrl),
      },
      {
        export_id: pollPath(fileUrl).split('/').pop(),
        kind: 'consents',
        status: 'ready',
        request: body,
        created_at: expect.any(String),
        ready_at: expect.any(String),
        expires_at: expect.any(String),
        rows: 1,
        requested_by: { client_id: a.clientId, name: '' },
        poll_path: v2(fileUrl),
      },
    ]);
    // Its poll path serves the file.
    expect((await server.request('GET', listed.body.items[1].poll_path, { token: a.token })).status).toBe(200);
    expect(
      (await server.request('GET', '/audience/profiles/reports?limit=1', { token: a.token })).body.items,
    ).toHaveLength(1);
    expect((await server.request('GET', '/audience/profiles/reports', { token: other.token })).body.items).toEqual([]);
    expectProblem(await server.request('GET', '/audience/profiles/reports?limit=0', { token: a.token }), 400);
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    expectProblem(await server.request('GET', '/audience/profiles/reports', { token: restricted }), 403, 'AUD-1107');
  });
});

describe('access and limits', () => {
  it('EXP-41: a key restricted to some sections is refused data exports, counts and polls (403)', async () => {
    const a = await account();
    const restricted = await server.token(await server.createKey(a.accountId, { section_discriminators: [SHOP] }));
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    expect(
      expectProblem(
        await server.request('POST', '/audience/profiles/reports/consents', { token: restricted, body }),
        403,
        'AUD-1107',
      ),
    ).toContain(BLOG);
    expectProblem(
      await server.request('POST', '/audience/profiles/reports/consents/count', { token: restricted, body }),
      403,
      'AUD-1107',
    );
    await expectNothingQueued(a);
    const pollUrl = await requestExport(a, body);
    await whenReady(a, pollUrl);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: restricted }), 403, 'AUD-1107');
    expectProblem(await server.request('GET', v2(pollUrl), { token: restricted }), 403, 'AUD-1107');
  });

  it('LIM-04: at most profile_export_requests_per_second export requests (1 by default); beyond, 429 with Retry-After and nothing queued', async () => {
    const a = await account({ ...NO_LIMITS, profile_export_requests_per_second: 1 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    await requestExport(a, body);
    const refused = await server.request('POST', '/audience/profiles/reports/consents/count', { token: a.token, body });
    expectProblem(refused, 429, 'AUD-1002');
    expect(refused.headers.get('retry-after')).toBe('1');
    const { rows } = await db.query('select count(*)::int as n from exports where account_id = $1::bigint', [
      a.accountId,
    ]);
    expect(rows[0].n).toBe(1);
    server.clock.advance(1000);
    await requestExport(a, body, 'consents/count');
  });

  it('LIM-04: export requests refused for their input (400) spend none of the 1 a second', async () => {
    const a = await account({ ...NO_LIMITS, profile_export_requests_per_second: 1 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    const post = (b: unknown) =>
      server.request('POST', '/audience/profiles/reports/consents/count', { token: a.token, body: b });
    expectProblem(await post({ ...body, topic_discriminators: [] }), 400);
    expectProblem(await post({ ...body, section_discriminator: 42 }), 400);
    await requestExport(a, body, 'consents/count');
    expectProblem(await post(body), 429, 'AUD-1002');
    server.clock.advance(1000);
  });

  it('LIM-06: at most export_downloads_per_minute polls (60 by default); beyond, 429', async () => {
    const a = await account({ ...NO_LIMITS, export_downloads_per_minute: 60 });
    const pollUrl = await requestExport(a, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    });
    let served = 0;
    for (let i = 0; i < 60; i++)
      if ((await server.request('GET', v2(pollUrl), { token: a.token })).status < 300) served++;
    expect(served).toBe(60);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 429, 'AUD-1002');
    server.clock.advance(60_000);
    expect((await server.request('GET', v2(pollUrl), { token: a.token })).status).toBeLessThan(300);
  });

  it('LIM-11: at most pending_exports exports in progress per account; beyond, 429 and nothing queued', async () => {
    const a = await account({ ...NO_LIMITS, pending_exports: 2 });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    await withoutWorker(async () => {
      await requestExport(a, body);
      await requestExport(a, body, 'consents/count');
      const refused = await server.request('POST', '/audience/profiles/reports/consents', { token: a.token, body });
      expect(expectProblem(refused, 429, 'AUD-1905')).toMatch(/at most 2/);
      const { rows } = await db.query(
        'select (select count(*) from exports where account_id = $1::bigint)::int as exports, (select count(*) from jobs where account_id = $1::bigint)::int as jobs',
        [a.accountId],
      );
      expect(rows[0]).toEqual({ exports: 2, jobs: 2 });
    });
    // Once they are ready, the places are free again.
    const { rows } = await db.query('select export_id::text from exports where account_id = $1::bigint', [a.accountId]);
    for (const r of rows) await whenReady(a, `${server.url}/audience/profiles/reports/${r.export_id}`);
    await requestExport(a, body);
  });
});

// Last: it moves the clock a day on, past the life of every token issued before.
describe('expiry', () => {
  it('EXP-32, EXP-33, EXP-35, ERR-16: in progress 404 (v2 202); ready 200 any number of times for a day; then 410 in both forms, and the sweeper removes the file', async () => {
    const a = await account();
    await person(a, 'ann@example.com', { consents: [[NEWS, CH_EMAIL, 'opt-in']] });
    const body = { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL };
    const pollUrl = await withoutWorker(async () => {
      const url = await requestExport(a, body);
      expect(expectProblem(await server.request('GET', pollPath(url), { token: a.token }), 404, 'AUD-1901')).toMatch(
        /in progress/,
      );
      const inProgress = await server.request('GET', v2(url), { token: a.token });
      expect(inProgress.status).toBe(202);
      expect(inProgress.text).toBe('');
      return url;
    });
    await whenReady(a, pollUrl);
    const first = await download(a, pollUrl);
    expect(first.rows.map((r) => r[1])).toEqual(['ann@example.com']);
    const id = pollPath(pollUrl).split('/').pop()!;
    const file = path.join(server.services.config.dataDir, 'files', 'exports', a.accountId, `${id}.csv.gz`);
    expect(fs.existsSync(file)).toBe(true);
    server.clock.advance(DAY - 1000);
    expect(await download(a, pollUrl)).toEqual(first);
    expect((await server.request('GET', v2(pollUrl), { token: a.token })).status).toBe(200);
    server.clock.advance(1000);
    // Tokens live a day too: a new one.
    a.token = await server.token(await server.createKey(a.accountId));
    expect(expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902')).toMatch(
      /no longer available/,
    );
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 410, 'AUD-1902');
    // The sweeper's job is due a day after the export became ready, by the database's clock, which the test clock does not move.
    const { rowCount } = await db.query(
      "update jobs set run_at = now() where account_id = $1::bigint and kind = 'export-sweep'",
      [a.accountId],
    );
    expect(rowCount).toBe(1);
    await until('the expired file swept', () => !fs.existsSync(file), STATE_BOUND_MS);
    expectProblem(await server.request('GET', pollPath(pollUrl), { token: a.token }), 410, 'AUD-1902');
    expectProblem(await server.request('GET', v2(pollUrl), { token: a.token }), 410, 'AUD-1902');
  });
});

describe('in an S3-compatible bucket', () => {
  let onS3: TestServer;
  serverOnS3(
    () => server,
    (s) => {
      onS3 = s;
    },
  );

  it('the file is streamed into the bucket and served from there', async () => {
    const { accountId, token } = await onS3.login(MANIFEST, NO_LIMITS);
    await ok(
      onS3.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, {
        token,
        body: { profile_key: 'ann@example.com' },
      }),
      201,
    );
    await ok(
      onS3.request('POST', `/v2/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${SHOP}/consents`, {
        token,
        body: { topic_discriminator: NEWS, channel_discriminator: CH_EMAIL, type: 'opt-in', reason: 'test' },
      }),
      201,
    );
    const created = await ok(
      onS3.request('POST', '/audience/profiles/reports/consents', {
        token,
        body: { section_discriminator: SHOP, topic_discriminators: [NEWS], channel_discriminator: CH_EMAIL },
      }),
      201,
    );
    const path = new URL(created.body.poll_url).pathname;
    const res = await readWhen(
      'the export done',
      () => onS3.request('GET', path, { token }),
      (r) => r.status !== 404,
      STATE_BOUND_MS,
    );
    expect(res.status, res.text).toBe(200);
    const [header, ...rows] = parseCsv(res.text) as string[][];
    expect(header).toEqual(['exportKey', 'Email']);
    expect(rows.map((r) => r[1])).toEqual(['ann@example.com']);
    expect(await onS3.services.files.exists(`exports/${accountId}/${path.split('/').pop()}.csv.gz`)).toBe(true);
  });
});

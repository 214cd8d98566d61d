import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import {
  type Account,
  BLOG,
  EMAIL,
  FORM_FIELDS,
  MB,
  account,
  asResponse,
  attr,
  attributesOf,
  created,
  expectCountsAddUp,
  expectProblem,
  finished,
  importsServer,
  jobsEnded,
  runImport,
  server,
  status,
  storedFiles,
  upload,
  uploadUrl,
  v2,
} from '../../test/imports-http.ts';

/** An import's status and its upload through real HTTP. */

importsServer();

describe('status of an import', () => {
  it('IMP-09 IMP-10 GET → 200 {import_id, result:{status, profiles_found, profiles_processed, profiles_failed}} for both versions: waiting_for_file until the upload, then completed', async () => {
    const a = await account();
    for (const version of [1, 2] as const) {
      const body =
        version === 1
          ? {
              keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
              attribute_mappings: [attr('first', a.v.firstname)],
            }
          : v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
      const c = await created(a, version, body);
      const waiting = await status(a, c.import_id);
      expect(waiting.status, waiting.text).toBe(200);
      expect(waiting.body.import_id).toBe(c.import_id);
      expect(waiting.body.result).toEqual({
        status: 'waiting_for_file',
        profiles_found: 0,
        profiles_processed: 0,
        profiles_failed: 0,
      });
      expect(waiting.body.report).toEqual({
        profiles_new: 0,
        profiles_updated: 0,
        profiles_not_changed: 0,
        profiles_failed: 0,
        failures: [],
      });
      expect((await upload(c, `email,first\nv${version}a@x.io,A\nv${version}b@x.io,B\nnot-an-email,C\n`)).status).toBe(
        204,
      );
      const seen = new Set<string>();
      const last = await readWhen(
        'the import ended',
        async () => {
          const body = (await status(a, c.import_id)).body;
          seen.add(body.result.status);
          return body;
        },
        (body) => body.result.status === 'completed' || body.result.status === 'error',
        STATE_BOUND_MS,
      );
      expect([...seen].every((s) => ['queued', 'in_progress', 'completed'].includes(s))).toBe(true);
      expect(last.import_id).toBe(c.import_id);
      expect(last.result).toEqual({
        status: 'completed',
        profiles_found: 3,
        profiles_processed: 2,
        profiles_failed: 1,
      });
      expectCountsAddUp(last);
      expect((await attributesOf(a, EMAIL, `v${version}b@x.io`)).body[a.v.firstname]).toBe('B');
    }
  });

  it('IMP-10 an import whose file cannot be read ends in error with a message: a missing mapped column, an empty file, no upload within the window', async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const missing = await runImport(a, 2, body, 'email,name\nx@x.io,X\n');
    expect(missing.result.status).toBe('error');
    expect(missing.result.message).toMatch(/"first"/);
    expect((await attributesOf(a, EMAIL, 'x@x.io')).status).toBe(404);
    const empty = await runImport(a, 2, body, '');
    expect(empty.result.status).toBe('error');
    expect(empty.result.message).toMatch(/empty|header/i);
    const headerOnly = await runImport(a, 2, body, 'email,first\r\n');
    expect(headerOnly.result).toEqual({
      status: 'completed',
      profiles_found: 0,
      profiles_processed: 0,
      profiles_failed: 0,
    });
    // An import that ended, in error or not, keeps no file.
    expect(await storedFiles(a.accountId)).toEqual([]);
  });

  it('IMP-11 an unknown import id, one of another section or of another account → 404', async () => {
    const a = await account();
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    expectProblem(await status(a, crypto.randomUUID()), 404);
    expectProblem(await status(a, 'not-a-uuid'), 404);
    expectProblem(await status(a, c.import_id, BLOG), 404);
    const other = await account();
    expectProblem(await status(other, c.import_id), 404);
    expect((await status(a, c.import_id)).status).toBe(200);
  });
});

describe('the upload', () => {
  const body = (a: Account) => v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });

  it('IMP-05 a multipart POST of every form field in order, then the part file (text/csv), without a bearer token → 204; the file is stored, imported, then removed', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const res = await upload(c, 'email,first\nup@x.io,Up\n');
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    const done = await finished(a, c.import_id);
    expect(done.result).toEqual({ status: 'completed', profiles_found: 1, profiles_processed: 1, profiles_failed: 0 });
    expect((await attributesOf(a, EMAIL, 'up@x.io')).body[a.v.firstname]).toBe('Up');
    // The file holds personal data: it goes once the import has ended (docs/imports.md), just
    // after its status says so, before its job ends.
    await jobsEnded(a);
    expect(await storedFiles(a.accountId)).toEqual([]);
    // The same form cannot deliver a second file.
    expectProblem(await upload(c, 'email,first\nagain@x.io,Again\n'), 409);
  });

  it('IMP-05 the upload refuses a request that is not a multipart form or has no file part (400), and does not need the bearer token', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    expectProblem(await server.request('POST', new URL(c.file_upload_url).pathname, { body: c.file_upload_body }), 400);
    const form = new FormData();
    for (const [k, v] of Object.entries(c.file_upload_body)) form.append(k, v);
    expectProblem(await asResponse(await fetch(uploadUrl(c), { method: 'POST', body: form })), 400, /file/);
    const wrongPart = new FormData();
    for (const [k, v] of Object.entries(c.file_upload_body)) wrongPart.append(k, v);
    wrongPart.append('upload', new Blob(['email\n'], { type: 'text/csv' }), 'x.csv');
    expectProblem(await asResponse(await fetch(uploadUrl(c), { method: 'POST', body: wrongPart })), 400);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    expect(await storedFiles(a.accountId)).toEqual([]);
  });

  it('IMP-07 an upload with a changed or missing form field, a changed policy or signature, or the file before the fields → 403, and nothing is stored', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const other = await created(a, 2, body(a));
    const f = c.file_upload_body;
    const policy = JSON.parse(Buffer.from(f.policy, 'base64').toString('utf8'));
    const widened = Buffer.from(
      JSON.stringify({
        ...policy,
        conditions: policy.conditions.map((x: unknown) =>
          Array.isArray(x) ? ['content-length-range', 0, 5000 * MB] : x,
        ),
      }),
    ).toString('base64');
    const later = Buffer.from(JSON.stringify({ ...policy, expiration: '2999-01-01T00:00:00.000Z' })).toString('base64');
    const flipped = f['x-store-signature'].slice(0, -1) + (f['x-store-signature'].endsWith('0') ? '1' : '0');
    const attempts: { fields?: Record<string, string>; omit?: string[]; fileFirst?: boolean }[] = [
      { fields: { key: other.file_upload_body.key } },
      { fields: { key: `imports/${a.accountId}/../../../escape.csv` } },
      { fields: { policy: widened } },
      { fields: { policy: later } },
      { fields: { policy: other.file_upload_body.policy } },
      { fields: { 'x-store-signature': flipped } },
      { fields: { 'x-store-signature': 'not-a-signature' } },
      { fields: { 'x-store-signature': other.file_upload_body['x-store-signature'] } },
      { fields: { 'x-store-meta-id': other.file_upload_body['x-store-meta-id'] } },
      {
        fields: {
          'x-store-date':
            f['x-store-date'].slice(0, 9) + (f['x-store-date'].endsWith('T000000Z') ? '000001Z' : '000000Z'),
        },
      },
      { fields: { 'x-store-credential': f['x-store-credential'].replace(/^[^/]+/, 'someone') } },
      { fields: { 'content-type': 'application/octet-stream' } },
      { fields: { success_action_status: '201' } },
      // A field the policy does not sign.
      { fields: { 'x-store-meta-extra': 'anything' } },
      ...FORM_FIELDS.map((name) => ({ omit: [name] })),
      { fileFirst: true },
    ];
    for (const attempt of attempts) {
      const res = await upload(c, 'email,first\nbad@x.io,Bad\n', attempt);
      expect(res.status, `${JSON.stringify(attempt)}: ${res.text}`).toBe(403);
      expectProblem(res, 403, /upload form|signature|window/i);
    }
    expect(await storedFiles(a.accountId)).toEqual([]);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    expect((await status(a, other.import_id)).body.result.status).toBe('waiting_for_file');
    // The untouched form still works.
    expect((await upload(c, 'email,first\ngood@x.io,Good\n')).status).toBe(204);
    expect((await finished(a, c.import_id)).result.status).toBe('completed');
    expect((await attributesOf(a, EMAIL, 'bad@x.io')).status).toBe(404);
    expect((await status(a, other.import_id)).body.result.status).toBe('waiting_for_file');
  });

  it('IMP-06 an upload after file_upload_url_expires_at → 403, nothing is stored and the import ends in error', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    server.clock.advance(5 * 60 * 1000 + 1);
    const res = await upload(c, 'email,first\nlate@x.io,Late\n');
    expectProblem(res, 403, /window|expired/i);
    expect(await storedFiles(a.accountId)).toEqual([]);
    const s = (await status(a, c.import_id)).body;
    expect(s.result.status).toBe('error');
    expect(s.result.profiles_found).toBe(0);
    expect(s.result.message).toMatch(/upload window/);
  });

  it('IMP-08 a file over 50 MB → 413, nothing is stored and the import still waits for its file', async () => {
    const a = await account();
    const c = await created(a, 2, body(a));
    const boundary = `----audience-${crypto.randomUUID()}`;
    const head = Buffer.from(
      Object.entries(c.file_upload_body)
        .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
        .join('') +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\nContent-Type: text/csv\r\n\r\nemail,first\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const chunk = Buffer.alloc(MB, 'big@x.io,Big\n');
    const fileBytes = 51 * MB;
    let sent = 0;
    let phase: 'head' | 'file' | 'tail' | 'done' = 'head';
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (phase === 'head') {
          controller.enqueue(head);
          phase = 'file';
        } else if (phase === 'file') {
          controller.enqueue(chunk);
          sent += chunk.length;
          if (sent >= fileBytes) phase = 'tail';
        } else if (phase === 'tail') {
          controller.enqueue(tail);
          phase = 'done';
        } else {
          controller.close();
        }
      },
    });
    const res = await asResponse(
      await fetch(uploadUrl(c), {
        method: 'POST',
        body: stream,
        duplex: 'half',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      } as RequestInit),
    );
    expectProblem(res, 413, /50|limit/);
    expect(await storedFiles(a.accountId)).toEqual([]);
    expect((await status(a, c.import_id)).body.result).toEqual({
      status: 'waiting_for_file',
      profiles_found: 0,
      profiles_processed: 0,
      profiles_failed: 0,
    });
    // The form stays usable for a file within the limit.
    expect((await upload(c, 'email,first\nsmall@x.io,Small\n')).status).toBe(204);
    expect((await finished(a, c.import_id)).result).toEqual({
      status: 'completed',
      profiles_found: 1,
      profiles_processed: 1,
      profiles_failed: 0,
    });
  });
});

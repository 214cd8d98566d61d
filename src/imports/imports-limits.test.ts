import { describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';
import { serverOnS3, type S3 } from '../../test/s3.ts';
import {
  EMAIL,
  MANIFEST,
  NO_LIMITS,
  S,
  account,
  attr,
  create,
  created,
  expectProblem,
  finished,
  importsServer,
  server,
  storedFiles,
  upload,
  v2,
} from '../../test/imports-http.ts';

/** The limits of imports, and imports with files in an S3-compatible bucket. */

importsServer();

describe('limits', () => {
  it('LIM-03 at most 10 import requests per minute per account (both versions); beyond → 429', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    const b1 = {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    };
    const b2 = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    for (let i = 0; i < 10; i++) expect((await create(a, i % 2 ? 1 : 2, i % 2 ? b1 : b2)).status).toBe(201);
    const over = await create(a, 2, b2);
    expectProblem(over, 429);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    expectProblem(await create(a, 1, b1), 429);
    // Other accounts are not affected; reading the status is not an import request.
    const other = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    expect(
      (await create(other, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', other.v.firstname)] }))).status,
    ).toBe(201);
    server.clock.advance(60_000);
    expect((await create(a, 2, b2)).status).toBe(201);
  });

  it('LIM-03 import requests refused for their input (400) spend none of the 10 a minute', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      pending_imports: null,
    });
    const good = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    for (let i = 0; i < 12; i++) {
      expectProblem(await create(a, 2, { ...good, keyspace_mapping: { keyspace_discriminator: EMAIL } }), 400);
      expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', '999999')] })), 400);
    }
    for (let i = 0; i < 10; i++) expect((await create(a, 2, good)).status).toBe(201);
    expectProblem(await create(a, 2, good), 429);
    server.clock.advance(60_000);
  });

  it('LIM-10 at most three imports per account are pending at once; the fourth → 429 until one has ended or its upload window has passed', async () => {
    const a = await account(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      import_requests_per_minute: null,
    });
    const b2 = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const b1 = {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    };
    const first = await created(a, 2, b2);
    await created(a, 1, b1);
    await created(a, 2, b2);
    expectProblem(await create(a, 2, b2), 429, /pending/);
    expectProblem(await create(a, 1, b1), 429, /pending/);
    expect((await upload(first, 'email,first\np@x.io,P\n')).status).toBe(204);
    expect((await finished(a, first.import_id)).result.status).toBe('completed');
    await created(a, 2, b2);
    expectProblem(await create(a, 2, b2), 429);
    server.clock.advance(5 * 60 * 1000 + 1);
    await created(a, 2, b2);
    await created(a, 1, b1);
  });
});

describe('files in an S3-compatible bucket (FILES_URL)', () => {
  let s3: S3;
  let onS3: TestServer;
  serverOnS3(
    () => server,
    (s, bucket) => {
      onS3 = s;
      s3 = bucket;
    },
  );

  it('IMP-05 the upload is written into the bucket, and the worker imports the file from there, then removes it', async () => {
    const a = await account(MANIFEST, NO_LIMITS, onS3);
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }), onS3);
    const csv = 'email,first\nbucket@x.io,Bucket\nsecond@x.io,Second\n';
    const up = await upload(c, csv, { on: onS3 });
    expect(up.status, up.text).toBe(204);
    const done = await finished(a, c.import_id, onS3);
    expect(done.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect(
      (
        await onS3.request('GET', `/audience/keyspaces/${EMAIL}/profiles/bucket@x.io/sections/${S}/attributes`, {
          token: a.token,
        })
      ).body,
    ).toMatchObject({ [a.v.firstname]: 'Bucket' });
    // The file was never in the local folder, and once the import has ended it is gone from the
    // bucket too (read from the emulator, which serves unsigned reads).
    expect(await storedFiles(a.accountId, onS3)).toEqual([]);
    const object = await fetch(`${s3.endpoint}/${s3.bucket}/audience/files/imports/${a.accountId}/${c.import_id}.csv`);
    expect(object.status).toBe(404);
  });
});

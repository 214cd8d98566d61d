import crypto from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Account,
  CH_EMAIL,
  CH_SMS,
  EMAIL,
  FORM_FIELDS,
  MAIL_OFFERS,
  MB,
  S,
  SMS_OFFERS,
  V,
  WEEKLY,
  account,
  attr,
  create,
  created,
  expectProblem,
  importsServer,
  server,
  v2,
} from '../../test/imports-http.ts';

/** Import requests through real HTTP: their answer, the upload form, and the checks of their body (IMP-01 to IMP-15). */

importsServer();

describe('creating an import', () => {
  let a: Account;
  beforeAll(async () => {
    a = await account();
  });

  it('IMP-01 version 1 (keyspace_mappings) → 201 {import_id, file_upload_url, file_upload_body, file_upload_url_expires_at}', async () => {
    const res = await create(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: false }],
      attribute_mappings: [attr('first', a.v.firstname)],
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body).sort()).toEqual([
      'file_upload_body',
      'file_upload_url',
      'file_upload_url_expires_at',
      'import_id',
    ]);
    expect(res.body.import_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new URL(res.body.file_upload_url).pathname).toBe('/files/uploads');
    expect(typeof res.body.file_upload_body).toBe('object');
    expect(typeof res.body.file_upload_url_expires_at).toBe('string');
  });

  it('IMP-02 version 2 (keyspace_mapping) → 201 with the same shape', async () => {
    const res = await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual([
      'file_upload_body',
      'file_upload_url',
      'file_upload_url_expires_at',
      'import_id',
    ]);
    expect(res.body.import_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new URL(res.body.file_upload_url).pathname).toBe('/files/uploads');
  });

  it('IMP-03 file_upload_body holds the S3-style signed form fields (x-store-…) in order, with a signed policy of key, type, size and expiry', async () => {
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    const body = c.file_upload_body;
    expect(Object.keys(body)).toEqual(FORM_FIELDS);
    for (const v of Object.values(body)) expect(typeof v).toBe('string');
    expect(body.key).toContain(c.import_id);
    expect(body.success_action_status).toBe('204');
    expect(body['content-type']).toBe('text/csv');
    expect(body['x-store-algorithm']).toBe('AWS4-HMAC-SHA256');
    expect(body['x-store-credential']).toMatch(/^[^/]+\/\d{8}\/[^/]+\/s3\/aws4_request$/);
    expect(body['x-store-date']).toMatch(/^\d{8}T\d{6}Z$/);
    expect(body['x-store-signature']).toMatch(/^[0-9a-f]{64}$/);
    const policy = JSON.parse(Buffer.from(body.policy, 'base64').toString('utf8'));
    expect(policy.expiration).toBe(new Date(c.file_upload_url_expires_at).toISOString());
    expect(policy.conditions).toContainEqual({ key: body.key });
    expect(policy.conditions).toContainEqual(['content-length-range', 0, 50 * MB]);
    expect(policy.conditions).toContainEqual({ 'x-store-meta-id': body['x-store-meta-id'] });
  });

  it('IMP-04 file_upload_url_expires_at is 5 minutes after the request', async () => {
    const before = server.clock.now;
    const c = await created(a, 1, {
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
      attribute_mappings: [attr('first', a.v.firstname)],
    });
    expect(c.file_upload_url_expires_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Date.parse(c.file_upload_url_expires_at) - before).toBe(5 * 60 * 1000);
  });

  it('IMP-12 an import request for an unknown section → 404 (both versions)', async () => {
    const unknown = `${V}.sections.user-created.nope`;
    expectProblem(
      await create(
        a,
        1,
        {
          keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
          attribute_mappings: [attr('first', a.v.firstname)],
        },
        unknown,
      ),
      404,
    );
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }), unknown),
      404,
    );
    expectProblem(
      await server.request('GET', `/audience/sections/${unknown}/imports/${crypto.randomUUID()}`, { token: a.token }),
      404,
    );
  });

  it('AUTH-09 creating and reading imports need the bearer token', async () => {
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    expectProblem(await server.request('POST', `/v2/audience/sections/${S}/imports`, { body }), 401);
    expectProblem(await server.request('POST', `/audience/sections/${S}/imports`, { body }), 401);
    expectProblem(await server.request('GET', `/audience/sections/${S}/imports/${crypto.randomUUID()}`), 401);
  });

  it('IMP-13 version 2 requires keyspace_mapping {keyspace_discriminator, field_selector}; missing → 400', async () => {
    const attributes = [attr('first', a.v.firstname)];
    expectProblem(await create(a, 2, { attribute_mappings: attributes }), 400, /keyspace_mapping/);
    expectProblem(
      await create(a, 2, { keyspace_mapping: { field_selector: 'email' }, attribute_mappings: attributes }),
      400,
      /keyspace_discriminator/,
    );
    expectProblem(
      await create(a, 2, { keyspace_mapping: { keyspace_discriminator: EMAIL }, attribute_mappings: attributes }),
      400,
      /field_selector/,
    );
    expectProblem(
      await create(a, 2, {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: '' },
        attribute_mappings: attributes,
      }),
      400,
    );
    // Version 2 has no keyspace_mappings (the version 1 form).
    expectProblem(
      await create(a, 2, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: attributes,
      }),
      400,
    );
    // An unknown keyspace.
    expectProblem(await create(a, 2, v2(`${V}.keyspaces.nope`, 'email', { attribute_mappings: attributes })), 404);
  });

  it('IMP-14 attribute_mappings: required, 1 to 100 items {field_selector, attribute_version_id}; empty → 400, over 100 → 413', async () => {
    expectProblem(await create(a, 2, v2(EMAIL, 'email', {})), 400, /attribute_mappings/);
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [] })), 400);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: [],
      }),
      400,
    );
    const many = Array.from({ length: 101 }, (_, i) => attr(`c${i}`, a.v.firstname));
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: many })), 413);
    expectProblem(
      await create(a, 1, {
        keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email' }],
        attribute_mappings: many,
      }),
      413,
    );
    expect((await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: many.slice(0, 100) }))).status).toBe(201);
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [{ field_selector: 'first' }] })),
      400,
      /attribute_version_id/,
    );
    expectProblem(
      await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [{ attribute_version_id: a.v.firstname }] })),
      400,
      /field_selector/,
    );
    // A version id the section does not define.
    expectProblem(await create(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('x', '999999999')] })), 400);
  });

  it('IMP-15 consent_mappings: at most 5 items, each a consents array of {resubscribe_if_opted_out, field_selector, channel_discriminator, topic_discriminator, type}; over 5 → 413', async () => {
    const consent = (topic: string, channel?: string) => ({
      resubscribe_if_opted_out: false,
      field_selector: 'c',
      topic_discriminator: topic,
      type: 'opt-in',
      ...(channel ? { channel_discriminator: channel } : {}),
    });
    const topics: [string, string][] = [
      [WEEKLY, CH_EMAIL],
      [WEEKLY, CH_SMS],
      [SMS_OFFERS, CH_SMS],
      [MAIL_OFFERS, CH_EMAIL],
    ];
    const five = [...topics.map(([t, c]) => ({ consents: [consent(t, c)] })), { consents: [] }];
    const ok = await create(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)], consent_mappings: five }),
    );
    expect(ok.status, ok.text).toBe(201);
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [...five, { consents: [] }],
        }),
      ),
      413,
    );
    // Each item's shape is checked.
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ field_selector: 'c', type: 'opt-in' }] }],
        }),
      ),
      400,
      /topic_discriminator/,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ ...consent(WEEKLY, CH_EMAIL), resubscribe_if_opted_out: 'yes' }] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [{ ...consent(WEEKLY, CH_EMAIL), type: 'maybe' }] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent(`${V}.topics.user-created.nope`, CH_EMAIL)] }],
        }),
      ),
      400,
    );
    expectProblem(
      await create(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname)],
          consent_mappings: [{ consents: [consent(WEEKLY, `${V}.channels.nope`)] }],
        }),
      ),
      400,
    );
  });
});

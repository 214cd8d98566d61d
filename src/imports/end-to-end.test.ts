import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { SHOP, TestServer } from '../../test/app.ts';
import { sendImportFile } from '../../test/imports-http.ts';

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start({}, { worker: true });
});
afterAll(async () => server?.close());

const S = 'com.vendor1.sections.user-created.shop';

describe('an import end to end', () => {
  it('creates, uploads, ingests and reports', async () => {
    const { token } = await server.login(SHOP);
    const attrs = (await server.request('GET', `/audience/sections/${S}/attributes`, { token })).body.items;
    const first = attrs.find((a: any) => a.discriminator === 'com.vendor1.attributes.firstname').versions[0].id;
    const points = attrs.find((a: any) => a.discriminator === 'com.vendor1.attributes.user-created.points').versions[1]
      .id;
    const created = await server.request('POST', `/v2/audience/sections/${S}/imports`, {
      token,
      body: {
        keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'email' },
        attribute_mappings: [
          { field_selector: 'first', attribute_version_id: first },
          { field_selector: 'points', attribute_version_id: points },
        ],
        tag_mappings: [{ tag_discriminator: 'com.vendor1.tags.user-created.vip' }],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                topic_discriminator: 'com.vendor1.topics.user-created.weekly-news',
                channel_discriminator: 'com.vendor1.channels.email',
                type: 'opt-in',
              },
            ],
          },
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    const csv = '\ufeffemail;first;points;news\r\nann@x.io;Ann;"1,5";1\r\nbad-email;Bo;2;0\r\nCAT@x.io;Cat;x;1\r\n';
    const upload = await sendImportFile(server.url, created.body, csv);
    expect(upload.status, await upload.text()).toBe(204);
    const status = await readWhen(
      'the import ended',
      async () =>
        (await server.request('GET', `/audience/sections/${S}/imports/${created.body.import_id}`, { token })).body,
      (body) => body.result.status === 'completed' || body.result.status === 'error',
      STATE_BOUND_MS,
    );
    expect(status.result).toEqual({
      status: 'completed',
      profiles_found: 3,
      profiles_processed: 1,
      profiles_failed: 2,
    });
    expect(status.report.failures.map((f: any) => f.line)).toEqual([3, 4]);
    // The section's list has it, with its progress: the rows read of the rows its file holds.
    const listed = await server.request('GET', `/audience/sections/${S}/imports`, { token });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.items).toEqual([
      {
        import_id: created.body.import_id,
        status: 'completed',
        profiles_found: 3,
        profiles_processed: 1,
        profiles_failed: 2,
        rows_total: 3,
        created_at: expect.any(String),
        finished_at: expect.any(String),
      },
    ]);
    const got = await server.request(
      'GET',
      `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/ann@x.io/sections/${S}/attributes`,
      { token },
    );
    expect(got.body[first]).toBe('Ann');
    expect(got.body[points]).toBe(1.5);
    const consents = await server.request(
      'GET',
      `/v2/audience/keyspaces/com.vendor1.keyspaces.email/profiles/ann@x.io/sections/${S}/consents`,
      { token },
    );
    expect(consents.body.items[0]).toMatchObject({ type: 'opt-in', source: 'Profile import' });
  });

  it('lists the imports of a section, newest first: one waiting for its file has no total yet; a bad limit is 400, an unknown section 404', async () => {
    const { token } = await server.login(SHOP);
    const attrs = (await server.request('GET', `/audience/sections/${S}/attributes`, { token })).body.items;
    const first = attrs.find((a: any) => a.discriminator === 'com.vendor1.attributes.firstname').versions[0].id;
    const body = {
      keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'first', attribute_version_id: first }],
    };
    const older = await server.request('POST', `/v2/audience/sections/${S}/imports`, { token, body });
    expect(older.status, older.text).toBe(201);
    const second = await server.request('POST', `/v2/audience/sections/${S}/imports`, { token, body });
    const listed = await server.request('GET', `/audience/sections/${S}/imports?limit=5`, { token });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.items.map((i: any) => [i.import_id, i.status, i.rows_total, i.finished_at])).toEqual([
      [second.body.import_id, 'waiting_for_file', null, null],
      [older.body.import_id, 'waiting_for_file', null, null],
    ]);
    expect((await server.request('GET', `/audience/sections/${S}/imports?limit=1`, { token })).body.items).toHaveLength(
      1,
    );
    const bad = await server.request('GET', `/audience/sections/${S}/imports?limit=0`, { token });
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/limit/);
    const unknown = await server.request('GET', '/audience/sections/com.vendor1.sections.user-created.none/imports', {
      token,
    });
    expect(unknown.status).toBe(404);
  });
});

import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { SHOP, expectProblem } from '../../test/app.ts';
import { MAX_JSON_DEPTH } from '../core/text.ts';
import { server, httpServer, SHOP_SECTION, TAGS } from '../../test/http-server.ts';

httpServer();

/** Sends raw bytes to the server and reads the whole answer: for requests fetch would refuse to send. */
function rawRequest(bytes: Buffer | string): Promise<{ status: number; type: string; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(server.url);
    const socket = net.connect(Number(url.port), url.hostname, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
      resolve({
        status: Number(head.split(' ')[1]),
        type: /content-type: ([^\r\n]+)/i.exec(head)?.[1] ?? '',
        body: body ? JSON.parse(body) : undefined,
      });
    });
  });
}

describe('bad bytes and malformed requests: 4xx problem documents, never a 5xx', () => {
  it('refuses NUL in any text with 400 naming the field, and stores nothing: bodies, data map keys, paths, credentials, operator bodies', async () => {
    const { token } = await server.login(SHOP);
    const tag = await server.request('POST', TAGS, { token, body: { name: 'bad\u0000tag' } });
    expect(expectProblem(tag, 400, 'AUD-1012')).toContain('"name"');
    expect(
      (await server.request('GET', TAGS, { token })).body.items.map((t: { name: string }) => t.name),
    ).not.toContain('bad\u0000tag');
    const profiles = `/audience/keyspaces/com.vendor1.keyspaces.email/sections/${SHOP_SECTION}/profiles`;
    expect(
      expectProblem(
        await server.request('POST', profiles, { token, body: { profile_key: 'a\u0000@example.com' } }),
        400,
        'AUD-1012',
      ),
    ).toContain('"profile_key"');
    expect((await server.request('POST', profiles, { token, body: { profile_key: 'nul@example.com' } })).status).toBe(
      201,
    );
    const path = `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/nul@example.com/sections/${SHOP_SECTION}`;
    expect(
      expectProblem(
        await server.request('PATCH', `${path}/tags`, {
          token,
          body: { 'com.vendor1.tags.user-created.vip\u0000': true },
        }),
        400,
        'AUD-1012',
      ),
    ).toContain('vip');
    expectProblem(
      await server.request(
        'GET',
        `/audience/keyspaces/com.vendor1.keyspaces.web/profiles/x%00y/sections/${SHOP_SECTION}/attributes`,
        { token },
      ),
      400,
      'AUD-1012',
    );
    expect(
      expectProblem(
        await server.request('POST', '/audience/profiles/reports/segments/count?x=%00', { token, body: {} }),
        400,
        'AUD-1012',
      ),
    ).toContain('"x"');
    // Unauthenticated, as JSON and as a form.
    expectProblem(
      await server.request('POST', '/oauth/token', {
        body: { grant_type: 'client_credentials', client_id: 'a\u0000b', client_secret: 'x' },
      }),
      400,
      'AUD-1012',
    );
    expectProblem(
      await server.request('POST', '/oauth/token', {
        raw: 'grant_type=client_credentials&client_id=a%00b&client_secret=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      400,
      'AUD-1012',
    );
    expectProblem(await server.admin('POST', '/admin/accounts', { name: 'Nul\u0000' }), 400, 'AUD-1012');
  });

  it('refuses a lone UTF-16 surrogate in any text with 400 AUD-1013 naming the field, and stores nothing', async () => {
    const { token, accountId } = await server.login(SHOP);
    const lone = 'Ann\ud800';
    const email = 'com.vendor1.keyspaces.email';
    const profile = `/audience/keyspaces/${email}/profiles/lone@example.com/sections/${SHOP_SECTION}`;
    const attributes = (await server.request('GET', `/audience/sections/${SHOP_SECTION}/attributes`, { token })).body
      .items;
    const firstname = attributes.find(
      (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
    ).versions[0].id;
    const refused: [string, string, unknown, string][] = [
      ['POST', `/audience/keyspaces/${email}/sections/${SHOP_SECTION}/profiles`, { profile_key: lone }, 'profile_key'],
      ['PATCH', `${profile}/attributes`, { [firstname]: lone }, firstname],
      [
        'PATCH',
        `/v2${profile}/attributes`,
        { 'com.vendor1.attributes.firstname': lone },
        'com.vendor1.attributes.firstname',
      ],
      [
        'POST',
        `${profile}/events`,
        { items: [{ type: 'com.vendor1.events.page-view', version: 1, data: { title: lone } }] },
        'items[0].data.title',
      ],
      [
        'POST',
        `/v2/audience/sections/${SHOP_SECTION}/imports`,
        { keyspace_mapping: { keyspace_discriminator: email, field_selector: lone } },
        'keyspace_mapping.field_selector',
      ],
      [
        'POST',
        `/emails/sections/${SHOP_SECTION}/activities/transactional/tx-1/transactions`,
        {
          keyspace_discriminator: email,
          profile_key: 'lone@example.com',
          to_name: 'Ann',
          to_email_address: 'lone@example.com',
          variables: { [lone]: 1 },
        },
        `variables.${lone}`,
      ],
      ['POST', '/oauth/token', { grant_type: 'client_credentials', client_id: lone, client_secret: 'x' }, 'client_id'],
    ];
    for (const [method, path, body, field] of refused) {
      const res = await server.request(method, path, { token, body });
      expect(expectProblem(res, 400, 'AUD-1013'), `${method} ${path}`).toContain(`"${field}"`);
    }
    const activity = await server.admin('PUT', `/admin/accounts/${accountId}/activities/lone`, {
      kind: 'website',
      section_discriminator: SHOP_SECTION,
      name: lone,
    });
    expect(expectProblem(activity, 400, 'AUD-1013')).toContain('"name"');
    // Nothing was stored: the profile was never created, the activity does not exist.
    expectProblem(await server.request('GET', `${profile}/attributes`, { token }), 404);
    expectProblem(await server.admin('GET', `/admin/accounts/${accountId}/activities/lone`), 404);
    // A surrogate pair (an emoji) is a character like any other.
    expect(
      (await server.request('PATCH', `${profile}/attributes`, { token, body: { [firstname]: 'Ann \ud83d\ude00' } }))
        .status,
    ).toBe(204);
  });

  it(`refuses a body nested deeper than ${MAX_JSON_DEPTH} levels with 400 AUD-1014, unauthenticated too, JSON and forms`, async () => {
    const { token } = await server.login(SHOP);
    const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    const attributes = `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/deep@example.com/sections/${SHOP_SECTION}/attributes`;
    for (const levels of [MAX_JSON_DEPTH + 1, 10_000]) {
      const body = `{"grant_type":"client_credentials","client_id":"x","client_secret":${deep(levels)}}`;
      expectProblem(
        await server.request('POST', '/oauth/token', { raw: body, headers: { 'content-type': 'application/json' } }),
        400,
        'AUD-1014',
      );
      const patch = `{"com.vendor1.attributes.firstname":${deep(levels)}}`;
      expect(
        expectProblem(
          await server.request('PATCH', attributes, {
            token,
            raw: patch,
            headers: { 'content-type': 'application/merge-patch+json' },
          }),
          400,
          'AUD-1014',
        ),
      ).toContain('"com.vendor1.attributes.firstname');
      expectProblem(
        await server.request('POST', '/oauth/token', {
          raw: `grant_type=client_credentials&client_id=x&client_secret${'[a]'.repeat(levels)}=x`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
        400,
        'AUD-1014',
      );
    }
    // At the limit a body is read as usual: refused here by what it says (no such attribute), not by its depth.
    const atLimit = `{"com.vendor1.attributes.firstname":${deep(MAX_JSON_DEPTH - 1)}}`;
    expectProblem(
      await server.request('PATCH', attributes, {
        token,
        raw: atLimit,
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      400,
      'AUD-1206',
    );
  });

  it('refuses an account id that cannot be one with 400, not a 500 from the database', async () => {
    const res = await server.admin('DELETE', '/admin/accounts/99999999999999999999999/keys/x');
    expect(expectProblem(res, 400)).toContain('account_id');
  });

  it('answers a truncated multipart upload, unauthenticated, with 400 AUD-1810', async () => {
    const { token } = await server.login(SHOP);
    const attributes = (await server.request('GET', `/audience/sections/${SHOP_SECTION}/attributes`, { token })).body
      .items;
    const first = attributes.find(
      (a: { discriminator: string }) => a.discriminator === 'com.vendor1.attributes.firstname',
    ).versions[0].id;
    const created = await server.request('POST', `/v2/audience/sections/${SHOP_SECTION}/imports`, {
      token,
      body: {
        keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'first', attribute_version_id: first }],
      },
    });
    expect(created.status, created.text).toBe(201);
    // The signed fields, whole; the file part breaks off with no closing boundary.
    const boundary = 'XyZ';
    const fields = Object.entries(created.body.file_upload_body as Record<string, string>)
      .map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
      .join('');
    const truncated = `${fields}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.csv"\r\ncontent-type: text/csv\r\n\r\nemail;first\r\na@b.c`;
    const res = await server.request('POST', '/files/uploads', {
      raw: truncated,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.type).toBe('/errors/AUD-1810');
  });

  it('answers errors met before the routes as problem documents: a URL over 16 KB (431), bad percent-encoding and raw non-ASCII in a path (400)', async () => {
    const long = await rawRequest(`GET /audience/sections?x=${'a'.repeat(20_000)} HTTP/1.1\r\nhost: localhost\r\n\r\n`);
    expect(long).toMatchObject({
      status: 431,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 431, type: '/errors/AUD-1010', title: expect.any(String), detail: expect.any(String) },
    });
    const badEscape = await server.request('GET', '/audience/sections/%E0%A4%A/attributes');
    expectProblem(badEscape, 400, 'AUD-0');
    const nonAscii = await rawRequest(
      Buffer.concat([
        Buffer.from('GET /audience/sections/'),
        Buffer.from('ünï', 'utf8'),
        Buffer.from('/attributes HTTP/1.1\r\nhost: localhost\r\n\r\n'),
      ]),
    );
    expect(nonAscii).toMatchObject({
      status: 400,
      type: expect.stringMatching(/^application\/problem\+json/),
      body: { status: 400, detail: expect.any(String) },
    });
  });
});

import { describe, expect, it } from 'vitest';
import { SHOP, type Response, expectProblem } from '../../test/app.ts';
import { server, httpServer, SHOP_SECTION, TAGS } from '../../test/http-server.ts';

httpServer();

/** ERR-20: a success body never carries a top-level integer `status`. */
function expectSuccessBody(res: Response): void {
  expect(res.status).toBeLessThan(300);
  if (res.body && typeof res.body === 'object') expect(Number.isInteger(res.body.status)).toBe(false);
}

describe('problem documents (ERR-01, ERR-02, ERR-03, ERR-04, ERR-09)', () => {
  it('401 without a token is a problem document with AUD-8 (ERR-01..04, ERR-09, AUTH-09)', async () => {
    const res = await server.request('GET', '/audience/sections');
    expectProblem(res, 401, 'AUD-8');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('an unknown route answers 404 with AUD-1, with or without a token (ERR-01..04, ERR-09, ERR-11)', async () => {
    const { token } = await server.login();
    expectProblem(await server.request('GET', '/audience/nothing-here'), 404, 'AUD-1');
    const res = await server.request('GET', '/audience/nothing-here', { token });
    expectProblem(res, 404, 'AUD-1');
    expect(res.body.detail).toContain('/audience/nothing-here');
  });

  it('a known path with another method answers 405 with an Allow header (ERR-01..04, ERR-09)', async () => {
    const res = await server.request('DELETE', '/audience/sections');
    expectProblem(res, 405);
    expect(res.headers.get('allow')).toBe('GET');
    const tags = await server.request('DELETE', TAGS);
    expectProblem(tags, 405);
    expect(tags.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'POST']);
  });

  it('an unsupported Content-Type answers 415 (ERR-01..04, ERR-09)', async () => {
    const { token } = await server.login(SHOP);
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/xml']) {
      const res = await server.request('POST', TAGS, {
        token,
        raw: '{"name":"Typed"}',
        headers: { 'content-type': type },
      });
      expectProblem(res, 415, 'AUD-1005');
      expect(res.body.detail).toContain(type);
    }
    expect((await server.request('GET', TAGS, { token })).body.items.map((t: { name: string }) => t.name)).toEqual([
      'VIP',
    ]);
  });

  it('malformed JSON answers 400 (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, {
      token,
      raw: '{"name": "VIP',
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(res, 400);
    expect(res.body.detail).toMatch(/JSON/);
  });

  it('a wrong field type answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: ['VIP'] } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('a missing required field answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: {} });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
    expect(res.body.detail).toMatch(/required/);
  });

  it('a body field of the wrong type answers 400 naming the field (ERR-01..04, ERR-09, ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: ['New'], colour: 'red' } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('a body over 100 KB answers 413, as JSON or raw (LIM-08, ERR-17, ERR-01..04, ERR-09)', async () => {
    const { token } = await server.login(SHOP);
    const big = await server.request('POST', TAGS, { token, body: { name: 'x'.repeat(101 * 1024) } });
    expectProblem(big, 413);
    const raw = await server.request('POST', TAGS, {
      token,
      raw: ' '.repeat(150 * 1024),
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(raw, 413);
    // Nothing was created.
    const list = await server.request('GET', TAGS, { token });
    expect(list.body.items.map((t: { name: string }) => t.name)).toEqual(['VIP']);
  });

  it('a body just under 100 KB is read and then validated (LIM-08)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: 'x'.repeat(99 * 1024) } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
  });

  it('success bodies carry no integer status (ERR-20)', async () => {
    const { token, clientId, clientSecret } = await server.login(SHOP);
    expectSuccessBody(await server.request('GET', '/audience/sections', { token }));
    expectSuccessBody(await server.request('GET', TAGS, { token }));
    expectSuccessBody(await server.request('POST', TAGS, { token, body: { name: 'Status' } }));
    expectSuccessBody(
      await server.request('POST', '/oauth/token', {
        body: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
      }),
    );
    expectSuccessBody(await server.request('GET', '/healthz'));
    expectSuccessBody(await server.request('GET', '/errors/AUD-8'));
  });
});

describe('body validation (STYLE practice 4)', () => {
  it('does not coerce body values: a tag name sent as the number 12 is refused, not stored as "12" (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('POST', TAGS, { token, body: { name: 12 } });
    expectProblem(res, 400);
    expect(res.body.detail).toContain('"name"');
    const list = await server.request('GET', TAGS, { token });
    expect(list.body.items.map((t: { name: string }) => t.name)).not.toContain('12');
  });

  it('ignores unknown top-level fields of a public body, as the platform does: not stored, nothing changed (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const accepted = await server.request('POST', TAGS, {
      token,
      body: { name: 'Extra', extra: true, time_zone: 'Europe/Oslo' },
    });
    expect(accepted.status, accepted.text).toBe(201);
    expect(accepted.body).toEqual({
      discriminator: expect.any(String),
      name: 'Extra',
      id: expect.stringMatching(/^\d+$/),
    });
    const stored = (await server.request('GET', `${TAGS}/${accepted.body.discriminator}`, { token })).body;
    expect(stored).toEqual(accepted.body);
  });

  it('checks the keys of data bodies (merge-patch maps) and of operator bodies, naming the field (ERR-10)', async () => {
    const { token } = await server.login(SHOP);
    const created = await server.request(
      'POST',
      `/audience/keyspaces/com.vendor1.keyspaces.email/sections/${SHOP_SECTION}/profiles`,
      { token, body: { profile_key: 'datamap@example.com' } },
    );
    expect(created.status).toBe(201);
    const tags = await server.request(
      'PATCH',
      `/audience/keyspaces/com.vendor1.keyspaces.email/profiles/datamap@example.com/sections/${SHOP_SECTION}/tags`,
      { token, body: { 'no.such.tag': true } },
    );
    expectProblem(tags, 400, 'AUD-1218');
    expect(tags.body.detail).toContain('no.such.tag');
    const operator = await server.admin('POST', '/admin/accounts', { name: 'Typo', limit: {} });
    expectProblem(operator, 400);
    expect(operator.body.detail).toContain('"limit"');
  });

  it('coerces query values: include_keyspace_permissions=true is read as a boolean (DEF-06)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('GET', `${TAGS}?include_keyspace_permissions=true`, { token });
    expect(res.status).toBe(200);
    expect(res.body.items[0].keyspace_permissions).toBeTypeOf('object');
    const wrong = await server.request('GET', `${TAGS}?include_keyspace_permissions=perhaps`, { token });
    expectProblem(wrong, 400);
    expect(wrong.body.detail).toContain('include_keyspace_permissions');
  });
});

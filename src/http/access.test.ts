import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('operator API', () => {
  it('refuses requests without the admin token with a 401 problem (AUTH-09)', async () => {
    expectProblem(await server.request('GET', '/admin/accounts'), 401, 'AUD-8');
    expectProblem(await server.request('POST', '/admin/accounts', { body: { name: 'intruder' } }), 401, 'AUD-8');
    expectProblem(await server.request('GET', '/admin/accounts', { token: 'not-the-admin-token' }), 401, 'AUD-8');
  });

  it('refuses a public API token (AUTH-09)', async () => {
    const { accountId, token } = await server.login();
    expectProblem(await server.request('GET', '/admin/accounts', { token }), 401, 'AUD-8');
    expectProblem(
      await server.request('PATCH', `/admin/accounts/${accountId}`, {
        token,
        body: { limits: { requests_per_second: null } },
      }),
      401,
      'AUD-8',
    );
  });
});

describe('tenant isolation (AUTH-17)', () => {
  it("an account's token reads nothing of another account", async () => {
    const alpha = { sections: [{ name: 'Alpha', tags: [{ name: 'A tag' }] }] };
    const beta = { sections: [{ name: 'Beta', tags: [{ name: 'B tag' }] }] };
    const a = await server.login(alpha);
    const b = await server.login(beta);
    const seenByA = await server.request('GET', '/audience/sections', { token: a.token });
    expect(seenByA.body.items.map((s: { discriminator: string }) => s.discriminator)).toEqual([
      'com.vendor1.sections.user-created.alpha',
    ]);
    const betaTags = '/audience/sections/com.vendor1.sections.user-created.beta/tags';
    expect((await server.request('GET', betaTags, { token: b.token })).status).toBe(200);
    expectProblem(await server.request('GET', betaTags, { token: a.token }), 404, 'AUD-1102');
    expectProblem(
      await server.request('POST', betaTags, { token: a.token, body: { name: 'Sneaky' } }),
      404,
      'AUD-1102',
    );
    const bList = await server.request('GET', betaTags, { token: b.token });
    expect(bList.body.items.map((t: { name: string }) => t.name)).toEqual(['B tag']);
  });
});

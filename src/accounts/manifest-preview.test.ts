import { describe, expect, it } from 'vitest';
import { SHOP } from '../../test/app.ts';
import { httpServer, server } from '../../test/http-server.ts';

// The preview of a manifest (the console shows it before an apply): the summary an apply would
// answer, or its refusal, with nothing changed.

httpServer();

describe('POST /admin/accounts/{id}/manifest/preview', () => {
  it('answers what an apply would create, change and leave alone, and changes nothing', async () => {
    const { accountId } = await server.createAccount({ sections: [{ name: 'Shop' }] });
    const manifest = { ...SHOP, account: { name: 'Renamed shop' } };
    const preview = await server.admin('POST', `/admin/accounts/${accountId}/manifest/preview`, manifest);
    expect(preview.status, preview.text).toBe(200);
    expect(preview.body.created).toContain(
      'attribute com.vendor1.attributes.user-created.points in section com.vendor1.sections.user-created.shop',
    );
    expect(preview.body.changed).toEqual([`account ${accountId}`]);
    expect(preview.body.unchanged).toContain('section com.vendor1.sections.user-created.shop');

    // Nothing changed: the apply that follows answers the same summary, and the name changes only then.
    expect((await server.admin('GET', `/admin/accounts/${accountId}`)).body.name).not.toBe('Renamed shop');
    const applied = await server.admin('PUT', `/admin/accounts/${accountId}/manifest`, manifest);
    expect(applied.body).toEqual(preview.body);
    expect((await server.admin('GET', `/admin/accounts/${accountId}`)).body.name).toBe('Renamed shop');
  });

  it('refuses what an apply would refuse, naming the field, and needs the operator token', async () => {
    const { accountId, clientId, clientSecret } = await server.createAccount();
    const bad = await server.admin('POST', `/admin/accounts/${accountId}/manifest/preview`, {
      sections: [{ name: 'Shop', attributes: [{ name: 'Points', versions: [{ type: ['Colour'] }] }] }],
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/problem\+json/);
    expect(bad.text).toMatch(/type/);
    const token = await server.token({ clientId, clientSecret });
    expect(
      (await server.request('POST', `/admin/accounts/${accountId}/manifest/preview`, { token, body: {} })).status,
    ).toBe(401);
    expect((await server.admin('POST', '/admin/accounts/999999/manifest/preview', {})).status).toBe(404);
  });
});

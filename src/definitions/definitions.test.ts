import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOP, TestServer } from '../../test/app.ts';

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

describe('GET /audience/sections', () => {
  it('lists the sections of the manifest (DEF-04)', async () => {
    const { token } = await server.login(SHOP);
    const res = await server.request('GET', '/audience/sections', { token });
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([{ discriminator: 'com.vendor1.sections.user-created.shop', name: 'Shop', description: '', id: expect.stringMatching(/^\d+$/) }]);
  });
});

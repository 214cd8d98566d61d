import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { EMAIL, EMAIL_CH, MOBILE, NS, SMS_CH, WEEKLY } from '../../test/consents.ts';
import type { Manifest } from '../definitions/schemas.ts';
import {
  MANIFEST,
  ROOT,
  account,
  consent,
  consentsServer,
  createProfile,
  enc,
  expectEmpty,
  getConsents,
  may,
  postConsent,
  run,
  server,
  suppress,
} from '../../test/consents-http.ts';

/**
 * Suppressions through the operator API, the manifest and the CLI, against a real database
 * (CHECKLIST "Consents and suppression").
 */

consentsServer();

describe('suppressions: operator API, manifest and CLI', () => {
  it('PUT, GET and DELETE /admin/accounts/{id}/suppressions manage suppressions with a reason; addresses are normalised', async () => {
    const a = await account();
    const list = async () => {
      const r = await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`);
      expect(r.status, r.text).toBe(200);
      return r.body.items;
    };
    expect(await list()).toEqual([]);
    expectEmpty(await suppress(a, EMAIL_CH, ' Ann@Example.COM ', 'Hard bounce'), 204);
    expectEmpty(await suppress(a, SMS_CH, '0047 412 34 567', 'Number recycled'), 204);
    expect(await list()).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'ann@example.com', reason: 'Hard bounce' },
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    // Again: the reason changes, no second record.
    expectEmpty(await suppress(a, EMAIL_CH, 'ann@example.com', 'Spam complaint'), 204);
    expect(await list()).toContainEqual({
      channel_discriminator: EMAIL_CH,
      address: 'ann@example.com',
      reason: 'Spam complaint',
    });
    expect(await list()).toHaveLength(2);

    expectProblem(await suppress(a, `${NS}.channels.fax`, 'x@example.com'), 400, 'AUD-1607');
    expectProblem(await suppress(a, EMAIL_CH, 'not-an-address'), 400);
    expectProblem(
      await server.admin('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
        channel_discriminator: EMAIL_CH,
        address: 'x@example.com',
      }),
      400,
    );
    expectProblem(
      await server.admin('PUT', '/admin/accounts/999999999/suppressions', {
        channel_discriminator: EMAIL_CH,
        address: 'x@example.com',
        reason: 'Why',
      }),
      404,
    );
    expectProblem(await server.admin('GET', '/admin/accounts/999999999/suppressions'), 404);
    // The operator API wants the operator token.
    expectProblem(
      await server.request('GET', `/admin/accounts/${a.accountId}/suppressions`, { token: a.token }),
      401,
      'AUD-8',
    );
    expectProblem(
      await server.request('PUT', `/admin/accounts/${a.accountId}/suppressions`, {
        token: a.token,
        body: { channel_discriminator: EMAIL_CH, address: 'x@example.com', reason: 'Why' },
      }),
      401,
      'AUD-8',
    );
    expect(await list()).toHaveLength(2);

    expectEmpty(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ANN%40example.com`),
      204,
    );
    expect(await list()).toEqual([
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    expectProblem(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${EMAIL_CH}/ann%40example.com`),
      404,
    );
    expectEmpty(
      await server.admin('DELETE', `/admin/accounts/${a.accountId}/suppressions/${SMS_CH}/${enc('+4741234567')}`),
      204,
    );
    expect(await list()).toEqual([]);
  });

  it("a manifest's suppressions are applied, with {vendor} replaced, and take priority over consents", async () => {
    const manifest: Manifest = {
      ...MANIFEST,
      suppressions: [
        { channel_discriminator: 'com.{vendor}1.channels.email', address: 'Blocked@Example.com', reason: 'Legal hold' },
        { channel_discriminator: 'com.{vendor}1.channels.sms', address: '+4741234567', reason: 'Number recycled' },
      ],
    };
    const a = await account(manifest);
    const r = await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`);
    expect(r.body.items).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'blocked@example.com', reason: 'Legal hold' },
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
    // Applying it again changes nothing, and says so.
    const again = await server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, manifest);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ created: [], changed: [] });
    expect(again.body.unchanged).toEqual(
      expect.arrayContaining([
        `suppression of blocked@example.com on ${EMAIL_CH}`,
        `suppression of +4741234567 on ${SMS_CH}`,
      ]),
    );
    expect((await server.admin('GET', `/admin/accounts/${a.accountId}/suppressions`)).body.items).toEqual(r.body.items);

    await createProfile(a, EMAIL, 'blocked@example.com');
    expectEmpty(await postConsent(a, EMAIL, 'blocked@example.com', consent(WEEKLY, EMAIL_CH, 'opt-in')), 201);
    expect((await getConsents(a, EMAIL, 'blocked@example.com')).body.suppression).toEqual([
      { channel_discriminator: EMAIL_CH, address: 'blocked@example.com', reason: 'Legal hold' },
    ]);
    expect(await may(a, EMAIL, 'blocked@example.com', WEEKLY, EMAIL_CH)).toBe(false);

    // An unknown channel in a manifest refuses the whole apply.
    const bad = await server.admin('PUT', `/admin/accounts/${a.accountId}/manifest`, {
      suppressions: [{ channel_discriminator: 'com.{vendor}1.channels.fax', address: 'x@example.com', reason: 'Why' }],
    });
    expectProblem(bad, 400, 'AUD-1607');
  });

  it('the CLI applies a manifest with suppressions and adds, lists and removes suppressions', async () => {
    const a = await account();
    const env = { ...process.env, AUDIENCE_URL: server.url, ADMIN_TOKEN: server.services.adminToken };
    const cli = async (...args: string[]) =>
      JSON.parse((await run(path.join(ROOT, 'bin', 'audience'), args, { env })).stdout);
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-consents-'));
    try {
      const file = path.join(dir, 'manifest.json');
      await fs.writeFile(
        file,
        JSON.stringify({
          suppressions: [
            {
              channel_discriminator: 'com.{vendor}1.channels.email',
              address: 'cli@example.com',
              reason: 'From the CLI',
            },
          ],
        }),
      );
      await cli('apply', file, '--account', a.accountId);
      const listed = await cli('suppression', 'list', '--account', a.accountId);
      expect(listed.items).toEqual([
        { channel_discriminator: EMAIL_CH, address: 'cli@example.com', reason: 'From the CLI' },
      ]);
      const added = await cli(
        'suppression',
        'add',
        '--account',
        a.accountId,
        '--channel',
        SMS_CH,
        '--address',
        '+4741234567',
        '--reason',
        'Number recycled',
      );
      expect(added.items).toHaveLength(2);
      const removed = await cli(
        'suppression',
        'remove',
        '--account',
        a.accountId,
        '--channel',
        EMAIL_CH,
        '--address',
        'cli@example.com',
      );
      expect(removed.items).toEqual([
        { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
      ]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    await createProfile(a, MOBILE, '+4741234567');
    expect((await getConsents(a, MOBILE, '+4741234567')).body.suppression).toEqual([
      { channel_discriminator: SMS_CH, address: '+4741234567', reason: 'Number recycled' },
    ]);
  }, 120_000);
});

import { describe, expect, test } from 'vitest';
import { CHROMIUM, checkPage, consoleBrowser, signInAsOperator, signInWithKey } from './browser.ts';

// A browser on a busy machine is slow: generous time for each test (no test depends on it).
describe.skipIf(!CHROMIUM)('the console for the operator', { timeout: 180_000 }, () => {
  const b = consoleBrowser();

  test('the console is served with a strict Content-Security-Policy and no inline script runs', async () => {
    const res = await fetch(`${b.server.url}/console`, { headers: { 'accept-encoding': 'br' } });
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
    expect(csp).not.toContain('unsafe');
    expect(res.headers.get('content-encoding')).toBe('br');
    // Only the listed libraries of node_modules are served, and no path leaves web/console.
    expect((await fetch(`${b.server.url}/console/vendor/preact.js`)).status).toBe(200);
    for (const bad of ['vendor/..%2Fpackage.json', '..%2F..%2Fpackage.json', 'vendor/typescript.js', '.hidden.js'])
      expect((await fetch(`${b.server.url}/console/${bad}`)).status).toBe(404);
  });

  test('signs in as the operator, creates an account and a key whose secret signs in once', async () => {
    const page = await b.open();
    await page.goto(`${b.server.url}/console`);
    await checkPage(page, 'sign-in');
    await page.getByLabel('Operator token').fill('not the token');
    await page.getByRole('button', { name: 'Sign in as operator' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('refused');

    await signInAsOperator(page, b.server);
    await page.getByLabel("New account's name").fill('Console shop');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Account Console shop' }).waitFor();
    const accountId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
    expect((await b.server.admin('GET', `/admin/accounts/${accountId}`)).body.name).toBe('Console shop');
    await checkPage(page, 'account');

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Name', { exact: true }).fill('console key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const clientId = (await page.getByTestId('client-id').textContent())!;
    const clientSecret = (await page.getByTestId('client-secret').textContent())!;
    await checkPage(page, 'keys');
    const keys = (await b.server.admin('GET', `/admin/accounts/${accountId}/keys`)).body.items;
    expect(keys.map((k: { client_id: string }) => k.client_id)).toEqual([clientId]);

    // The secret signs in (a new tab: nothing of the operator's session is shared) ...
    const other = await b.open(390);
    await signInWithKey(other, b.server, { clientId, clientSecret });
    await expect.poll(() => other.getByTestId('who').textContent()).toContain(accountId);
    await other.close();
    // ... and is not shown again.
    await page.reload();
    await page.getByLabel('Operator token').waitFor();
    await signInAsOperator(page, b.server);
    await page.goto(`${b.server.url}/console#/accounts/${accountId}/keys`);
    await page.getByRole('cell', { name: clientId }).waitFor();
    expect(await page.content()).not.toContain(clientSecret);
    await page.close();
    expect(b.errors).toEqual([]);
  });
});

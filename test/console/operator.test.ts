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
    // The header names the account and the key, as the API says who calls (their ids in its tooltip).
    await expect.poll(() => other.getByTestId('who').textContent()).toBe('Console shop · key console key');
    expect(await other.getByTestId('who').getAttribute('title')).toBe(`Account ${accountId}, API key ${clientId}`);
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

  test('edits definitions through a previewed manifest, connects an integration, suppresses an address, deletes the account', async () => {
    const { accountId } = await b.server.createAccount();
    const page = await b.open();
    await signInAsOperator(page, b.server);
    await page.goto(`${b.server.url}/console#/accounts/${accountId}/manifest`);
    const manifest = { sections: [{ name: 'Club', tags: [{ name: 'Gold' }] }] };
    await page.getByLabel('Manifest (JSON)').fill(JSON.stringify(manifest, null, 2));
    const apply = page.getByRole('button', { name: 'Apply' });
    expect(await apply.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.getByTestId('created').getByText('tag com.vendor1.tags.user-created.gold', { exact: false }).waitFor();
    // The preview changed nothing.
    const sections = async () =>
      (await b.server.admin('POST', `/admin/accounts/${accountId}/manifest/preview`, manifest)).body.created;
    expect(await sections()).toContain('section com.vendor1.sections.user-created.club');
    await checkPage(page, 'manifest');
    await apply.click();
    await page.getByRole('heading', { name: 'Applied' }).waitFor();
    expect(await sections()).toEqual([]);
    // Load current: the account's manifest as it stands, which a preview finds nothing to create or change in.
    await page.getByRole('button', { name: 'Load current' }).click();
    const editor = page.getByLabel('Manifest (JSON)');
    await expect.poll(() => editor.inputValue()).toContain('"com.vendor1.tags.user-created.gold"');
    expect(JSON.parse(await editor.inputValue())).toEqual(
      (await b.server.admin('GET', `/admin/accounts/${accountId}/manifest`)).body,
    );
    expect(await apply.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.getByRole('heading', { name: 'Left alone', exact: false }).waitFor();
    await page.getByRole('heading', { name: 'Created (0)' }).waitFor();
    await page.getByRole('heading', { name: 'Changed (0)' }).waitFor();
    await checkPage(page, 'manifest-current');

    await page.getByRole('link', { name: 'Integrations' }).click();
    await page.getByLabel('System', { exact: true }).fill('magento');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('cell', { name: 'magento', exact: true }).waitFor();
    await checkPage(page, 'integrations');

    await page.getByRole('link', { name: 'Suppressions' }).click();
    await page.getByLabel('Channel', { exact: true }).fill('com.vendor1.channels.email');
    await page.getByLabel('Address', { exact: true }).fill('bounced@example.com');
    await page.getByLabel('Reason', { exact: true }).fill('hard bounce');
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByRole('cell', { name: 'bounced@example.com' }).waitFor();
    await checkPage(page, 'suppressions');
    expect((await b.server.admin('GET', `/admin/accounts/${accountId}/suppressions`)).body.items).toHaveLength(1);

    await page.getByRole('link', { name: 'Jobs' }).click();
    await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
    await page
      .getByText(/jobs by kind and state|The queue is empty/)
      .first()
      .waitFor();
    await checkPage(page, 'jobs');

    // Deleting asks first: cancelled, the account stays; confirmed, it is gone.
    await page.goto(`${b.server.url}/console#/accounts/${accountId}`);
    await page.getByRole('button', { name: 'Delete account' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await b.server.admin('GET', `/admin/accounts/${accountId}`)).status).toBe(200);
    await page.getByRole('button', { name: 'Delete account' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete for good' }).click();
    await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
    expect((await b.server.admin('GET', `/admin/accounts/${accountId}`)).status).toBe(404);
    await checkPage(page, 'accounts');
    expect(b.errors).toEqual([]);
  });

  test('says in plain words what went wrong, with a retry, and where the credentials are', async () => {
    // Browsers ask for the site's icon: it is there.
    const icon = await fetch(`${b.server.url}/favicon.ico`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');

    const page = await b.open();
    await page.goto(`${b.server.url}/console`);
    const signIn = page.getByRole('main');
    await expect.poll(() => signIn.textContent()).toContain('demo-credentials.json');
    expect(await signIn.textContent()).toContain('admin-token');

    await signInAsOperator(page, b.server);
    // A proxy in front of the service answers an HTML page of its own: a sentence, not its markup.
    const proxy = async (route: import('playwright-core').Route) =>
      route.fulfill({
        status: 503,
        contentType: 'text/html',
        body: '<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>',
      });
    await page.route('**/admin/jobs**', proxy);
    await page.getByRole('link', { name: 'Jobs' }).click();
    const alert = page.getByRole('alert').first();
    await expect.poll(() => alert.textContent()).toContain('A proxy in front of the service answered 503');
    expect(await alert.textContent()).not.toContain('<');
    await checkPage(page, 'error-proxy');
    // Once the service answers again, "Try again" shows the page's data.
    await page.unroute('**/admin/jobs**', proxy);
    // Every part that failed has its own "Try again": all clicked at once.
    const retryAll = async () => {
      await page.getByRole('button', { name: 'Try again' }).first().waitFor();
      await page.evaluate("for (const button of document.querySelectorAll('button.retry')) button.click()");
    };
    await retryAll();
    await page
      .getByText(/jobs by kind and state|The queue is empty/)
      .first()
      .waitFor();

    // No answer at all, to a page's module and to a request: said so, and asked again on a click.
    const { accountId } = await b.server.createAccount();
    await page.route('**/console/pages/keys.js', (route) => route.abort('connectionrefused'));
    await page.route('**/admin/accounts/*/keys', (route) => route.abort('connectionrefused'));
    await page.goto(`${b.server.url}/console#/accounts/${accountId}/keys`);
    await page.getByText('This page could not be loaded').waitFor();
    await page.unroute('**/console/pages/keys.js');
    await page.getByRole('button', { name: 'Load the page again' }).click();
    await expect.poll(() => alert.textContent()).toContain('The service is not answering');
    await page.unroute('**/admin/accounts/*/keys');
    await retryAll();
    await page.getByRole('button', { name: 'Revoke' }).waitFor();

    // A refused sign-in after signing out says one thing: that it was refused.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You signed out.').waitFor();
    await page.getByLabel('Operator token').fill('not the token');
    await page.getByRole('button', { name: 'Sign in as operator' }).click();
    await expect.poll(() => page.locator('.note').allTextContents()).toEqual(['The operator token was refused.']);
    await page.close();
    // The refused connections are the browser's own reports of what the test refused.
    expect(b.errors.filter((e) => !/ERR_CONNECTION_REFUSED|Failed to fetch/.test(e))).toEqual([]);
  });
});

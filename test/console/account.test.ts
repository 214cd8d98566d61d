import { beforeAll, describe, expect, test } from 'vitest';
import type { Page } from 'playwright-core';
import { SHOP } from '../app.ts';
import { CHROMIUM, checkPage, consoleBrowser, signInWithKey } from './browser.ts';

// The console of an account: definitions and profiles, through its API key and within its sections.

const EMAIL = 'com.vendor1.keyspaces.email';
const SHOP_S = 'com.vendor1.sections.user-created.shop';
const CLUB_S = 'com.vendor1.sections.user-created.club';
const HOSTILE = '<img src=x onerror=alert(1)>';
const KEY = 'ada@example.com';
const WEB = 'com.vendor1.keyspaces.web';
const COOKIE = 'cookie-4711';

// A browser on a busy machine is slow: generous time for each test (no test depends on it).
describe.skipIf(!CHROMIUM)('the console of an account', { timeout: 180_000 }, () => {
  const b = consoleBrowser();
  let full: { clientId: string; clientSecret: string };
  let clubOnly: { clientId: string; clientSecret: string };

  beforeAll(async () => {
    const { server } = b;
    // The test server's clock stands still, so spent rate limits never come back: lift the one a
    // profile page spends (each section's attributes, tags, consents and events are profile key operations).
    const account = await server.login(
      {
        ...SHOP,
        sections: [
          ...SHOP.sections!,
          { name: 'Club', attributes: [{ name: 'Level', versions: [{ type: ['Text'] }] }] },
        ],
      },
      { requests_per_second: null, token_requests_per_minute: null, profile_key_operations_per_second: null },
    );
    full = account;
    clubOnly = await server.createKey(account.accountId, { section_discriminators: [CLUB_S] });
    const at = (section: string) =>
      `/v2/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(KEY)}/sections/${section}`;
    const patch = (section: string, body: unknown) =>
      server.request('PATCH', `${at(section)}/attributes`, {
        token: account.token,
        body,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
    const created = await server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP_S}/profiles`, {
      token: account.token,
      body: { profile_key: KEY },
    });
    expect(created.status, created.text).toBe(201);
    // A first name replaced by another: the first one is in the attribute history.
    expect((await patch(SHOP_S, { 'com.vendor1.attributes.firstname': 'Ada' })).status).toBeLessThan(300);
    server.clock.advance(60_000);
    expect((await patch(SHOP_S, { 'com.vendor1.attributes.firstname': HOSTILE })).status).toBeLessThan(300);
    // Merged with the profile of a browser cookie, created later: the cluster shows both.
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token: account.token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: KEY },
          { keyspace_discriminator: WEB, profile_key: COOKIE },
        ],
      },
    });
    expect(merged.status, merged.text).toBe(204);
    expect((await patch(CLUB_S, { 'com.vendor1.attributes.user-created.level': 'gold' })).status).toBeLessThan(300);
    const consent = await server.request('POST', `${at(SHOP_S)}/consents`, {
      token: account.token,
      body: {
        topic_discriminator: 'com.vendor1.topics.user-created.weekly-news',
        channel_discriminator: 'com.vendor1.channels.email',
        type: 'opt-in',
        reason: 'signed up in the shop',
      },
    });
    expect(consent.status, consent.text).toBe(201);
    const defs = await server.request('GET', `/audience/sections/${SHOP_S}/events`, { token: account.token });
    const pageView = defs.body.items.find((e: { name: string }) => e.name === 'Page view').versions[0].id;
    const posted = await server.request(
      'POST',
      `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(KEY)}/sections/${SHOP_S}/events`,
      {
        token: account.token,
        body: {
          items: [
            { event_time: '2026-03-01T10:00:00Z', version_id: pageView, data: { title: 'Home', url: '/' } },
            { event_time: '2026-03-02T11:30:00Z', version_id: pageView, data: { title: '<b>Basket</b>' } },
          ],
        },
      },
    );
    expect(posted.status, posted.text).toBe(204);
  });

  /** Finds the profile through the find page. */
  async function findProfile(page: Page): Promise<void> {
    await page.getByRole('link', { name: 'Find a profile' }).click();
    await page.getByLabel('Keyspace').selectOption(EMAIL);
    await page.getByLabel('Key', { exact: true }).fill(KEY);
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByRole('heading', { name: `Profile ${KEY}`, level: 1 }).waitFor();
  }

  test('finds a profile by a key and reads its sections and its timeline; a hostile value shows as text', async () => {
    const page = await b.open();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await signInWithKey(page, b.server, full);
    await checkPage(page, 'find-profile');
    await findProfile(page);
    const shop = page.getByRole('region', { name: 'Shop' });
    await shop.getByRole('table', { name: 'Attribute history, newest first' }).waitFor();
    // The value now and the one it replaced, newest first, with their times.
    const history = shop.getByRole('table', { name: 'Attribute history, newest first' });
    const firstNames = history.getByRole('row').filter({ hasText: 'First name' });
    await expect.poll(() => firstNames.count()).toBe(2);
    expect(await firstNames.nth(0).textContent()).toContain(HOSTILE);
    expect(await firstNames.nth(0).textContent()).toContain('now shown');
    expect(await firstNames.nth(1).getByRole('cell').nth(1).textContent()).toBe('Ada');
    expect(await firstNames.nth(1).locator('time').count()).toBe(2);
    await shop.getByRole('cell', { name: HOSTILE }).first().waitFor();
    const timeline = shop.getByRole('list', { name: 'Events in Shop, newest first' });
    await expect.poll(() => timeline.getByRole('listitem').count()).toBe(2);
    // Newest first, each with its name and data.
    expect(await timeline.getByRole('listitem').first().textContent()).toMatch(/Page view[\s\S]*<b>Basket<\/b>/);
    await page.getByRole('region', { name: 'Club' }).getByRole('cell', { name: 'gold' }).first().waitFor();
    await shop.getByRole('cell', { name: 'signed up in the shop' }).waitFor();
    // Topics and channels by their names, not their discriminators.
    const consentRow = shop.getByRole('row').filter({ hasText: 'signed up in the shop' });
    expect(await consentRow.getByRole('cell').nth(0).textContent()).toBe('Weekly news');
    expect(await consentRow.getByRole('cell').nth(1).textContent()).toBe('Email');
    // The value is text: no element was made of it, no script ran.
    expect(await page.locator('main img, main b').count()).toBe(0);
    expect(dialogs).toEqual([]);
    // The merge cluster: the profile, canonical, and the cookie's, merged, each key a link to it.
    const cluster = page.getByRole('table', { name: 'Profiles of the cluster' });
    await expect.poll(() => cluster.getByRole('row').count()).toBe(3);
    expect(await cluster.getByRole('row').nth(1).textContent()).toMatch(/canonical[\s\S]*ada@example\.com/);
    expect(await cluster.getByRole('row').nth(2).textContent()).toMatch(/merged[\s\S]*cookie-4711/);
    await checkPage(page, 'profile');
    await cluster.getByRole('link', { name: COOKIE }).click();
    await page.getByRole('heading', { name: `Profile ${COOKIE}`, level: 1 }).waitFor();
    // Through the cookie, the cluster's values.
    await page.getByRole('region', { name: 'Club' }).getByRole('cell', { name: 'gold' }).first().waitFor();

    await page.getByRole('link', { name: 'Definitions' }).click();
    await page.getByRole('cell', { name: 'com.vendor1.attributes.user-created.points' }).waitFor();
    await checkPage(page, 'definitions');

    // At phone width the same page is usable: the menu sits above the page.
    const phone = await b.open(390);
    await signInWithKey(phone, b.server, full);
    await findProfile(phone);
    await phone.getByRole('region', { name: 'Shop' }).getByRole('cell', { name: HOSTILE }).first().waitFor();
    await checkPage(phone, 'profile-phone');
    expect(b.errors).toEqual([]);
  });

  test('a key restricted to a section sees that section only, as the API answers it', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, clubOnly);
    await findProfile(page);
    await page.getByRole('region', { name: 'Club' }).getByRole('cell', { name: 'gold' }).first().waitFor();
    // The sections the API lists for the key are the ones shown; asked for another, the API refuses.
    // The merge cluster, which joins every section, is not read through it.
    expect(await page.locator('main').getByRole('heading', { level: 2 }).allTextContents()).toEqual([
      'Merge cluster',
      'Club',
    ]);
    await page.getByText('Only a key granted every section may read a merge cluster.').waitFor();
    await page.goto(`${b.server.url}/console#/definitions?section=${SHOP_S}`);
    await page.getByRole('heading', { name: 'Attributes' }).waitFor();
    await expect.poll(() => page.getByRole('alert').first().textContent()).toMatch(/403/);
    expect(await page.content()).not.toContain('onerror');
    expect(await page.getByText('Basket').count()).toBe(0);
    await checkPage(page, 'profile-restricted');
  });

  test('signing out forgets the credential: nothing is stored, and the console asks to sign in again', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, full);
    expect(await page.evaluate('JSON.stringify([localStorage.length, sessionStorage.length, document.cookie])')).toBe(
      '[0,0,""]',
    );
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Client id').waitFor();
    await page.getByRole('status').filter({ hasText: 'You signed out.' }).waitFor();
    await page.goto(`${b.server.url}/console#/profiles`);
    await page.getByLabel('Client id').waitFor();
  });
});

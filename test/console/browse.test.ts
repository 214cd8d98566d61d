import { beforeAll, describe, expect, test } from 'vitest';
import type { Manifest } from '../../src/definitions/schemas.ts';
import { SHOP } from '../app.ts';
import { CallbackReceiver } from '../callbacks.ts';
import { CHROMIUM, checkPage, consoleBrowser, signInWithKey } from './browser.ts';

// The marketer's browsing, driven in chromium against a server with a worker, each page checked
// against the API: the overview's growth over 30 days, the section's profiles paged and searched
// by a key's beginning and an attribute's value, a segment made live and stopped, and the
// account's webhooks with their deliveries and a replay. Stored values include a hostile one.

const SECTION = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';
const POINTS = 'com.vendor1.attributes.user-created.points';
const NICKNAME = 'com.vendor1.attributes.user-created.nickname';
const HOSTILE = '<img src=x onerror=alert(1)>';
const DAY = 86_400_000;
/** How long a poll waits for the state it expects: long, as a loaded machine is slow; nothing is timed. */
const WAIT = { timeout: 90_000 };

const MANIFEST: Manifest = {
  ...SHOP,
  sections: [
    {
      ...SHOP.sections![0],
      attributes: [...SHOP.sections![0].attributes!, { name: 'Nickname', versions: [{ type: ['Text' as const] }] }],
    },
  ],
};

describe.skipIf(!CHROMIUM)("the console's browsing", { timeout: 300_000 }, () => {
  const b = consoleBrowser({ worker: true, env: { CALLBACKS_ALLOW_PRIVATE: 'true' } });
  let account: { accountId: string; clientId: string; clientSecret: string; token: string };
  let receiver: CallbackReceiver;
  const get = async (path: string) => {
    const res = await b.server.request('GET', path, { token: account.token });
    expect(res.status, res.text).toBe(200);
    return res.body;
  };

  beforeAll(async () => {
    account = await b.server.login(MANIFEST, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_key_operations_per_second: null,
    });
    // 30 profiles: 4 created 3 days ago (with a token of then), 26 today; the 21st has a hostile nickname.
    const now = b.server.clock.now;
    b.server.clock.now = now - 3 * DAY;
    const then = await b.server.token(account);
    for (let i = 0; i < 30; i++) {
      if (i === 4) b.server.clock.now = now;
      const token = i < 4 ? then : account.token;
      const key = `shopper-${String(i).padStart(2, '0')}@example.com`;
      const created = await b.server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
        token,
        body: { profile_key: key },
      });
      expect(created.status, created.text).toBe(201);
      const res = await b.server.request(
        'PATCH',
        `/v2/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SECTION}/attributes`,
        {
          token,
          body: { [POINTS]: i * 10, [NICKNAME]: i === 20 ? HOSTILE : `shopper ${i}` },
          headers: { 'content-type': 'application/merge-patch+json' },
        },
      );
      expect(res.status, res.text).toBe(204);
    }
    b.server.clock.now = now;
    receiver = await CallbackReceiver.start();
    return () => receiver.close();
  });

  test("the overview charts the section's growth over 30 days, as the API counts it", async () => {
    const growth = (await get(`/audience/sections/${SECTION}/profiles/growth?days=30`)).items;
    const added = growth.reduce((n: number, d: { new_profiles: number }) => n + d.new_profiles, 0);
    expect(added).toBe(30);
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await expect
      .poll(() => page.getByTestId('growth-summary').textContent(), WAIT)
      .toBe(`${added} new profiles in the last 30 days, ${growth.at(-1).total_profiles} profiles now.`);
    // The chart's figures, a row a day, agree with the API's.
    const figures = page.getByRole('group').filter({ hasText: 'Profiles per day: the figures' });
    await figures.getByText('Profiles per day: the figures').click();
    const rows = figures.getByRole('row');
    await expect.poll(() => rows.count(), WAIT).toBe(31);
    for (const i of [27, 30]) {
      const cells = await rows.nth(i).getByRole('cell').allTextContents();
      expect(cells.slice(1)).toEqual([String(growth[i - 1].total_profiles), String(growth[i - 1].new_profiles)]);
    }
    // Integer ticks, a labelled axis, a legend naming the series.
    const ticks = await page.locator('.chart-box .u-axis').nth(1).allTextContents();
    expect(ticks.join(' ')).not.toMatch(/\d\.\d/);
    expect(await page.locator('.chart-box .u-legend').textContent()).toContain('New profiles that day');
    await checkPage(page, 'overview-growth');
  });

  test("the section's profiles are paged and searched as the API lists them, each opening its page", async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.getByRole('link', { name: 'Find a profile' }).click();
    const table = page.getByRole('table', { name: "The section's profiles, most recently updated first" });
    // The first key of each row, as shown.
    const shown = () =>
      table.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.querySelector('a')?.textContent));
    const emails = (items: { keys: { keyspace_discriminator: string; profile_key: string }[] }[]) =>
      items.map((i) => i.keys.find((k) => k.keyspace_discriminator === EMAIL)!.profile_key);

    const first = await get(`/audience/sections/${SECTION}/profiles?limit=25`);
    // Each page is awaited by what it says of itself, then its rows are read.
    await page.getByTestId('profiles-shown').filter({ hasText: '25 profiles shown, 1 to 25.' }).waitFor();
    expect(await shown()).toEqual(emails(first.items));
    // The hostile nickname is text: no element was made of it.
    await table.getByRole('cell', { name: HOSTILE }).waitFor();
    expect(await page.locator('main img').count()).toBe(0);
    // Attributes by name, not discriminator.
    expect(await table.getByRole('columnheader').allTextContents()).toEqual([
      'Keys',
      'Email',
      'Points',
      'Nickname',
      'Updated',
    ]);
    await checkPage(page, 'profiles');

    await page.getByRole('button', { name: 'Next page' }).click();
    const second = await get(`/audience/sections/${SECTION}/profiles?limit=25&cursor=${first.next_cursor}`);
    await page.getByTestId('profiles-shown').filter({ hasText: '5 profiles shown, 26 to 30.' }).waitFor();
    expect(await shown()).toEqual(emails(second.items));
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByTestId('profiles-shown').filter({ hasText: '25 profiles shown, 1 to 25.' }).waitFor();
    expect(await shown()).toEqual(emails(first.items));

    // By a key's beginning, in the keyspace chosen above.
    await page.getByLabel('Keyspace').selectOption(EMAIL);
    await page.getByLabel('Key starts with').fill('shopper-1');
    await page.getByRole('button', { name: 'Search' }).click();
    const byKey = await get(`/audience/sections/${SECTION}/profiles?limit=25&keyspace=${EMAIL}&key_prefix=shopper-1`);
    expect(byKey.items).toHaveLength(10);
    await page
      .getByTestId('profiles-shown')
      .filter({ hasText: '10 profiles shown, 1 to 10, of those matching the search.' })
      .waitFor();
    expect(await shown()).toEqual(emails(byKey.items));

    // By an attribute's value, chosen by its name.
    await page.getByLabel('Key starts with').fill('');
    await page.getByLabel('Attribute').selectOption({ label: 'Points' });
    await page.getByLabel('Value', { exact: true }).fill('150');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByTestId('profiles-shown').filter({ hasText: '1 profile shown' }).waitFor();
    expect(await shown()).toEqual(['shopper-15@example.com']);
    await page.getByLabel('Value', { exact: true }).fill('7');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No profile of the section matches the search.').waitFor();
    await page.getByLabel('Value', { exact: true }).fill('150');
    await page.getByRole('button', { name: 'Search' }).click();

    // A key opens the profile's page.
    await table.getByRole('link', { name: 'shopper-15@example.com' }).click();
    await page.getByRole('heading', { name: 'Profile shopper-15@example.com', level: 1 }).waitFor();
    expect(b.errors).toEqual([]);
  });

  test('a segment is made live, its size shown as the API has it, and stopped', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.getByRole('link', { name: 'Segments' }).click();
    await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Big spenders' });
    const state = page.getByTestId('live-state');
    await state.filter({ hasText: 'Not live' }).waitFor();
    await page.getByRole('button', { name: 'Make it live' }).click();
    const segment = 'com.vendor1.segments.user-created.big-spenders';
    let size: number | null = null;
    await expect
      .poll(async () => {
        size = (await get(`/audience/segments/${segment}/live`)).size;
        return size;
      }, WAIT)
      .not.toBeNull();
    // Points 110 to 290: 19 profiles have more than 100.
    expect(size).toBe(19);
    await state.filter({ hasText: 'Live: 19 profiles now, kept up to date by every write.' }).waitFor();
    await checkPage(page, 'segment-live');
    await page.getByRole('button', { name: 'Stop keeping it live' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Stop keeping it live' }).click();
    await state.filter({ hasText: 'Not live' }).waitFor();
    expect((await get(`/audience/segments/${segment}/live`)).live).toBe(false);
    expect(b.errors).toEqual([]);
  });

  test("the account's webhooks list their deliveries as the API has them, and one is replayed", async () => {
    const created = await b.server.request('POST', '/webhooks', {
      token: account.token,
      body: {
        url: `http://127.0.0.1:${receiver.port}/hooks`,
        event_types: ['profile.deleted'],
        description: HOSTILE,
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id;
    const deleted = await b.server.request('DELETE', `/audience/keyspaces/${EMAIL}/profiles/shopper-29@example.com`, {
      token: account.token,
    });
    expect(deleted.status, deleted.text).toBe(204);
    await expect.poll(async () => (await get(`/webhooks/${id}/deliveries`)).items[0]?.status, WAIT).toBe('delivered');
    const [delivery] = (await get(`/webhooks/${id}/deliveries`)).items;

    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    const endpoints = page.getByRole('table', { name: "The account's webhook subscriptions" });
    await endpoints.getByRole('cell', { name: HOSTILE }).waitFor();
    expect(await endpoints.getByRole('row').nth(1).getByRole('cell').allTextContents()).toEqual([
      `http://127.0.0.1:${receiver.port}/hooks`,
      HOSTILE,
      'profile.deleted',
      'active',
      'none',
    ]);
    const deliveries = page.getByRole('table', { name: /^The last deliveries to / });
    const row = deliveries.getByRole('row').nth(1);
    await expect
      .poll(() => row.getByRole('cell').allTextContents(), WAIT)
      .toEqual([
        'profile.deleted',
        expect.any(String),
        'delivered',
        '1',
        `answered 200, in ${delivery.last_attempt.latency_ms.toLocaleString('en')} ms`,
        'Replay',
      ]);
    expect(await page.locator('main img').count()).toBe(0);
    await checkPage(page, 'webhooks');

    await row.getByRole('button', { name: /^Replay the profile.deleted event/ }).click();
    await page.getByRole('status').filter({ hasText: 'The profile.deleted event is sent again.' }).waitFor();
    await expect.poll(async () => (await get(`/webhooks/${id}/deliveries`)).items[0]?.attempts, WAIT).toBe(2);
    await expect.poll(() => row.getByRole('cell').nth(3).textContent(), WAIT).toBe('2');
    expect(b.errors).toEqual([]);
  });
});

import fs from 'node:fs/promises';
import { parse } from 'csv-parse/sync';
import { beforeAll, describe, expect, test } from 'vitest';
import { CHROMIUM, checkPage, consoleBrowser, reachable, signInWithKey } from './browser.ts';

// A marketer's whole round in the console, on the demo account, without typing AQL or knowing an
// id: the tutorial's CSV imported with every column mapped; a segment built by names (an attribute
// and an event condition), counted as it is built, and saved as a new segment; its profiles that
// may be contacted about a topic by email counted, then exported with chosen columns and the file
// downloaded; then the overview. Each step is checked against the API. AQL has no consent term:
// the consent condition is the export's (docs/console.md "Segments").

const SHOP = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';

// A whole round on a busy machine takes long: the time allowed is a guard, not a measurement.
describe.skipIf(!CHROMIUM)("a marketer's round", { timeout: 300_000 }, () => {
  const b = consoleBrowser({ worker: true });
  let account: { clientId: string; clientSecret: string; token: string };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await b.server.request(method, path, { token: account.token, body });
    expect(res.status, res.text).toBeLessThan(300);
    return res.body;
  };

  beforeAll(async () => {
    const demo = JSON.parse(await fs.readFile(new URL('../../manifests/demo.json', import.meta.url), 'utf8'));
    // The test server's clock stands still, so a rate limit's bucket never refills: lifted.
    account = await b.server.login(demo, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_export_requests_per_second: null,
    });
    // What the shop's website recorded before the import: Ann and Bob viewed a page yesterday;
    // Ann and Cleo take offers by email.
    const pageView = (await api('GET', `/audience/sections/${SHOP}/events`)).items.find(
      (e: { name: string }) => e.name === 'Page view',
    ).versions[0].id;
    const yesterday = new Date(b.server.clock.now - 86_400_000).toISOString();
    for (const key of ['ann@example.com', 'bob@example.com', 'cleo@example.com']) {
      await api('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, { profile_key: key });
      if (key !== 'cleo@example.com')
        await api('POST', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/events`, {
          items: [{ event_time: yesterday, version_id: pageView, data: { title: 'Home' } }],
        });
      if (key !== 'bob@example.com')
        await api('POST', `/v2/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/consents`, {
          topic_discriminator: 'com.vendor1.topics.user-created.email-offers',
          channel_discriminator: 'com.vendor1.channels.email',
          type: 'opt-in',
          reason: 'signed up in the shop',
        });
    }
  }, 120_000);

  test('imports, builds and saves a segment, exports it with columns by consent, downloads it, reads the overview', async () => {
    const attributes = (await api('GET', `/audience/sections/${SHOP}/attributes`)).items as {
      name: string;
      versions: { id: string }[];
    }[];
    const latest = (name: string) => attributes.find((a) => a.name === name)!.versions.at(-1)!.id;
    const page = await b.open();
    await signInWithKey(page, b.server, account);

    // 1. The tutorial's CSV, every column mapped by its meaning.
    await page.getByRole('link', { name: 'Imports', exact: true }).click();
    await page.getByLabel('Section').selectOption(SHOP);
    await page.getByText('No import yet.').waitFor();
    const csv = await fs.readFile(new URL('../../examples/customers.csv', import.meta.url));
    await page.getByLabel('CSV file').setInputFiles({ name: 'customers.csv', mimeType: 'text/csv', buffer: csv });
    await expect.poll(() => page.getByLabel('Key column', { exact: true }).inputValue()).toBe('email');
    for (const [column, name] of [
      ['first_name', 'First name'],
      ['city', 'City'],
      ['loyalty_points', 'Loyalty points'],
    ])
      expect(await page.getByLabel(`Column ${column}`).inputValue()).toBe(latest(name));
    await page.getByRole('button', { name: 'Start the import' }).click();
    await expect.poll(() => page.getByTestId('import-status').textContent(), { timeout: 30_000 }).toBe('completed');
    const stored = async (key: string) =>
      api('GET', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/attributes`);
    expect((await stored('bob@example.com'))[latest('Loyalty points')]).toBe(80);

    // 2. A segment by names: more than 50 loyalty points, a page viewed in the last 7 days.
    await page.getByRole('link', { name: 'Segments', exact: true }).click();
    await page.getByRole('button', { name: 'Add an attribute condition' }).click();
    const attribute = page.getByRole('group', { name: 'Attribute condition Conditions › 1' });
    await attribute.getByLabel('Attribute').selectOption({ label: 'Loyalty points' });
    await attribute.getByLabel('Comparison').selectOption({ label: 'is more than' });
    await attribute.getByLabel('Value').fill('50');
    await page.getByRole('button', { name: 'Add an event condition' }).click();
    const event = page.getByRole('group', { name: 'Event condition Conditions › 2' });
    await event.getByLabel('Event', { exact: true }).selectOption({ label: 'Page view' });
    await event.getByLabel('How many').fill('7');
    const editor = page.getByLabel('AQL query');
    await expect.poll(() => editor.inputValue()).toMatch(/&& .*inLast\("events\.day", 0, 7\)$/);
    const query = await editor.inputValue();
    // The count shown is the service's count of the query the builder wrote: Ann and Bob.
    const { profile_count } = await api('POST', '/audience/profiles/reports/segments/count', {
      section_discriminator: SHOP,
      segment: { timezone: 'UTC', segment_definition: query },
    });
    expect(profile_count).toBe(2);
    await expect.poll(() => page.getByTestId('count').textContent()).toBe('2');
    await page.getByLabel("New segment's name").fill('Engaged customers');
    await page.getByRole('button', { name: 'Save as a new segment' }).click();
    await page.getByText('Saved as the new segment Engaged customers.').waitFor();
    const segments = (await api('GET', '/audience/segments')).items;
    const saved = segments.find((s: { name: string }) => s.name === 'Engaged customers');
    expect(saved).toMatchObject({
      discriminator: 'com.vendor1.segments.user-created.engaged-customers',
      versions: [{ query }],
    });
    // The new segment is the one the page now shows.
    await expect.poll(() => page.getByLabel('Segment', { exact: true }).inputValue()).toBe(saved.discriminator);
    await page.locator('.chart-box canvas').first().waitFor();
    await checkPage(page, 'segment-new');

    // 3. Its profiles that may be contacted about email offers, with their address, name, city and points.
    await page.getByRole('link', { name: 'Exports', exact: true }).click();
    await page.getByLabel('Section').selectOption(SHOP);
    await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Engaged customers' });
    const columns = page.getByRole('group', { name: 'Attribute columns' });
    for (const name of ['First name', 'City', 'Loyalty points']) await columns.getByLabel(name).check();
    await page
      .getByRole('group', { name: 'Only profiles that may be contacted about' })
      .getByLabel('Email offers')
      .check();
    await page.getByRole('group', { name: 'Address columns, by channel' }).getByLabel('Email').check();
    // The consent condition counted before the export, as the API counts it: of Ann and Bob, Ann.
    const topic = 'com.vendor1.topics.user-created.email-offers';
    const created = await api('POST', '/audience/profiles/reports/consents/count', {
      section_discriminator: SHOP,
      topic_discriminators: [topic],
      channels: [{ field_name: 'Email', channel_discriminator: 'com.vendor1.channels.email' }],
      segments: { timezone: 'UTC', segment_discriminators: { 'Engaged customers': saved.discriminator } },
    });
    const pollPath = new URL(created.poll_url).pathname.replace('/audience/', '/v2/audience/');
    let byConsent: Record<string, number> = {};
    await expect
      .poll(
        async () => {
          const res = await b.server.request('GET', pollPath, { token: account.token });
          if (res.status === 200) byConsent = JSON.parse(res.text);
          return res.status;
        },
        { timeout: 30_000 },
      )
      .toBe(200);
    expect(byConsent).toMatchObject({ total_profile_count: 2, Email: 1 });
    await expect
      .poll(() => page.getByTestId('consent-count').textContent(), { timeout: 30_000 })
      .toBe("Of the segment's 2 profiles, these may be contacted about the chosen topics: 1 by Email.");
    await checkPage(page, 'export-consent');
    await page.getByRole('button', { name: 'Start the export' }).click();
    // The export's row (the counts by consent of the page and of this test are listed too).
    const row = page.getByRole('row').filter({ hasText: 'Engaged customers', hasNotText: 'Count of' });
    await expect.poll(() => row.getByTestId('export-status').textContent(), { timeout: 30_000 }).toBe('ready');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      row.getByRole('button', { name: /^Download/ }).click(),
    ]);
    const file = await fs.readFile((await download.path())!, 'utf8');
    // The file is the export's as the API serves it, and its rows are the profiles' data as stored.
    const item = (await api('GET', '/audience/profiles/reports')).items.find(
      (i: { kind: string; request: { segments?: { segment_discriminators?: Record<string, string> } } }) =>
        i.kind === 'consents' && i.request.segments?.segment_discriminators?.['Engaged customers'],
    );
    expect((await b.server.request('GET', item.poll_path, { token: account.token })).text).toBe(file);
    const rows = parse(file, { columns: true }) as Record<string, string>[];
    // Bob is in the segment but took no offers; Cleo took them but viewed no page.
    expect(rows.map((r) => r.Email)).toEqual(['ann@example.com']);
    const ann = await stored('ann@example.com');
    expect(rows[0]).toMatchObject({
      'First name': ann[latest('First name')],
      City: ann[latest('City')],
      'Loyalty points': String(ann[latest('Loyalty points')]),
    });
    expect(rows[0]['First name']).toBe('Ann');
    // The list says how many rows the file holds and which key asked for it, as the API does.
    expect(item.rows).toBe(rows.length);
    expect(item.requested_by).toEqual({ client_id: account.clientId, name: '' });
    expect(await row.getByTestId('export-rows').textContent()).toBe('1');
    expect(await row.getByTestId('export-requester').textContent()).toBe(`key ${account.clientId}`);

    // 4. The overview: the profiles imported, those that may be contacted per channel.
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.getByLabel('Section').selectOption(SHOP);
    const { channels, counted } = await reachable(b.server, account.token, SHOP);
    expect(counted.total_profile_count).toBe(3);
    await expect.poll(() => page.getByTestId('figure-profiles').textContent()).toBe('3');
    for (const c of channels)
      await expect.poll(() => page.getByTestId(`figure-${c.name}`).textContent()).toBe(String(counted[c.name] ?? 0));
    await page
      .getByRole('table', { name: "The section's last imports" })
      .getByRole('cell', { name: 'completed' })
      .waitFor();
    await page.close();
  });
});

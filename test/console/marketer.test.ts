import fs from 'node:fs/promises';
import { beforeAll, describe, expect, test } from 'vitest';
import { SHOP } from '../app.ts';
import { CHROMIUM, checkPage, consoleBrowser, reachable, signInAsOperator, signInWithKey } from './browser.ts';

// The marketer's pages, driven in chromium against a server with a worker: a segment written with
// its count and trend, an import from a CSV watched to its end, an export requested and downloaded,
// an activity's charts and a message of the outbox.

const SECTION = 'com.vendor1.sections.user-created.shop';
const BIG = 'com.vendor1.segments.user-created.big-spenders';
const EMAIL = 'com.vendor1.keyspaces.email';

// On a busy machine a test takes long: the time allowed is a guard, not a measurement.
describe.skipIf(!CHROMIUM)('the console for a marketer', { timeout: 300_000 }, () => {
  const b = consoleBrowser({ worker: true });
  let account: { accountId: string; clientId: string; clientSecret: string; token: string };
  let points: string;
  let pageView: string;
  let sectionId: string;

  beforeAll(async () => {
    // The test server's clock stands still, so a rate limit's bucket never refills: lifted.
    account = await b.server.login(SHOP, {
      requests_per_second: null,
      token_requests_per_minute: null,
      profile_export_requests_per_second: null,
    });
    const attributes = (
      await b.server.request('GET', `/audience/sections/${SECTION}/attributes`, { token: account.token })
    ).body.items;
    points = attributes.find((a: { name: string }) => a.name === 'Points').versions[1].id;
    const events = (await b.server.request('GET', `/audience/sections/${SECTION}/events`, { token: account.token }))
      .body.items;
    pageView = events.find((e: { name: string }) => e.name === 'Page view').versions[0].id;
    const sections = (await b.server.request('GET', '/audience/sections', { token: account.token })).body.items;
    sectionId = sections.find((s: { discriminator: string }) => s.discriminator === SECTION).id;
    for (const [key, value] of [
      ['ann@example.com', 150],
      ['bo@example.com', 20],
    ] as const) {
      const created = await b.server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SECTION}/profiles`, {
        token: account.token,
        body: { profile_key: key },
      });
      expect(created.status, created.text).toBe(201);
      const path = `/v2/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SECTION}/attributes`;
      const res = await b.server.request('PATCH', path, {
        token: account.token,
        body: { 'com.vendor1.attributes.user-created.points': value },
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expect(res.status, res.text).toBeLessThan(300);
    }
    // Ann viewed the home page yesterday.
    const viewed = await b.server.request(
      'POST',
      `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${SECTION}/events`,
      {
        token: account.token,
        body: {
          items: [
            {
              event_time: new Date(b.server.clock.now - 86_400_000).toISOString(),
              version_id: pageView,
              data: { title: 'Home' },
            },
          ],
        },
      },
    );
    expect(viewed.status, viewed.text).toBe(204);
    // Ann takes the weekly news by email; Bo gave no consent.
    const consent = await b.server.request(
      'POST',
      `/v2/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${SECTION}/consents`,
      {
        token: account.token,
        body: {
          topic_discriminator: 'com.vendor1.topics.user-created.weekly-news',
          channel_discriminator: 'com.vendor1.channels.email',
          type: 'opt-in',
          reason: 'signed up in the shop',
        },
      },
    );
    expect(consent.status, consent.text).toBe(201);
  });

  /** The service's count of a query, as the console asks it. */
  const countOf = async (query: string) => {
    const res = await b.server.request('POST', '/audience/profiles/reports/segments/count', {
      token: account.token,
      body: { section_discriminator: SECTION, segment: { timezone: 'UTC', segment_definition: query } },
    });
    expect(res.status, res.text).toBe(200);
    return String(res.body.profile_count);
  };

  test('writes a segment: errors where the parser puts them, the live count, the trend chart, save as a new version', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.goto(`${b.server.url}/console#/segments`);
    await page.getByLabel('Segment', { exact: true }).selectOption(BIG);
    const editor = page.getByLabel('AQL query');
    await expect.poll(() => editor.inputValue()).toContain('.gt(100)');
    await expect.poll(() => page.getByTestId('count').textContent()).toBe('1');
    await page.locator('.chart-box canvas').first().waitFor();

    // A query the parser refuses: its message, and the character it names marked in the editor.
    const stored = await editor.inputValue();
    await editor.fill(stored.replace('.gt(100)', '.gt(100'));
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').textContent()).toMatch(/line 1, column \d+/);
    expect(await page.locator('mark.aql-error').count()).toBe(1);
    await checkPage(page, 'segments');

    await editor.fill(stored.replace('.gt(100)', '.gt(10)'));
    await expect.poll(() => page.getByTestId('count').textContent()).toBe('2');
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await page.getByText('Saved as version 2.').waitFor();
    const segment = (await b.server.request('GET', `/audience/segments/${BIG}`, { token: account.token })).body;
    expect(segment.versions.map((v: { query: string }) => v.query)).toEqual([
      stored,
      stored.replace('.gt(100)', '.gt(10)'),
    ]);
    await page.close();
  });

  test('builds a segment by names: conditions on an attribute and an event, typed AQL read back, counted and saved', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.goto(`${b.server.url}/console#/segments`);
    await page.getByRole('button', { name: 'Add an attribute condition' }).click();
    const first = page.getByRole('group', { name: 'Attribute condition Conditions › 1' });
    await first.getByLabel('Attribute').selectOption({ label: 'Points' });
    await first.getByLabel('Comparison').selectOption({ label: 'is more than' });
    await first.getByLabel('Value').fill('10');
    await page.getByRole('button', { name: 'Add an event condition' }).click();
    const second = page.getByRole('group', { name: 'Event condition Conditions › 2' });
    await second.getByLabel('Event', { exact: true }).selectOption({ label: 'Page view' });
    await second.getByLabel('How many').fill('7');
    // The builder writes the query with the ids the service needs, and counts it as the service does.
    const editor = page.getByLabel('AQL query');
    const built =
      `section(${sectionId}).attribute(${points}).gt(10) && ` +
      `section(${sectionId}).event(${pageView}).inLast("events.day", 0, 7)`;
    await expect.poll(() => editor.inputValue()).toBe(built);
    expect(await countOf(built)).toBe('1');
    await expect.poll(() => page.getByTestId('count').textContent()).toBe('1');
    // The figure can be shown while a count of the same query is asked again: its time follows.
    await expect.poll(() => page.locator('p.count').textContent()).toMatch(/1 profile matches · counted in \d+ ms/);
    await checkPage(page, 'segment-builder');

    // AQL typed by hand is read back into the builder.
    const typed =
      `section(${sectionId}).attribute(${points}).lte(20) || ` +
      `section(${sectionId}).event(${pageView}).eventData("title").eq("Home")`;
    await editor.fill(typed);
    await expect.poll(() => page.getByLabel('Profiles match').inputValue()).toBe('any');
    expect(await first.getByLabel('Comparison').inputValue()).toBe('lte');
    expect(await first.getByLabel('Value').inputValue()).toBe('20');
    const data = second.getByRole('group', { name: 'Event data 1' });
    expect(await data.getByLabel('Event field').inputValue()).toBe('title');
    expect(await data.getByLabel('Value').inputValue()).toBe('Home');
    expect(await second.getByLabel('When').inputValue()).toBe('ever');
    await expect.poll(() => page.getByTestId('count').textContent()).toBe(await countOf(typed));
    // What the builder cannot show is kept as written, and said so.
    await editor.fill('loyalty points > 100');
    await page.getByText('The builder cannot show this query').waitFor();

    // A stored segment opens in the builder; built further, it is saved as its new version.
    await page.getByLabel('Segment', { exact: true }).selectOption(BIG);
    await expect.poll(() => first.getByLabel('Attribute').inputValue()).toBe(points);
    await page.getByRole('button', { name: 'Add an event condition' }).click();
    await second.getByLabel('Event', { exact: true }).selectOption({ label: 'Page view' });
    await expect.poll(() => editor.inputValue()).toContain(`.event(${pageView}).inLast("events.day", 0, 30)`);
    const query = await editor.inputValue();
    await expect.poll(() => page.getByTestId('count').textContent()).toBe(await countOf(query));
    await page.getByRole('button', { name: 'Save as a new version' }).click();
    await page.getByText(/^Saved as version \d+\.$/).waitFor();
    const segment = (await b.server.request('GET', `/audience/segments/${BIG}`, { token: account.token })).body;
    expect(segment.versions.at(-1).query).toBe(query);
    await page.close();
  });

  test('starts an import from a CSV and watches it complete, with its report', async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.goto(`${b.server.url}/console#/imports`);
    await page.getByText('No import yet.').waitFor();
    await page.getByLabel('CSV file').setInputFiles({
      name: 'people.csv',
      mimeType: 'text/csv',
      buffer: Buffer.from('email,points\r\ncy@example.com,7\r\nnot an address,8\r\ndee@example.com,300\r\n'),
    });
    await page.getByLabel('Key column', { exact: true }).selectOption('email');
    await page.getByLabel('Column points').selectOption(points);
    await page.getByRole('button', { name: 'Start the import' }).click();
    await expect.poll(() => page.getByTestId('import-status').textContent(), { timeout: 20_000 }).toBe('completed');
    expect(await page.locator('progress').getAttribute('value')).toBe('3');
    await page.getByRole('button', { name: /^Report/ }).click();
    await page.getByRole('cell', { name: '3', exact: true }).waitFor();
    await checkPage(page, 'imports');
    const dee = await b.server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/dee@example.com/sections/${SECTION}/attributes`,
      { token: account.token },
    );
    expect(dee.body[points]).toBe(300);
    await page.close();
  });

  test("imports the tutorial's CSV with every column mapped by meaning, previewed, and warns of a second upload", async () => {
    // The demo account, whose attributes the tutorial's file fills.
    const demo = JSON.parse(await fs.readFile(new URL('../../manifests/demo.json', import.meta.url), 'utf8'));
    const shop = await b.server.login(demo, { requests_per_second: null, token_requests_per_minute: null });
    const shopSection = 'com.vendor1.sections.user-created.shop';
    const attributes = (
      await b.server.request('GET', `/audience/sections/${shopSection}/attributes`, { token: shop.token })
    ).body.items as { name: string; versions: { id: string }[] }[];
    const latest = (name: string) => attributes.find((a) => a.name === name)!.versions.at(-1)!.id;
    const csv = await fs.readFile(new URL('../../examples/customers.csv', import.meta.url));

    const page = await b.open();
    await signInWithKey(page, b.server, shop);
    await page.goto(`${b.server.url}/console#/imports`);
    await page.getByLabel('Section').selectOption(shopSection);
    await page.getByText('No import yet.').waitFor();
    const choose = () =>
      page.getByLabel('CSV file').setInputFiles({ name: 'customers.csv', mimeType: 'text/csv', buffer: csv });
    await choose();
    // The key column is the one named as a keyspace, and every other column goes to the latest
    // version of the attribute its name means.
    await expect.poll(() => page.getByLabel('Key column', { exact: true }).inputValue()).toBe('email');
    expect(await page.getByLabel('Keyspace of the key column').inputValue()).toBe(EMAIL);
    for (const [column, name] of [
      ['first_name', 'First name'],
      ['city', 'City'],
      ['loyalty_points', 'Loyalty points'],
    ]) {
      const select = page.getByLabel(`Column ${column}`);
      expect(await select.inputValue()).toBe(latest(name));
      expect(await select.locator('option:checked').textContent()).toBe(name);
    }
    // The first rows as they will be imported.
    await page.getByRole('columnheader', { name: 'loyalty_points → Loyalty points' }).waitFor();
    await page.getByRole('cell', { name: 'Porto' }).waitFor();
    await checkPage(page, 'imports-mapping');

    await page.getByRole('button', { name: 'Start the import' }).click();
    await page.getByText('customers.csv is uploaded').waitFor();
    // The form starts again: no file, no mapping.
    expect(await page.getByLabel('Column city').count()).toBe(0);
    expect(await page.getByLabel('CSV file').inputValue()).toBe('');
    await expect.poll(() => page.getByTestId('import-status').textContent(), { timeout: 20_000 }).toBe('completed');
    const ann = await b.server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/ann@example.com/sections/${shopSection}/attributes`,
      { token: shop.token },
    );
    expect(ann.body[latest('First name')]).toBe('Ann');
    expect(ann.body[latest('City')]).toBe('Lyon');
    expect(ann.body[latest('Loyalty points')]).toBe(120);

    // The same file again: said so before it is imported twice.
    await choose();
    await page.getByText('This file was uploaded already').waitFor();
    await page.getByRole('button', { name: 'Import it again' }).waitFor();
    await page.close();
  });

  test("exports a segment's profiles with chosen columns, by consent, and downloads the file", async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.goto(`${b.server.url}/console#/exports`);
    // Everyone in the segment, with a column of their points and of the VIP tag.
    await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Big spenders' });
    await page.getByRole('group', { name: 'Attribute columns' }).getByLabel('Points').check();
    await page.getByRole('group', { name: 'Tag columns' }).getByLabel('VIP').check();
    await page.getByRole('button', { name: 'Start the export' }).click();
    await page.getByText('The export is queued').waitFor();
    // Then those of them who may be contacted about the weekly news by email, with their address.
    await page
      .getByRole('group', { name: 'Only profiles that may be contacted about' })
      .getByLabel('Weekly news')
      .check();
    await page.getByRole('group', { name: 'Address columns, by channel' }).getByLabel('Email').check();
    await page.getByRole('button', { name: 'Start the export' }).click();
    // Every sign-in's overview counts by consent too: the exports are the files, not the counts.
    const files = async () =>
      (await b.server.request('GET', '/audience/profiles/reports', { token: account.token })).body.items.filter(
        (i: { kind: string }) => !i.kind.endsWith('-count'),
      );
    await expect
      .poll(async () => (await files()).map((i: { kind: string; status: string }) => `${i.kind} ${i.status}`).sort(), {
        timeout: 20_000,
      })
      .toEqual(['consents ready', 'segments ready']);
    // The test's clock stands still: both were created at the same time, listed in either order.
    const listed = await files();
    const items = ['consents', 'segments'].map((kind) => listed.find((i: { kind: string }) => i.kind === kind));
    // The list names each export's segment, section and columns, as its request did.
    const byConsent = page.getByRole('row').filter({ hasText: /Profiles that may be contacted/ });
    const bySegment = page.getByRole('row').filter({ hasText: /Profiles of a segment/ });
    await expect.poll(() => byConsent.getByTestId('export-status').textContent()).toBe('ready');
    await expect.poll(() => bySegment.getByTestId('export-status').textContent()).toBe('ready');
    for (const row of [byConsent, bySegment]) {
      expect(await row.textContent()).toContain('Big spenders');
      expect(await row.textContent()).toContain('Shop');
    }
    expect(await byConsent.getByRole('cell').nth(4).textContent()).toBe('Email, Points, VIP');
    expect(await bySegment.getByRole('cell').nth(4).textContent()).toBe('Points, VIP');

    // Each file the browser saved is the export's, as the service serves it.
    for (const [row, item] of [
      [byConsent, items[0]],
      [bySegment, items[1]],
    ] as const) {
      const [file] = await Promise.all([
        page.waitForEvent('download'),
        row.getByRole('button', { name: /^Download/ }).click(),
      ]);
      const served = await b.server.request('GET', item.poll_path, { token: account.token });
      expect(served.status).toBe(200);
      expect(await fs.readFile((await file.path())!, 'utf8')).toBe(served.text);
    }
    const consentFile = (await b.server.request('GET', items[0].poll_path, { token: account.token })).text;
    const [header, ...lines] = consentFile.split('\r\n').filter(Boolean);
    expect(header).toContain('Email');
    expect(header).toContain('Points');
    expect(lines.map((l) => l.includes('ann@example.com'))).toEqual([true]);
    await checkPage(page, 'exports');
    await page.close();
  });

  test("opens an activity's charts and a message's events, and a message of the outbox in a sandboxed frame", async () => {
    const admin = (method: string, path: string, body?: unknown) =>
      b.server.admin(method, `/admin/accounts/${account.accountId}${path}`, body);
    const receipt = await admin('PUT', '/activities/receipt', {
      kind: 'email',
      section_discriminator: SECTION,
      name: 'Receipt',
      transactional: true,
      email_subject: 'Receipt {{ order }}',
      sender_email_address: 'shop@shop.example',
      html: '<p>Thanks for order {{ order }}.</p><script>parent.document.title = "scripted"</script>',
    });
    expect(receipt.status, receipt.text).toBe(201);
    const sent = await b.server.request(
      'POST',
      `/emails/sections/${SECTION}/activities/transactional/receipt/transactions`,
      {
        token: account.token,
        body: {
          keyspace_discriminator: EMAIL,
          profile_key: 'ann@example.com',
          to_name: 'Ann',
          to_email_address: 'ann@example.com',
          variables: { order: '<b>A-17</b>' },
        },
      },
    );
    expect(sent.status, sent.text).toBe(201);
    await expect.poll(async () => (await admin('GET', '/outbox')).body.items.length, { timeout: 20_000 }).toBe(1);
    await admin('POST', '/activity-events', [
      {
        activity_id: 'receipt',
        type: 'DELIVERED',
        keyspace_discriminator: EMAIL,
        profile_key: 'ann@example.com',
        correlation_id: sent.body.id,
      },
      {
        activity_id: 'receipt',
        type: 'OPENED',
        keyspace_discriminator: EMAIL,
        profile_key: 'ann@example.com',
        correlation_id: sent.body.id,
      },
    ]);

    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.goto(`${b.server.url}/console#/activities`);
    await page.getByRole('button', { name: 'Receipt' }).click();
    await page.locator('.chart-box canvas').first().waitFor();
    // The activity by its name, with its figures and rates as the API gives them.
    await page.getByRole('heading', { name: 'Receipt', level: 2 }).waitFor();
    const { statistics } = (
      await b.server.request('GET', `/emails/sections/${SECTION}/activities/receipt?include_statistics=true`, {
        token: account.token,
      })
    ).body;
    for (const count of ['sent', 'delivered', 'unique_opens'])
      expect(await page.getByTestId(`stat-${count}`).textContent()).toBe(String(statistics[count]));
    expect(statistics.delivered).toBe(1);
    await page.getByLabel("A message's events: its correlation id").fill(sent.body.id);
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('cell', { name: 'OPENED' }).waitFor();
    expect(await page.getByRole('cell', { name: sent.body.id }).count()).toBe(3);
    await checkPage(page, 'activities');

    await page.goto(`${b.server.url}/console#/transactional`);
    await expect.poll(() => page.getByTestId('send-status').textContent()).toBe('delivered');
    await checkPage(page, 'transactional');
    await page.close();

    const operator = await b.open();
    await signInAsOperator(operator, b.server);
    await operator.goto(`${b.server.url}/console#/accounts/${account.accountId}/outbox`);
    await operator.getByRole('button', { name: 'Receipt <b>A-17</b>' }).click();
    expect(await operator.locator('iframe.message').getAttribute('sandbox')).toBe('');
    // The variable is escaped by the template, the message shown, and its script not run.
    await expect
      .poll(() => operator.frameLocator('iframe.message').locator('p').textContent())
      .toBe('Thanks for order <b>A-17</b>.');
    expect(await operator.title()).not.toBe('scripted');
    await checkPage(operator, 'outbox');
    await operator.close();
    // What the frame refused is all the pages reported: the message's script, its inline styles,
    // and its open pixel, so that reading a message in the console records no open.
    const refused = [
      /^Blocked script execution in 'about:srcdoc'/,
      /^Applying inline style violates/,
      /^Loading the image '[^']*\/mail\/open\//,
    ];
    expect(b.errors.filter((e) => !refused.some((r) => r.test(e)))).toEqual([]);
    expect(b.errors.some((e) => refused[0].test(e))).toBe(true);
    expect(b.errors.some((e) => refused[2].test(e))).toBe(true);
  });

  test("opens on the account's overview: profiles, reachable per channel, last imports, exports and sends", async () => {
    const page = await b.open();
    await signInWithKey(page, b.server, account);
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await page.getByTestId('figure-profiles').waitFor();
    // The figures are the interface's own count by consent, over every topic of the section.
    const { channels, counted } = await reachable(b.server, account.token, SECTION);
    expect(await page.getByTestId('figure-profiles').textContent()).toBe(String(counted.total_profile_count));
    for (const c of channels)
      expect(await page.getByTestId(`figure-${c.name}`).textContent()).toBe(String(counted[c.name] ?? 0));
    expect(counted.total_profile_count).toBeGreaterThan(1);
    expect(counted.Email).toBe(1);
    // The last imports, exports and sends, with their state, as listed by the API.
    await page
      .getByRole('table', { name: "The section's last imports" })
      .getByRole('cell', { name: 'completed' })
      .first()
      .waitFor();
    const exports = page.getByRole('table', { name: "The account's last exports (counts left out)" });
    await exports.getByRole('cell', { name: 'consents', exact: true }).waitFor();
    await exports.getByRole('cell', { name: 'segments', exact: true }).waitFor();
    await page
      .getByRole('table', { name: "The section's email activities, last sent first" })
      .getByRole('cell', { name: 'Receipt' })
      .waitFor();
    await checkPage(page, 'overview');
    await page.close();
  });
});

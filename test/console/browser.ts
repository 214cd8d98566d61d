import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { TestServer } from '../app.ts';
import { CHROMIUM } from './chromium.ts';

export { CHROMIUM };

// What the console's browser tests share: one Debian chromium per test file, driven by
// playwright-core, against a real server on the file's own database; an axe-core check and a
// screenshot of each page. Without chromium (.ci/run installs it as root) the tests skip.

const require = createRequire(import.meta.url);

if (!CHROMIUM) console.warn('chromium is not installed (apt-get install chromium): the console browser tests skip');

/** Where screenshots go: SCREENSHOTS_DIR (npm run console:screenshots: docs/console); unset, they are taken and not kept. */
const SCREENSHOTS_DIR = process.env.SCREENSHOTS_DIR ? path.resolve(process.env.SCREENSHOTS_DIR) : undefined;

export interface ConsoleBrowser {
  server: TestServer;
  browser: Browser;
  /** Messages the pages wrote to their console as errors (a refused script or style among them). */
  errors: string[];
  /** A new tab of a new context (nothing shared with other tabs), `width` wide. */
  open(width?: number): Promise<Page>;
}

/** Starts the file's server (with `env`) and browser before its tests and closes them after. */
export function consoleBrowser(options: { worker?: boolean; env?: Record<string, string> } = {}): ConsoleBrowser {
  const state = { errors: [] as string[] } as ConsoleBrowser;
  beforeAll(async () => {
    state.server = await TestServer.start(options.env, { worker: options.worker });
    state.browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  const pages: Page[] = [];
  // A failing test leaves what its open pages showed, to see why.
  afterEach(async ({ task }) => {
    if (task.result?.state === 'fail') {
      const folder = path.join(os.tmpdir(), 'audience-console-failures');
      await fs.mkdir(folder, { recursive: true });
      for (const [i, page] of pages.entries())
        if (!page.isClosed()) await page.screenshot({ path: path.join(folder, `${task.name.slice(0, 40)}-${i}.png`) });
      console.warn(`screenshots of the failed test's pages are in ${folder}`);
    }
    pages.length = 0;
  });
  afterAll(async () => {
    await state.browser?.close();
    await state.server?.close();
  });
  state.open = async (width = 1280) => {
    const context = await state.browser.newContext({ viewport: { width, height: 900 } });
    // A busy machine (the whole suite on two cores) can take long to answer: no test depends on it.
    context.setDefaultTimeout(90_000);
    const page = await context.newPage();
    pages.push(page);
    page.on('console', (message) => {
      // A refused request (a wrong credential's 401) is the page's expected answer, not an error of it.
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
        state.errors.push(message.text());
    });
    page.on('pageerror', (error) => state.errors.push(String(error)));
    return page;
  };
  return state;
}

/** Opens the console and signs in as the operator. */
export async function signInAsOperator(page: Page, server: TestServer): Promise<void> {
  await page.goto(`${server.url}/console`);
  await page.getByLabel('Operator token').fill(server.services.adminToken);
  await page.getByRole('button', { name: 'Sign in as operator' }).click();
  await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
}

/** Opens the console and signs in with an API key. */
export async function signInWithKey(
  page: Page,
  server: TestServer,
  key: { clientId: string; clientSecret: string },
): Promise<void> {
  await page.goto(`${server.url}/console`);
  await page.getByLabel('Client id').fill(key.clientId);
  await page.getByLabel('Client secret').fill(key.clientSecret);
  await page.getByRole('button', { name: 'Sign in with the key' }).click();
  await page.getByTestId('who').waitFor();
}

let axeSource: string | undefined;

/** Runs axe-core on the page as it is: no violation of serious or critical impact. */
export async function expectAccessible(page: Page): Promise<void> {
  axeSource ??= await fs.readFile(require.resolve('axe-core/axe.min.js'), 'utf8');
  // Evaluated through the debugging protocol, which the page's Content-Security-Policy does not govern.
  if (!(await page.evaluate('typeof axe !== "undefined"'))) await page.evaluate(axeSource);
  const violations = (await page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) =>
      r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.html) })))`,
  )) as { id: string; impact: string; nodes: string[] }[];
  expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
}

/** Checks the page with axe and takes its screenshot, saved as `<name>.png` in SCREENSHOTS_DIR when set. */
export async function checkPage(page: Page, name: string): Promise<void> {
  await expectAccessible(page);
  if (SCREENSHOTS_DIR) await fs.mkdir(SCREENSHOTS_DIR, { recursive: true });
  await page.screenshot({ path: SCREENSHOTS_DIR && path.join(SCREENSHOTS_DIR, `${name}.png`), fullPage: true });
}

/**
 * What the overview shows of a section, asked of the API as the overview asks it: the count by
 * consent over every topic of the section, an address column for each of the first two channels.
 */
export async function reachable(
  server: TestServer,
  token: string,
  section: string,
): Promise<{ channels: { name: string }[]; counted: Record<string, number> }> {
  const topics = (await server.request('GET', `/v2/audience/sections/${section}/topics`, { token })).body.items;
  const channels = (await server.request('GET', '/audience/channels', { token })).body.items.slice(0, 2);
  const created = await server.request('POST', '/audience/profiles/reports/consents/count', {
    token,
    body: {
      section_discriminator: section,
      topic_discriminators: topics.map((t: { discriminator: string }) => t.discriminator),
      channels: channels.map((c: { name: string; discriminator: string }) => ({
        field_name: c.name,
        channel_discriminator: c.discriminator,
      })),
    },
  });
  expect(created.status, created.text).toBe(201);
  const poll = new URL(created.body.poll_url).pathname.replace('/audience/', '/v2/audience/');
  let counted: Record<string, number> | undefined;
  await expect
    .poll(async () => {
      const res = await server.request('GET', poll, { token });
      counted = res.status === 200 ? JSON.parse(res.text) : undefined;
      return res.status;
    })
    .toBe(200);
  return { channels, counted: counted! };
}

/**
 * `npm run bench:console`: how soon the web console is usable on loopback (issue 28: "the first page
 * interactive in under 1 s"). It starts `serve` (its own DATA_DIR and embedded PostgreSQL, the demo
 * account), then BENCH_CONSOLE_RUNS times (10) opens /console in a new browser context of Debian's
 * chromium (nothing cached, nothing shared with the runs before) and measures, in the page itself:
 *
 * - **sign-in form usable**: from the navigation's start (performance.timeOrigin) to the moment the
 *   client id field is in the page, enabled, shown and takes the focus;
 * - **signed in to data**: from the sign-in form's submit with the demo account's key (token request,
 *   the account's first page loaded) to the moment that page, "Overview", shows the first data it
 *   read from the service (the sections of its picker);
 * - **overview counted**: from the submit to the moment the overview shows its profile figures
 *   (a count by consent, a job of the worker, polled);
 * - **overview growth**: from the submit to the moment the overview shows the section's growth
 *   over 30 days (GET …/profiles/growth over every profile of the section);
 * - **profile list**: from the click on "Find a profile" to the moment the page shows the first
 *   page of the section's profiles, most recently updated first;
 * - **builder counted**: on the segments page, a condition "Loyalty points is more than 100" built
 *   by name; from its value's last keystroke to the moment the page shows the service's count of
 *   the query (debounce, count request, render), over BENCH_CONSOLE_PROFILES profiles (100,000)
 *   imported into the demo account's Shop section before the runs;
 *
 * and the bytes the browser received for each (encoded: compressed bodies and headers, as the
 * network carried them), from the debugging protocol's Network events. The console's files are
 * compressed once and kept in memory by the server, so a run measures a server that has served
 * them before (the first run warms it and is reported apart). Prints median and max, and the load
 * average: the machine may be shared, and a loaded one is slower. CHROMIUM_PATH names another
 * chromium. Only a measurement: nothing here asserts a time.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type CDPSession, type Page } from 'playwright-core';
import { CHROMIUM } from '../test/console/chromium.ts';
import {
  type Audience,
  demoToken,
  log,
  onCleanup,
  request,
  runBench,
  sleep,
  startAudience,
  table,
  tempDir,
  upload,
} from './harness.ts';

const RUNS = Math.max(1, Number(process.env.BENCH_CONSOLE_RUNS ?? 10));
const PROFILES = Math.max(0, Number(process.env.BENCH_CONSOLE_PROFILES ?? 100_000));
const SHOP = 'Shop';

/**
 * Imports `n` profiles into the demo account's Shop section (an address and loyalty points, one in
 * three above 100) with a version 2 import, and waits for it to complete.
 */
async function seed(audience: Audience, n: number): Promise<void> {
  if (n === 0) return;
  const token = await demoToken(audience);
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await request(`${audience.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return JSON.parse(res.text);
  };
  const section = (await call('GET', '/audience/sections')).items.find((s: { name: string }) => s.name === SHOP);
  const points = (await call('GET', `/audience/sections/${section.discriminator}/attributes`)).items.find(
    (a: { name: string }) => a.name === 'Loyalty points',
  );
  const keyspace = (await call('GET', '/audience/keyspaces')).items.find((k: { name: string }) => k.name === 'Email');
  const folder = await tempDir('audience-bench-console-');
  const file = path.join(folder, 'profiles.csv');
  const lines = ['email,loyalty_points'];
  for (let i = 0; i < n; i++) lines.push(`bench-${i}@example.com,${(i * 37) % 150}`);
  await fs.writeFile(file, lines.join('\n') + '\n');
  const created = await call('POST', `/v2/audience/sections/${section.discriminator}/imports`, {
    keyspace_mapping: { keyspace_discriminator: keyspace.discriminator, field_selector: 'email' },
    attribute_mappings: [{ field_selector: 'loyalty_points', attribute_version_id: points.versions.at(-1).id }],
  });
  const uploadUrl = audience.url + new URL(created.file_upload_url).pathname;
  const { size } = await fs.stat(file);
  const uploaded = await upload(uploadUrl, created.file_upload_body, file, size, 600_000);
  if (uploaded.status !== 204) throw new Error(`upload: ${uploaded.status} ${uploaded.text}`);
  for (;;) {
    const status = await call('GET', `/audience/sections/${section.discriminator}/imports/${created.import_id}`);
    if (status.result.status === 'completed') break;
    if (status.result.status === 'error') throw new Error(`import: ${JSON.stringify(status.result)}`);
    await sleep(500);
  }
  log(`imported ${n.toLocaleString('en')} profiles into ${SHOP}`);
}

/**
 * Installed in every page before its scripts (through the debugging protocol, which the console's
 * Content-Security-Policy does not govern): records on `window.__bench` when the sign-in form is
 * usable, when it is submitted, and when the first account page shows its data, each as
 * performance.now() (milliseconds since the navigation's start).
 */
const PROBE = `(() => {
  const bench = (window.__bench = {});
  const usable = (el) => el && !el.disabled && el.getClientRects().length > 0;
  const look = () => {
    if (bench.form === undefined) {
      const field = document.querySelector('input[name="client_id"]');
      if (usable(field)) {
        field.focus();
        if (document.activeElement === field) bench.form = performance.now();
      }
    }
    if (bench.submitted !== undefined && bench.data === undefined && document.querySelector('main select option'))
      bench.data = performance.now();
    if (bench.submitted !== undefined && bench.figures === undefined && document.querySelector('main dl.figures'))
      bench.figures = performance.now();
    if (bench.submitted !== undefined && bench.growth === undefined && document.querySelector('[data-testid="growth-summary"]'))
      bench.growth = performance.now();
    const shown = document.querySelector('[data-testid="profiles-shown"]')?.textContent ?? '';
    if (bench.listAsked !== undefined && bench.listed === undefined && shown.includes('shown, 1 to'))
      bench.listed = performance.now();
    if (bench.typed !== undefined && bench.counted === undefined) {
      const said = document.querySelector('[data-testid="count-time"]')?.textContent ?? '';
      if (said.includes('counting') || document.querySelector('#aql-result p.muted')) bench.counting = true;
      else if (bench.counting && said.includes('counted in')) bench.counted = performance.now();
    }
  };
  document.addEventListener('submit', () => { bench.submitted ??= performance.now(); }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('a[href="#/profiles"]')) bench.listAsked ??= performance.now();
  }, true);
  // The condition's value typed: the builder's count is measured from here.
  document.addEventListener('input', (e) => {
    if (e.target.tagName === 'INPUT' && e.target.closest('fieldset')) {
      bench.typed = performance.now();
      // A count shown now is the last query's: wait for it to be asked again. Without one (none
      // yet, or a refusal), the next count shown is this query's.
      const said = document.querySelector('[data-testid="count-time"]')?.textContent ?? '';
      bench.counting = !said.includes('counted in');
      bench.counted = undefined;
    }
  }, true);
  new MutationObserver(look).observe(document, { childList: true, subtree: true, attributes: true });
})();`;

/** Bytes received, as encoded on the wire, from the moment it is made. */
async function countBytes(cdp: CDPSession): Promise<{ take(): number }> {
  let bytes = 0;
  cdp.on('Network.loadingFinished', (e) => (bytes += e.encodedDataLength));
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  return {
    take() {
      const taken = bytes;
      bytes = 0;
      return taken;
    },
  };
}

/**
 * The time the probe recorded as `name`, once it has (asked every 20 ms: the time is the page's own,
 * so the asking adds nothing to it). Evaluated through the debugging protocol: the page's policy
 * forbids the string evaluation of waitForFunction.
 */
async function recorded(page: Page, name: string): Promise<number> {
  const until = Date.now() + 30_000;
  for (;;) {
    const at = (await page.evaluate(`window.__bench.${name}`)) as number | undefined;
    if (at !== undefined) return at;
    if (Date.now() > until) throw new Error(`the console did not get to "${name}" within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Sample {
  formMs: number;
  formBytes: number;
  dataMs: number;
  dataBytes: number;
  figuresMs: number;
  growthMs: number;
  countMs: number;
  listMs: number;
}

async function measureOnce(browser: Browser, url: string, key: { client_id: string; client_secret: string }) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.addInitScript(PROBE);
    const bytes = await countBytes(await context.newCDPSession(page));
    await page.goto(`${url}/console`);
    const formMs = await recorded(page, 'form');
    // What arrived up to now: the page and every module the sign-in form needs (none loads later unasked).
    const formBytes = bytes.take();
    await page.getByLabel('Client id').fill(key.client_id);
    await page.getByLabel('Client secret').fill(key.client_secret);
    await page.getByRole('button', { name: 'Sign in with the key' }).click();
    const data = await recorded(page, 'data');
    const submitted = (await page.evaluate('window.__bench.submitted')) as number;
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    const dataBytes = bytes.take();
    const figures = await recorded(page, 'figures');
    const growth = await recorded(page, 'growth');
    // The builder: a condition by name, its value typed last.
    await page.getByRole('link', { name: 'Segments', exact: true }).click();
    await page.getByRole('button', { name: 'Add an attribute condition' }).click();
    const condition = page.getByRole('group', { name: 'Attribute condition Conditions › 1' });
    await condition.getByLabel('Attribute').selectOption({ label: 'Loyalty points' });
    await condition.getByLabel('Comparison').selectOption({ label: 'is more than' });
    await condition.getByLabel('Value').fill('100');
    const counted = await recorded(page, 'counted');
    const typed = (await page.evaluate('window.__bench.typed')) as number;
    // The section's profiles.
    await page.getByRole('link', { name: 'Find a profile' }).click();
    const listed = (await recorded(page, 'listed')) - ((await page.evaluate('window.__bench.listAsked')) as number);
    return {
      formMs,
      formBytes,
      dataMs: data - submitted,
      dataBytes,
      figuresMs: figures - submitted,
      growthMs: growth - submitted,
      countMs: counted - typed,
      listMs: listed,
    } satisfies Sample;
  } finally {
    await context.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (x: number) => x.toFixed(0);
const kb = (x: number) => (x / 1024).toFixed(1);
const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

await runBench(120_000 + PROFILES * 5 + RUNS * 40_000, async () => {
  if (!CHROMIUM) throw new Error('chromium is not installed (apt-get install chromium, or set CHROMIUM_PATH)');
  console.log(
    `machine: ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? 'unknown model'}; load average ${loadAverage()}`,
  );
  const audience = await startAudience();
  const key = JSON.parse(await fs.readFile(path.join(audience.dataDir, 'demo-credentials.json'), 'utf8')) as {
    client_id: string;
    client_secret: string;
  };
  await seed(audience, PROFILES);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  onCleanup(() => browser.close());
  const version = browser.version();
  log(`chromium ${version}; warming the server's compressed files with a first run`);
  const warm = await measureOnce(browser, audience.url, key);
  const samples: Sample[] = [];
  for (let i = 0; i < RUNS; i++) {
    samples.push(await measureOnce(browser, audience.url, key));
    log(
      `run ${i + 1}/${RUNS}: form ${ms(samples[i].formMs)} ms, signed in to data ${ms(samples[i].dataMs)} ms, ` +
        `overview counted ${ms(samples[i].figuresMs)} ms, growth ${ms(samples[i].growthMs)} ms, ` +
        `builder counted ${ms(samples[i].countMs)} ms, profile list ${ms(samples[i].listMs)} ms`,
    );
  }
  const row = (what: string, times: number[], bytes: number[], first: number) => [
    what,
    ms(median(times)),
    ms(Math.max(...times)),
    ms(first),
    kb(median(bytes)),
  ];
  console.log(
    `\nchromium ${version}, ${RUNS} runs each in a new browser context (no cache), on loopback; load average ${loadAverage()}\n`,
  );
  console.log(
    table([
      ['', 'median ms', 'max ms', 'first run ms', 'KB received'],
      row(
        'sign-in form usable, from navigation start',
        samples.map((s) => s.formMs),
        samples.map((s) => s.formBytes),
        warm.formMs,
      ),
      row(
        'signed in to the first page with data, from submit',
        samples.map((s) => s.dataMs),
        samples.map((s) => s.dataBytes),
        warm.dataMs,
      ),
      [
        'signed in to the overview counted, from submit',
        ms(median(samples.map((s) => s.figuresMs))),
        ms(Math.max(...samples.map((s) => s.figuresMs))),
        ms(warm.figuresMs),
        '',
      ],
      [
        'signed in to the overview growth, from submit',
        ms(median(samples.map((s) => s.growthMs))),
        ms(Math.max(...samples.map((s) => s.growthMs))),
        ms(warm.growthMs),
        '',
      ],
      [
        `profile list's first page over ${PROFILES.toLocaleString('en')} profiles, from the click`,
        ms(median(samples.map((s) => s.listMs))),
        ms(Math.max(...samples.map((s) => s.listMs))),
        ms(warm.listMs),
        '',
      ],
      [
        `builder counted over ${PROFILES.toLocaleString('en')} profiles, from the last keystroke`,
        ms(median(samples.map((s) => s.countMs))),
        ms(Math.max(...samples.map((s) => s.countMs))),
        ms(warm.countMs),
        '',
      ],
    ]),
  );
  // Ratios to the same run's sign-in form time: a loaded machine slows all alike.
  const form = median(samples.map((s) => s.formMs));
  const ratio = (xs: number[]) => (median(xs) / form).toFixed(2);
  console.log(
    `\nagainst the sign-in form's median: overview data ${ratio(samples.map((s) => s.dataMs))}x, ` +
      `overview counted ${ratio(samples.map((s) => s.figuresMs))}x, growth ${ratio(samples.map((s) => s.growthMs))}x, ` +
      `builder counted ${ratio(samples.map((s) => s.countMs))}x, profile list ${ratio(samples.map((s) => s.listMs))}x`,
  );
});

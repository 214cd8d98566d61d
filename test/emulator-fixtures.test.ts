import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../clients/testing/src/index.ts';
import { atFileEnd, scratchFolder } from './scratch.ts';
import { sendImportFile } from './imports-http.ts';

// `audience emulate --manifest FILE --manual-jobs --strict` with a one-file fixture
// (docs/emulator.md "Fixtures"): a whole account manifest, activities included, and the profiles
// the ready account starts with, read back through the service's routes after the real program
// started with it; jobs that wait until the test runs them; unknown fields refused.

const FIXTURE = path.join(import.meta.dirname, '..', 'examples', 'emulator-fixture.json');
const V = 'com.acme1';
const SHOP = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;
const base = (key: string) => `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}/sections/${SHOP}`;

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator({
    vendor: 'acme',
    manifest: FIXTURE,
    jobs: 'manual',
    strict: true,
    timeoutMs: 110_000,
  });
  atFileEnd(() => emulator.stop());
});
afterAll(async () => {
  await emulator?.stop();
});

async function get(token: string, url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(emulator.baseUrl + url, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.json() };
}

async function post(
  token: string,
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(emulator.baseUrl + url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

describe('a one-file fixture', () => {
  it('is the one docs/emulator.md shows', async () => {
    const doc = await fs.readFile(path.join(import.meta.dirname, '..', 'docs', 'emulator.md'), 'utf8');
    const shown = doc.split('## Fixtures')[1].match(/```json\n([\s\S]*?)\n```/)![1];
    expect(JSON.parse(shown)).toEqual(JSON.parse(await fs.readFile(FIXTURE, 'utf8')));
  });

  it('defines the account, its activities and its integration, and seeds its profiles', async () => {
    const token = await emulator.token();
    const attributes = (await get(token, `/audience/sections/${SHOP}/attributes`)).body.items as {
      discriminator: string;
      versions: { id: string }[];
    }[];
    const id = (suffix: string) => attributes.find((a) => a.discriminator.endsWith(suffix))!.versions[0].id;
    const values = await get(token, `${base('ann@example.com')}/attributes`);
    expect(values.status).toBe(200);
    expect(values.body).toMatchObject({
      [id('.firstname')]: 'Ann',
      [id('.loyalty-points')]: 120,
      [id('.customer-group')]: 'retail',
    });
    expect((await get(token, `${base('ann@example.com')}/tags`)).body).toEqual({
      [`${V}.tags.user-created.vip`]: true,
    });
    const consents = await get(token, `/v2${base('ann@example.com')}/consents`);
    expect(consents.body.items).toEqual([
      expect.objectContaining({
        topic_discriminator: `${V}.topics.user-created.newsletter`,
        channel_discriminator: `${V}.channels.email`,
        type: 'opt-in',
      }),
    ]);
    const events = await get(token, `${base('ann@example.com')}/events`);
    expect(events.body.items).toEqual([
      expect.objectContaining({ event_time: '2026-03-01T09:30:00.000Z', data: { order: 'A-1001', total: 59.9 } }),
    ]);
    expect((await get(token, `${base('ben@example.com')}/attributes`)).body).toEqual({ [id('.firstname')]: 'Ben' });
    const keyspaces = (await get(token, '/audience/keyspaces')).body.items as { discriminator: string }[];
    expect(keyspaces.map((k) => k.discriminator)).toContainEqual(
      expect.stringMatching(/\.integrations\.keyspaces\.[0-9a-f]{8}\.magento$/),
    );
    // The activity of the manifest is there: a transactional send of it is accepted.
    const sent = await fetch(
      `${emulator.baseUrl}/emails/sections/${SHOP}/activities/transactional/order-confirmation/transactions`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          keyspace_discriminator: EMAIL,
          profile_key: 'ann@example.com',
          to_name: 'Ann',
          to_email_address: 'ann@example.com',
          variables: { order: 'A-1002' },
        }),
      },
    );
    expect(sent.status, await sent.text()).toBe(201);
    // The seed's writes are not in the request log: it starts empty.
    expect(await emulator.control.requests.list({ method: 'PATCH' })).toEqual([]);
  });

  it('is the initial state a reset goes back to', async () => {
    const token = await emulator.token();
    await fetch(`${emulator.baseUrl}/v2${base('ann@example.com')}/attributes`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ [`${V}.attributes.firstname`]: 'Changed' }),
    });
    await emulator.control.reset();
    const values = (await get(token, `${base('ann@example.com')}/attributes`)).body as Record<string, unknown>;
    expect(Object.values(values)).toContain('Ann');
  });

  it('a seed the service refuses stops the start, naming the item and the answer', async () => {
    const dir = await scratchFolder('audience-fixture-');
    const file = path.join(dir, 'bad.json');
    const fixture = JSON.parse(await fs.readFile(FIXTURE, 'utf8'));
    fixture.seed.profiles[1].attributes = { 'com.{vendor}1.attributes.user-created.nope': 1 };
    await fs.writeFile(file, JSON.stringify(fixture));
    await expect(startEmulator({ vendor: 'acme', manifest: file, timeoutMs: 110_000 })).rejects.toThrow(
      /seed's profiles\[1\]\.attributes was refused: 400 .*nope/,
    );
    fixture.seed.profiles[1] = { key: 'x' };
    await fs.writeFile(file, JSON.stringify(fixture));
    await expect(startEmulator({ vendor: 'acme', manifest: file, timeoutMs: 110_000 })).rejects.toThrow(
      /\/seed\/profiles\/1.*keyspace/,
    );
  }, 120_000);
});

describe('manual jobs', () => {
  it('IMP-05 an uploaded import stays queued, its job listed, until the test runs it by id', async () => {
    await emulator.control.reset();
    const token = await emulator.token();
    const attributes = (await get(token, `/audience/sections/${SHOP}/attributes`)).body.items as {
      discriminator: string;
      versions: { id: string }[];
    }[];
    const points = attributes.find((a) => a.discriminator.endsWith('.loyalty-points'))!;
    const created = await post(token, `/v2/audience/sections/${SHOP}/imports`, {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'points', attribute_version_id: points.versions[0].id }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uploaded = await sendImportFile(emulator.baseUrl, created.body, 'email,points\ncarl@example.com,7\n');
    expect(uploaded.status).toBe(204);
    const status = () => get(token, `/audience/sections/${SHOP}/imports/${created.body.import_id}`);
    expect((await status()).body.result.status).toBe('queued');
    // A moved clock runs nothing in manual mode.
    expect((await emulator.control.clock.advance(60)).jobs_run).toBe(0);
    expect((await status()).body.result.status).toBe('queued');
    const jobs = await emulator.control.jobs.list();
    expect(jobs.mode).toBe('manual');
    const job = jobs.items.find((j) => j.kind === 'import' && j.state === 'waiting')!;
    expect(job).toBeDefined();
    await emulator.control.jobs.runOne(job.job_id);
    expect((await status()).body.result).toMatchObject({ status: 'completed', profiles_processed: 1 });
    await expect(emulator.control.jobs.runOne(job.job_id)).rejects.toThrow(/404|AUD-2204/);
  });
});

describe('strict mode', () => {
  it('refuses an unknown top-level field naming it; the header lets one request through', async () => {
    const token = await emulator.token();
    const consent = {
      topic_discriminator: `${V}.topics.user-created.newsletter`,
      channel_discriminator: `${V}.channels.email`,
      type: 'opt-out',
      reason: 'Unticked the box',
    };
    const url = `/v2${base('ann@example.com')}/consents`;
    const typo = await post(token, url, { ...consent, sourse: 'Shop' });
    expect(typo.status).toBe(400);
    expect(typo.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(typo.body.detail).toMatch(/"sourse" is not allowed/);
    expect((await post(token, url, { ...consent, sourse: 'Shop' }, { 'x-audience-strict': 'false' })).status).toBe(204);
  });
});

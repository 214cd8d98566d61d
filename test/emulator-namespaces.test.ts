import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmulatorError, type Emulator, type Namespace } from '../clients/testing/src/index.ts';
import { call, EMAIL, isolatedTest, sendOrder, SHOP, startFixtureEmulator } from './emulator-workload.ts';
import { atFileEnd } from './scratch.ts';
import { sendImportFile } from './imports-http.ts';

// Namespaces (docs/emulator.md "Namespaces"): accounts made per test on one emulator, each with its
// own key, data, request log, mail, outbound calls and faults, so that test workers share the
// emulator; and a job held in_progress (docs/emulator.md "Jobs"), for a connector's poll loop.
// One emulator of the one-file fixture, with manual jobs, for the file.

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startFixtureEmulator(110_000);
  atFileEnd(() => emulator.stop());
});
afterAll(async () => {
  await emulator?.stop();
});

const tagNames = async (ns: Namespace, token: string) =>
  (await call(ns, token, 'GET', `/audience/sections/${SHOP}/tags`)).body.items.map((t: { name: string }) => t.name);

describe('namespaces', () => {
  it('isolate data, the request log, mail, outbound calls and faults between tests sharing the emulator', async () => {
    const [a, b] = await Promise.all([emulator.namespace(), emulator.namespace()]);
    expect(a.id).not.toBe(b.id);
    expect(a.account.clientId).not.toBe(b.account.clientId);
    const [tokenA, tokenB] = await Promise.all([a.token(), b.token()]);
    // Each starts from the fixture: its own copy of the seeded profile.
    for (const [ns, token] of [
      [a, tokenA],
      [b, tokenB],
    ] as const) {
      const ann = await call(
        ns,
        token,
        'GET',
        `/audience/keyspaces/${EMAIL}/profiles/ann%40example.com/sections/${SHOP}/attributes`,
      );
      expect(ann.status).toBe(200);
    }
    expect((await call(a, tokenA, 'POST', `/audience/sections/${SHOP}/tags`, { name: 'Only in A' })).status).toBe(201);
    expect(await tagNames(a, tokenA)).toContain('Only in A');
    expect(await tagNames(b, tokenB)).not.toContain('Only in A');

    // Mail: each namespace's transactional send is its own, in its mail and its outbound record.
    for (const [ns, token, to] of [
      [a, tokenA, 'a-buyer@example.com'],
      [b, tokenB, 'b-buyer@example.com'],
    ] as const) {
      const sent = await sendOrder(ns, token, to, 'Buyer', ns.id);
      expect(sent.status, JSON.stringify(sent.body)).toBe(201);
      expect(await ns.control.jobs.run()).toBeGreaterThanOrEqual(1);
    }
    expect((await a.control.mail.list()).map((m) => m.to)).toEqual([['a-buyer@example.com']]);
    expect((await b.control.mail.list()).map((m) => m.to)).toEqual([['b-buyer@example.com']]);
    const mailOfA = await a.control.outbound.list({ kind: 'mail' });
    expect(mailOfA.map((c) => [c.target, c.namespace])).toEqual([['a-buyer@example.com', a.id]]);

    // The request log: each namespace's holds its own requests (its token requests included) only.
    const logA = await a.control.requests.list();
    expect(logA.length).toBeGreaterThan(0);
    expect(logA.every((r) => r.namespace === a.id)).toBe(true);
    expect(logA.map((r) => `${r.method} ${r.path}`)).toContain('POST /oauth/token');
    expect(logA.map((r) => `${r.method} ${r.path}`)).toContain(`POST /audience/sections/${SHOP}/tags`);
    const logB = await b.control.requests.list();
    expect(logB.every((r) => r.namespace === b.id)).toBe(true);
    expect(logB.map((r) => `${r.method} ${r.path}`)).not.toContain(`POST /audience/sections/${SHOP}/tags`);

    // A namespace's fault applies to its own requests only, whoever asks first.
    const fault = await a.control.faults.add({ path: `/audience/sections/${SHOP}/tags`, status: 503, times: 1 });
    expect(fault.namespace).toBe(a.id);
    expect(await emulator.control.faults.list()).toHaveLength(1);
    expect(await b.control.faults.list()).toEqual([]);
    expect((await call(b, tokenB, 'GET', `/audience/sections/${SHOP}/tags`)).status).toBe(200);
    const faulted = await call(a, tokenA, 'GET', `/audience/sections/${SHOP}/tags`);
    expect(faulted.status).toBe(503);
    expect(await a.control.faults.list()).toEqual([]);
    expect((await a.control.requests.list({ limit: 1 }))[0]).toMatchObject({ status: 503, fault: fault.id });

    // Forgetting a namespace's log leaves the other's.
    await a.control.requests.clear();
    expect(await a.control.requests.list()).toEqual([]);
    expect((await b.control.requests.list()).length).toBe(logB.length + 1);
  });

  it('keep 8 workers apart that run their tests at once: each test sees only its own data, requests and mail', async () => {
    // 8 workers at once, each running its tests one after the other, as parallel test workers do;
    // bench/emulator-parallel.ts runs them as processes of their own, 50 tests each, and measures.
    const workers = await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        const failures: string[] = [];
        for (let t = 0; t < 2; t++) {
          const failure = await isolatedTest(emulator.baseUrl, `w${w}-t${t}`);
          if (failure) failures.push(`w${w} t${t}: ${failure}`);
        }
        return failures;
      }),
    );
    expect(workers.flat()).toEqual([]);
  }, 280_000);

  it('refuses a namespace it does not know, and a reset removes them all', async () => {
    const ns = await emulator.namespace();
    await emulator.control.reset();
    const refused = await ns.control.requests.list().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(EmulatorError);
    expect(refused).toMatchObject({ status: 404, code: 'AUD-2208' });
  });
});

describe('a held job', () => {
  it("shows an import queued, then in_progress while held, then completed, as a connector's poll loop sees it", async () => {
    const ns = await emulator.namespace();
    const token = await ns.token();
    const attributes = (await call(ns, token, 'GET', `/audience/sections/${SHOP}/attributes`)).body.items as {
      discriminator: string;
      versions: { id: string }[];
    }[];
    const points = attributes.find((x) => x.discriminator.endsWith('.loyalty-points'))!;
    const created = await call(ns, token, 'POST', `/v2/audience/sections/${SHOP}/imports`, {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'points', attribute_version_id: points.versions.at(-1)!.id }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uploaded = await sendImportFile(ns.baseUrl, created.body, 'email,points\nheld@example.com,7\n');
    expect(uploaded.status).toBe(204);
    const status = async () =>
      (await call(ns, token, 'GET', `/audience/sections/${SHOP}/imports/${created.body.import_id}`)).body.result.status;
    expect(await status()).toBe('queued');
    const job = (await ns.control.jobs.list()).items.find((j) => j.kind === 'import')!;
    expect(job.state).toBe('waiting');

    await ns.control.jobs.hold(job.job_id);
    expect(await status()).toBe('in_progress');
    expect((await ns.control.jobs.list()).items.find((j) => j.job_id === job.job_id)?.state).toBe('running');

    await ns.control.jobs.release(job.job_id);
    expect(await status()).toBe('completed');
    expect((await ns.control.jobs.list()).items.find((j) => j.job_id === job.job_id)).toBeUndefined();
    // Released once: a second release finds nothing held.
    await expect(ns.control.jobs.release(job.job_id)).rejects.toMatchObject({ status: 404, code: 'AUD-2204' });
  });
});

import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { serverWithPool, startWorkerProcess, stopProcess, TestServer } from '../../test/app.ts';
import { BIG, CH_EMAIL, exportHelpers, MEMBERS, NEWS, pollPath, SHOP, sleep, v2 } from '../../test/exports.ts';
import { freePort } from '../store/embedded.ts';

// A worker killed in the middle of an export: the API in this process, the worker (`audience
// worker`) in processes of their own, killed with SIGKILL while the file is being written.

/** Enough profiles that writing the file takes seconds, so that the kill comes in its middle. */
const PROFILES = 120_000;

let api: TestServer;
let db: pg.Pool;
const children: ChildProcess[] = [];
const output: string[] = [];
// No worker in this process: the worker processes take the job.
serverWithPool({}, (s, d) => {
  api = s;
  db = d;
});
afterAll(async () => {
  for (const child of children) await stopProcess(child, 'SIGKILL');
});
const { account, ok, person } = exportHelpers(() => ({ server: api, db }));

async function startWorker(): Promise<ChildProcess> {
  const child = await startWorkerProcess(api.services.config.dataDir, await freePort(), output);
  children.push(child);
  return child;
}

/** The files of the account's exports in the local store, with their sizes. */
async function storedFiles(accountId: string): Promise<{ name: string; size: number }[]> {
  const dir = path.join(api.services.config.dataDir, 'files', 'exports', accountId);
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  return Promise.all(
    names.map(async (name) => ({ name, size: (await fs.stat(path.join(dir, name)).catch(() => ({ size: 0 }))).size })),
  );
}

describe('a worker killed in the middle of an export', () => {
  it(
    'EXP-01 EXP-13: finishes the export after a restart, every profile in the file exactly once, and leaves no partial file',
    { timeout: 180_000 },
    async () => {
      const a = await account();
      // Two profiles through the API (one may be contacted), the rest straight into the database.
      await person(a, 'first@example.com', { points: 500, member: false, consents: [[NEWS, CH_EMAIL, 'opt-in']] });
      await person(a, 'second@example.com', { points: 5, member: false });
      const section = (
        await db.query('select section_id::text from sections where account_id = $1 and discriminator = $2', [
          a.accountId,
          SHOP,
        ])
      ).rows[0].section_id;
      await db.query(
        `insert into profiles (account_id, export_key) select $1::bigint, 'bulk-' || n from generate_series(1, $2::int) n`,
        [a.accountId, PROFILES],
      );
      await db.query(
        `insert into profile_sections (account_id, profile_id, section_id, attributes)
       select p.account_id, p.profile_id, $2::bigint, jsonb_build_object($3::text, (p.profile_id % 1000)::int, $4::text, p.profile_id % 3 = 0, $5::text, 'p' || p.profile_id || '@bulk.example.com')
       from profiles p where p.account_id = $1::bigint and p.export_key like 'bulk-%'`,
        [a.accountId, section, a.v.points, a.v.member, a.v.email],
      );
      await db.query('analyze profiles, profile_sections');
      // Big: points > 100; Members: member = true. The file holds those in Big and not in Members.
      const expected = (
        await db.query<{ export_key: string }>(
          `select p.export_key from profiles p join profile_sections s using (account_id, profile_id)
       where p.account_id = $1::bigint and s.section_id = $2::bigint and (s.attributes ->> $3::text)::numeric > 100 and (s.attributes -> $4::text) is distinct from 'true'::jsonb
       order by p.profile_id`,
          [a.accountId, section, a.v.points, a.v.member],
        )
      ).rows.map((r) => r.export_key);
      expect(expected.length).toBeGreaterThan(PROFILES / 2);

      const created = await ok(
        api.request('POST', '/audience/profiles/reports/consents', {
          token: a.token,
          body: {
            section_discriminator: SHOP,
            topic_discriminators: [NEWS],
            channel_discriminator: CH_EMAIL,
            segments: {
              timezone: 'UTC',
              segment_discriminators: { big: BIG, members: MEMBERS },
              filter: 'big & !members',
            },
            attributes: [{ field_name: 'points', attribute_version_id: a.v.points }],
          },
        }),
        201,
      );
      const pollUrl = created.body.poll_url as string;
      const exportId = pollUrl.split('/').pop()!;

      // The first worker takes the job and starts writing; it is killed once part of the file is written.
      const first = await startWorker();
      let partial: { name: string; size: number } | undefined;
      for (let i = 0; i < 6000 && !partial; i++) {
        partial = (await storedFiles(a.accountId)).find((f) => f.name.endsWith('.partial') && f.size > 0);
        if (!partial) await sleep(10);
      }
      expect(partial, output.join('')).toBeDefined();
      await stopProcess(first, 'SIGKILL');
      // Killed in the middle: the export is in progress, its job leased by the dead worker, no file under its name.
      expect(
        (await db.query('select status from exports where account_id = $1 and export_id = $2', [a.accountId, exportId]))
          .rows,
      ).toEqual([{ status: 'in_progress' }]);
      expect(
        (await db.query("select attempts from jobs where account_id = $1 and kind = 'export'", [a.accountId])).rows,
      ).toEqual([{ attempts: 1 }]);
      expect((await storedFiles(a.accountId)).map((f) => f.name)).not.toContain(`${exportId}.csv.gz`);
      expect((await api.request('GET', v2(pollUrl), { token: a.token })).status).toBe(202);

      // A new worker takes the job up once the dead one's lease has run out, and writes the file anew.
      const second = await startWorker();
      let status = 202;
      for (let i = 0; i < 1500 && status === 202; i++) {
        status = (await api.request('GET', v2(pollUrl), { token: a.token })).status;
        if (status === 202) await sleep(100);
      }
      expect(status, output.join('')).toBe(200);
      await stopProcess(second, 'SIGTERM');

      const res = await fetch(api.url + pollPath(pollUrl), { headers: { authorization: `Bearer ${a.token}` } });
      expect(res.status).toBe(200);
      const [header, ...rows] = parseCsv(Buffer.from(await res.arrayBuffer()), {
        relax_column_count: false,
      }) as string[][];
      expect(header).toEqual(['exportKey', 'points', 'big', 'members', 'Email']);
      const keys = rows.map((r) => r[0]);
      // Every profile exactly once: as many rows as profiles, no key twice, the very profiles expected, in the order of their creation.
      expect(rows.length).toBe(expected.length);
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys).toEqual(expected);
      expect(rows.every((r) => r[2] === '1' && r[3] === '0')).toBe(true);
      // The one that may be contacted has its address, the others none.
      const contacted = rows.filter((r) => r[4] !== '');
      expect(contacted).toEqual([[expect.any(String), '500', '1', '0', 'first@example.com']]);
      expect(contacted[0][0]).not.toMatch(/^bulk-/);
      // The job ran twice and is done; the store holds the file alone, the dead worker's partial file removed.
      expect(
        (
          await db.query('select count(*)::int as n from jobs where account_id = $1 and kind = $2', [
            a.accountId,
            'export',
          ])
        ).rows[0].n,
      ).toBe(0);
      expect((await storedFiles(a.accountId)).map((f) => f.name)).toEqual([`${exportId}.csv.gz`]);
    },
  );
});

// `audience dump` and `audience restore` as the real program runs them, on the test run's
// PostgreSQL (the embedded 18 under npm test; a Citus coordinator under npm run test:citus, where
// the restore is distributed by the migrate that follows it): a database filled through the API is
// dumped and restored into an empty one with every table's rows and the API's answers the same;
// damaged, truncated and newer files, and a database that is not empty, are refused, writing nothing.
// The hops through PostgreSQL 15 and Citus are test/dump-hops.test.ts.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { TestServer, testDatabase } from './app.ts';
import { scratchFolder } from './scratch.ts';
import { createDatabase, dropDatabase } from './databases.ts';
import { restore } from '../src/store/dump.ts';
import { createPool } from '../src/store/pool.ts';
import { answers, audience, fillThroughApi, tableDigests, tablesIn, type Filled } from './dump-data.ts';

const server = inject('databaseUrl');
const suffix = crypto.randomBytes(4).toString('hex');
const targets: string[] = [];
let dir: string;
let source: string;
let filled: Filled;
let before: Awaited<ReturnType<typeof answers>>;
let dump: string;
let dumped: { code: number; stdout: string; stderr: string };

/** A new empty database of the run's server (on a cluster, with citus on every node). */
async function emptyDatabase(): Promise<string> {
  const name = `dump_${suffix}_${targets.length}`;
  targets.push(name);
  return createDatabase(server, name);
}

beforeAll(async () => {
  dir = await scratchFolder('audience-dump-');
  source = await testDatabase();
  const app = await TestServer.start({ DATA_DIR: dir }, { worker: true });
  try {
    filled = await fillThroughApi(app);
    before = await answers(app, filled);
  } finally {
    await app.close();
  }
  dump = path.join(dir, 'audience.dump');
  dumped = await audience(source, 'dump', dump);
});
afterAll(async () => {
  for (const name of targets) await dropDatabase(server, name);
});

describe('audience dump and restore', () => {
  it('restores a dump into an empty database with every row, the same answers, and tokens of before', async () => {
    expect(dumped.code, dumped.stderr).toBe(0);
    const summary = JSON.parse(dumped.stdout);
    const filledTables = [
      'accounts',
      'api_keys',
      'signing_keys',
      'profiles',
      'profile_identifiers',
      'profile_sections',
      'attribute_history',
      'consents',
      'consent_history',
      'profile_events',
      'imports',
      'exports',
      'activities',
      'transactional_sends',
      'transactional_outbox',
      'segments',
    ];
    for (const table of filledTables) expect(summary.tables[table], table).toBeGreaterThan(0);
    await expect(fs.stat(`${dump}.partial`)).rejects.toThrow();
    const target = await emptyDatabase();
    const restored = await audience(target, 'restore', dump);
    expect(restored.code, restored.stderr).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ restored: dump, tables: summary.tables, migrated: [] });
    expect(await tableDigests(target)).toEqual(await tableDigests(source));
    const app = await TestServer.start({ DATA_DIR: dir }, { database: target });
    try {
      // The token issued before the dump: its signing key came with the rows.
      expect(await answers(app, filled)).toEqual(before);
      expect((await app.token(filled.credentials)).length).toBeGreaterThan(0);
    } finally {
      await app.close();
    }
  }, 120_000); // on a Citus coordinator, the restore's migrate distributes the tables with their rows

  it('refuses a database that is not empty, changing nothing', async () => {
    const digests = await tableDigests(source);
    const refused = await audience(source, 'restore', dump);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/nothing was restored: the database is not empty: it has \d+ tables/);
    expect(await tableDigests(source)).toEqual(digests);
  });

  it('refuses a damaged, a truncated and a newer file, writing nothing', async () => {
    const bytes = await fs.readFile(dump);
    const content = zlib.gunzipSync(bytes);
    const header = JSON.parse(content.subarray(5, 5 + content.readUInt32BE(1)).toString());
    const withHeader = (changed: object) => {
      const json = Buffer.from(JSON.stringify(changed));
      const head = Buffer.alloc(5);
      head.write('H');
      head.writeUInt32BE(json.length, 1);
      return zlib.gzipSync(Buffer.concat([head, json, content.subarray(5 + content.readUInt32BE(1))]));
    };
    const flipped = (at: number) => {
      const copy = Buffer.from(bytes);
      copy[at] ^= 0x01;
      return copy;
    };
    const cases: [string, Buffer, RegExp][] = [
      // Anywhere in the compressed rows, where it may reach a record or a row first; in gzip's CRC, once every row is loaded.
      ...[1, 2, 3, 4, 5, 6, 7].map((eighth): [string, Buffer, RegExp] => [
        `a flipped byte at ${eighth}/8`,
        flipped(Math.floor((bytes.length * eighth) / 8)),
        /nothing was restored: it is damaged/,
      ]),
      [
        'a flipped CRC',
        flipped(bytes.length - 6),
        /nothing was restored: it is damaged or not a dump \(gzip: incorrect data check\)/,
      ],
      [
        'a cut',
        bytes.subarray(0, Math.floor((bytes.length * 2) / 3)),
        /nothing was restored: it ends too early: the file is truncated/,
      ],
      // Valid gzip whose content is not what was written: only the checksum tells.
      [
        'another creation time',
        withHeader({ ...header, created_at: '2000-01-01T00:00:00.000Z' }),
        /nothing was restored: its checksum \(SHA-256\) does not match/,
      ],
      [
        'a newer schema',
        withHeader({ ...header, schema: [...header.schema, '9999_from_the_future.sql'] }),
        /nothing was restored: its schema is newer than this program's: migration 9999_from_the_future.sql/,
      ],
      ['no dump', zlib.gzipSync('hello'), /nothing was restored: it is damaged/],
    ];
    // In this process: the refusal is the same code as the command's (whose exit the test above checks), without a process each.
    const target = await emptyDatabase();
    const pool = createPool(target, 1);
    try {
      for (const [what, file, message] of cases) {
        await expect(restore(pool, Readable.from([file])), what).rejects.toThrow(message);
        expect(await tablesIn(target), what).toEqual([]);
      }
    } finally {
      await pool.end();
    }
  });

  it('says what is wrong with the command line', async () => {
    const missing = await audience(source, 'restore', path.join(dir, 'none.dump'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`cannot read the dump ${path.join(dir, 'none.dump')}: ENOENT`);
    const usage = await audience(source, 'restore');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('restore needs one FILE');
    const help = await audience(source, 'dump', '--help');
    expect(help.stdout).toContain('usage: audience dump [FILE]');
  });
});

// The way from `npm start` to a cluster and back, as docs/scaling.md tells it: a database the
// program filled on the embedded PostgreSQL 18 is dumped and restored into PostgreSQL 15, from
// there into a Citus coordinator (which migrate distributes), and from there into the embedded 18
// again; after each hop every table's rows are the same, a server on the copy answers a fixed set
// of reads as on the first, and a token issued before the first dump still works. Runs under
// `npm run test:citus` only (a coordinator at DATABASE_URL); under `npm test` it is skipped.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { TestServer } from './app.ts';
import { createDatabase, dropDatabase, withClient } from './databases.ts';
import { answers, audience, fillThroughApi, tableDigests, type Filled } from './dump-data.ts';
import { startEmbeddedDatabase, withDatabase, type EmbeddedDatabase } from '../src/store/embedded.ts';
import { migrate } from '../src/store/migrate.ts';
import { createPool } from '../src/store/pool.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const coordinator = inject('databaseUrl');
const name = `dump_hops_${crypto.randomBytes(4).toString('hex')}`;
let dir: string | undefined;
let embedded: EmbeddedDatabase | undefined;
let postgres15: string | undefined;
let onCitus = false;

afterAll(async () => {
  if (onCitus) await dropDatabase(coordinator, name);
  await embedded?.stop();
  if (postgres15) await run('bash', [path.join(ROOT, 'scripts', 'postgres15.sh'), 'stop', postgres15]);
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** A new empty database on the server of `url`. */
async function newDatabase(url: string, database: string): Promise<string> {
  await withClient(url, (db) => db.query(`create database ${database}`));
  return withDatabase(url, database);
}

describe.skipIf(!inject('citus'))('dump and restore from the embedded 18 through PostgreSQL 15 and Citus', () => {
  it('carries every row, the same answers and the tokens of before over each hop', async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-hops-'));
    // The user postgres runs PostgreSQL 15 as root does here, and must reach its folder.
    await fs.chmod(dir, 0o755);
    embedded = await startEmbeddedDatabase(path.join(dir, 'embedded'), { persistent: false, throwaway: true });
    const first = await newDatabase(embedded.url, 'first');
    const pool = createPool(first, 2);
    await migrate(pool).finally(() => pool.end());
    const files = path.join(dir, 'files');
    const app = await TestServer.start({ DATA_DIR: files }, { database: first, worker: true });
    let filled: Filled;
    let expected: Awaited<ReturnType<typeof answers>>;
    try {
      filled = await fillThroughApi(app);
      expected = await answers(app, filled);
    } finally {
      await app.close();
    }
    const rows = await tableDigests(first);

    /** Dumps `from`, restores the file into `to`, and checks the copy. */
    const hop = async (from: string, to: string, file: string) => {
      const dumped = await audience(from, 'dump', path.join(dir!, file));
      expect(dumped.code, dumped.stderr).toBe(0);
      const restored = await audience(to, 'restore', path.join(dir!, file));
      expect(restored.code, restored.stderr).toBe(0);
      expect(await tableDigests(to), file).toEqual(rows);
      const there = await TestServer.start({ DATA_DIR: files }, { database: to });
      try {
        expect(await answers(there, filled), file).toEqual(expected);
      } finally {
        await there.close();
      }
    };

    const started = await run('bash', [
      path.join(ROOT, 'scripts', 'postgres15.sh'),
      'start',
      path.join(dir, 'pg15'),
      '9990',
    ]);
    postgres15 = path.join(dir, 'pg15');
    const pg15 = withDatabase(
      started.stdout
        .trim()
        .split('\n')
        .at(-1)!
        .replace(/^DATABASE_URL=/, ''),
      'postgres',
    );
    await hop(first, pg15, 'from-18.dump');

    onCitus = true;
    const citus = await createDatabase(coordinator, name);
    await hop(pg15, citus, 'from-15.dump');
    // Migrate, run by the restore, distributed the tables with their rows.
    const distributed = await withClient(citus, async (db) => {
      const { rows } = await db.query<{ table: string; method: string }>(
        'select logicalrelid::regclass::text as table, partmethod as method from pg_dist_partition',
      );
      return Object.fromEntries(rows.map((r) => [r.table, r.method]));
    });
    expect(distributed).toMatchObject({ accounts: 'n', profiles: 'h', attribute_history: 'h', consents: 'h' });

    await hop(citus, await newDatabase(embedded.url, 'back'), 'from-citus.dump');
  }, 600_000);
});

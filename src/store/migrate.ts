import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { distribute, hasCitus, isDistributed } from './distribute.ts';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant shared by every process of the program: one migrator at a time.
const MIGRATION_LOCK = 7_418_302;

/**
 * Applies the numbered `.sql` files of `migrations/` not yet applied, one transaction each. On a
 * database with the citus extension the schema is then distributed by account (distribute.ts):
 * a database not distributed yet (new, or restored from a single node) takes every migration as
 * plain PostgreSQL and is distributed at the end, with its rows; on one already distributed, each
 * migration distributes the tables it creates in its own transaction.
 */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(`create table if not exists schema_migrations (
      name text primary key, applied_at timestamptz not null default now())`);
    const citus = await hasCitus(client);
    const distributed = citus && (await isDistributed(client));
    const done = new Set(
      (await client.query<{ name: string }>('select name from schema_migrations')).rows.map((r) => r.name),
    );
    const files = (await fs.readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await fs.readFile(path.join(MIGRATIONS_DIR, file), 'utf8');
      await inTransaction(client, `migration ${file}`, async () => {
        // A new table that points at a reference table stays a plain one until distribute()
        // distributes it, instead of one that Citus manages on the coordinator.
        if (distributed) {
          await client.query('set local citus.enable_local_reference_table_foreign_keys to off');
          // A migration converts every account's rows: its statements span shards by design.
          await client.query("set local citus.multi_task_query_log_level to 'off'");
        }
        await client.query(sql);
        if (distributed) await distribute(client);
        await client.query('insert into schema_migrations (name) values ($1)', [file]);
      });
      applied.push(file);
    }
    if (citus && !distributed) await inTransaction(client, 'distributing the schema', () => distribute(client));
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.release();
  }
  return applied;
}

async function inTransaction(client: pg.PoolClient, what: string, work: () => Promise<unknown>): Promise<void> {
  await client.query('begin');
  try {
    await work();
    await client.query('commit');
  } catch (err) {
    await client.query('rollback');
    throw new Error(`${what} failed: ${(err as Error).message}`);
  }
}

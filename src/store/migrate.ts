import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { copyFunctionsToShards, distribute, hasCitus, isDistributed } from './distribute.ts';
import { checkOut } from './pool.ts';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant shared by every process of the program: one migrator at a time.
const MIGRATION_LOCK = 7_418_302;

/**
 * Applies the numbered `.sql` files of `migrations/` not yet applied, one transaction each. On a
 * database with the citus extension the schema is then distributed by account (distribute.ts):
 * a database not distributed yet (new, or restored from a single node) takes every migration as
 * plain PostgreSQL and is distributed at the end, with its rows; on one already distributed, each
 * migration distributes the tables it creates in its own transaction. Then the by-account
 * functions' copies for each shard group are made again on every node (distribute.ts).
 */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const { client, release } = await checkOut(pool);
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
    for (const file of await migrationNames()) {
      if (done.has(file)) continue;
      await inTransaction(client, `migration ${file}`, async () => {
        // A new table that points at a reference table stays a plain one until distribute()
        // distributes it, instead of one that Citus manages on the coordinator.
        if (distributed) {
          await client.query('set local citus.enable_local_reference_table_foreign_keys to off');
          // A migration converts every account's rows: its statements span shards by design.
          await client.query("set local citus.multi_task_query_log_level to 'off'");
        }
        await applyMigration(client, file, distributed ? () => distribute(client) : undefined);
      });
      applied.push(file);
    }
    if (citus && !distributed) await inTransaction(client, 'distributing the schema', () => distribute(client));
    if (citus) await copyFunctionsToShards(client);
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    release();
  }
  return applied;
}

/** The names of the migration files this program has, in the order they apply: the schema versions it knows. */
export async function migrationNames(): Promise<string[]> {
  return (await fs.readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
}

/** Runs one migration file and records it, in the caller's transaction; `then` runs between the two. */
async function applyMigration(client: pg.ClientBase, file: string, then?: () => Promise<unknown>): Promise<void> {
  await client.query(await fs.readFile(path.join(MIGRATIONS_DIR, file), 'utf8'));
  await then?.();
  await client.query('insert into schema_migrations (name) values ($1)', [file]);
}

/**
 * The schema as it was at migration `last`, made in the caller's transaction on a database without
 * tables (refused otherwise), as plain PostgreSQL also on Citus: what a restore loads a dump's rows
 * into (dump.ts), before `migrate` applies the later migrations and distributes. Holds the
 * migrators' lock until the transaction ends: a process starting meanwhile waits, then finds the schema.
 */
export async function migrateTo(client: pg.ClientBase, last: string): Promise<void> {
  await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  const names = await migrationNames();
  if (!names.includes(last)) throw new Error(`this program has no migration ${last}`);
  const { rows: tables } = await client.query<{ name: string }>(
    `select relname as name from pg_class where relnamespace = current_schema()::regnamespace and relkind in ('r', 'p')
     order by relname`,
  );
  if (tables.length > 0)
    throw new Error(
      `the database is not empty: it has ${tables.length} tables (${tables
        .slice(0, 5)
        .map((t) => t.name)
        .join(', ')}${tables.length > 5 ? ', …' : ''}); restore into a new database`,
    );
  await client.query(`create table schema_migrations (
    name text primary key, applied_at timestamptz not null default now())`);
  for (const file of names.slice(0, names.indexOf(last) + 1)) await applyMigration(client, file);
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

import type pg from 'pg';
import { Problem } from '../core/problems.ts';
import { withTransaction } from './pool.ts';

/**
 * Snapshots of the whole database's rows, for the emulator (docs/emulator.md "Reset"): a copy of
 * every table in a schema of its own, and a restore that puts the tables back as they were, in one
 * transaction and one round trip. Tables are found in the catalogue, so a new migration's table is
 * in every snapshot the day it is added. Not for a deployment: a restore deletes every account's rows.
 */

/** The tables a snapshot leaves alone: the migrations applied, and the signing keys (the service's, not data: tokens stay verifiable). */
const KEPT = ['schema_migrations', 'signing_keys'];

export const SNAPSHOT_NAME = /^[a-z][a-z0-9_]{0,39}$/;
const schemaOf = (name: string) => `emulator_snapshot_${name}`;
const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

interface Table {
  name: string;
  /** Columns that can be written: generated ones left out. */
  columns: string[];
  /** Whether an identity column is `generated always` (the insert then overrides it). */
  identityAlways: boolean;
}

/** The tables of the current schema, parents before the tables whose foreign keys point at them. */
async function tablesOf(db: pg.ClientBase | pg.Pool): Promise<Table[]> {
  const { rows } = await db.query<{ name: string; columns: string[]; always: boolean; parents: string[] }>(
    `select c.relname as name,
       array(select quote_ident(a.attname) from pg_attribute a
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
             order by a.attnum) as columns,
       exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attidentity = 'a') as always,
       array(select distinct p.relname::text from pg_constraint f join pg_class p on p.oid = f.confrelid
             where f.conrelid = c.oid and f.contype = 'f' and f.confrelid <> c.oid) as parents
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind in ('r', 'p') and not c.relispartition
       and c.relname <> all($1::text[])
     order by c.relname`,
    [KEPT],
  );
  const byName = new Map(rows.map((r) => [r.name, r]));
  const ordered: Table[] = [];
  const placed = new Set<string>();
  const place = (name: string) => {
    if (placed.has(name) || !byName.has(name)) return;
    placed.add(name);
    const row = byName.get(name)!;
    for (const parent of row.parents) place(parent);
    ordered.push({ name, columns: row.columns, identityAlways: row.always });
  };
  for (const row of rows) place(row.name);
  return ordered;
}

/** Copies every table's rows and every sequence's position into snapshot `name` (replacing one of that name). */
export async function saveSnapshot(pool: pg.Pool, name: string): Promise<void> {
  if (!SNAPSHOT_NAME.test(name)) throw new Error(`snapshot name "${name}" is not ${SNAPSHOT_NAME}`);
  const schema = ident(schemaOf(name));
  await withTransaction(pool, async (tx) => {
    const tables = await tablesOf(tx);
    const statements = [`drop schema if exists ${schema} cascade`, `create schema ${schema}`];
    for (const t of tables)
      statements.push(
        `create unlogged table ${schema}.${ident(t.name)} as select ${t.columns.join(', ')} from ${ident(t.name)}`,
      );
    statements.push(`create unlogged table ${schema}.sequences as
      select s.sequencename::text as name, pg_sequence_last_value(format('%I.%I', s.schemaname, s.sequencename)::regclass) as last_value
      from pg_sequences s where s.schemaname = current_schema()`);
    await tx.query(statements.join(';\n'));
  });
  restores.delete(name);
}

/** The names of the snapshots kept in the database. */
export async function snapshotNames(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    "select substr(nspname, 19) as name from pg_namespace where nspname like 'emulator\\_snapshot\\_%' order by 1",
  );
  return rows.map((r) => r.name);
}

/** The restore's statements of each snapshot, built once from the catalogue. */
const restores = new Map<string, string>();

async function restoreText(pool: pg.Pool, name: string): Promise<string> {
  const known = restores.get(name);
  if (known) return known;
  const schema = ident(schemaOf(name));
  const tables = await tablesOf(pool);
  const { rows: sequences } = await pool.query<{ name: string; last_value: string | null }>(
    `select name, last_value::text from ${schema}.sequences`,
  );
  // Children's rows go before their parents', and come back after them; the sequences go back
  // where they were, so that the ids handed out after a restore are the ones handed out after the save.
  const text = [
    'begin',
    ...tables.toReversed().map((t) => `delete from ${ident(t.name)}`),
    ...tables.map(
      (t) =>
        `insert into ${ident(t.name)} (${t.columns.join(', ')})${t.identityAlways ? ' overriding system value' : ''} select ${t.columns.join(', ')} from ${schema}.${ident(t.name)}`,
    ),
    ...sequences.map((s) =>
      s.last_value === null
        ? `select setval('${ident(s.name).replaceAll("'", "''")}', 1, false)`
        : `select setval('${ident(s.name).replaceAll("'", "''")}', ${BigInt(s.last_value)}, true)`,
    ),
    'commit',
  ].join(';\n');
  restores.set(name, text);
  return text;
}

/**
 * Puts every table back as snapshot `name` holds it, in one transaction: rows written since are
 * gone, rows deleted since are back. Throws when there is no such snapshot.
 */
export async function restoreSnapshot(pool: pg.Pool, name: string): Promise<void> {
  if (!(await snapshotNames(pool)).includes(name))
    throw new Problem(
      'AUD-2201',
      `The emulator has no snapshot "${name}": save one with PUT /_emulator/snapshots/${name}`,
    );
  const text = await restoreText(pool, name);
  const client = await pool.connect();
  try {
    await client.query(text);
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

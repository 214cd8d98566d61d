import type pg from 'pg';
import { Problem } from '../core/problems.ts';
import { ident, tablesOf } from './catalogue.ts';
import { checkOut, withTransaction } from './pool.ts';

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

/** Copies every table's rows and every sequence's position into snapshot `name` (replacing one of that name). */
export async function saveSnapshot(pool: pg.Pool, name: string): Promise<void> {
  if (!SNAPSHOT_NAME.test(name)) throw new Error(`snapshot name "${name}" is not ${SNAPSHOT_NAME}`);
  const schema = ident(schemaOf(name));
  await withTransaction(pool, async (tx) => {
    const tables = await tablesOf(tx, KEPT);
    const statements = [`drop schema if exists ${schema} cascade`, `create schema ${schema}`];
    for (const t of tables)
      statements.push(
        `create unlogged table ${schema}.${ident(t.name)} as select ${t.columns.map(ident).join(', ')} from ${ident(t.name)}`,
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
  const tables = await tablesOf(pool, KEPT);
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
        `insert into ${ident(t.name)} (${t.columns.map(ident).join(', ')})${t.identityAlways ? ' overriding system value' : ''} select ${t.columns.map(ident).join(', ')} from ${schema}.${ident(t.name)}`,
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
  const { client, release } = await checkOut(pool);
  try {
    await client.query(text);
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    release();
  }
}

import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COORDINATOR_TABLES, DISTRIBUTION_COLUMN, REFERENCE_TABLES } from '../src/store/distribute.ts';
import { testDatabase } from './app.ts';

// The schema is distributed by account on Citus (docs/scaling.md, src/store/distribute.ts): every
// table but the reference and coordinator tables leads with account_id (its first column, and its
// primary key where it has one), every foreign key between distributed tables carries account_id,
// and every statement of an area's queries.ts that reads or writes a distributed table names
// account_id, so that it runs on the one node holding that account. On a Citus cluster (npm run
// test:citus) the migrated database is checked to be distributed so.

let db: pg.Client;
let distributed: string[];
beforeAll(async () => {
  db = new pg.Client({ connectionString: await testDatabase() });
  await db.connect();
  const { rows } = await db.query<{
    name: string;
  }>(`select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`);
  distributed = rows.map((r) => r.name).filter((t) => !REFERENCE_TABLES.includes(t) && !COORDINATOR_TABLES.includes(t));
});
afterAll(async () => db?.end());

/** The columns of a table's primary key, or of one foreign key, in order. */
async function constraints(
  kind: 'p' | 'f',
): Promise<{ table: string; name: string; columns: string[]; refColumns: string[] }[]> {
  const { rows } = await db.query<{ table: string; name: string; columns: string[]; ref_columns: string[] | null }>(
    `select c.relname as table, k.conname as name,
       array(select a.attname from unnest(k.conkey) with ordinality u(n, i) join pg_attribute a on a.attrelid = k.conrelid and a.attnum = u.n order by u.i)::text[] as columns,
       array(select a.attname from unnest(k.confkey) with ordinality u(n, i) join pg_attribute a on a.attrelid = k.confrelid and a.attnum = u.n order by u.i)::text[] as ref_columns
     from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and k.contype = $1`,
    [kind],
  );
  return rows.map((r) => ({ table: r.table, name: r.name, columns: r.columns, refColumns: r.ref_columns ?? [] }));
}

/**
 * The SQL text of every statement in the areas' queries.ts files and their queries/ folders (an
 * area's statements by family), template literals and plain strings passed to query.
 */
async function statements(): Promise<{ file: string; sql: string }[]> {
  const src = path.resolve(import.meta.dirname, '..', 'src');
  const found: { file: string; sql: string }[] = [];
  for (const area of await fs.readdir(src, { withFileTypes: true })) {
    if (!area.isDirectory()) continue;
    const family = path.join(src, area.name, 'queries');
    const families = (await fs.readdir(family).catch(() => [])).filter((f) => f.endsWith('.ts'));
    for (const file of [path.join(src, area.name, 'queries.ts'), ...families.map((f) => path.join(family, f))]) {
      const text = await fs.readFile(file, 'utf8').catch(() => undefined);
      if (text === undefined) continue;
      for (const m of text.matchAll(/`([^`]*)`|'((?:select|insert|update|delete|with)\b[^']*)'/gis)) {
        const sql = m[1] ?? m[2];
        if (/\b(select|insert|update|delete)\b/i.test(sql) && /\b(from|into|update|join)\b/i.test(sql))
          found.push({ file: path.relative(src, file), sql });
      }
    }
  }
  return found;
}

describe('the schema, distributable by account', () => {
  it('has a table list to check', () => {
    expect(distributed).toEqual(
      expect.arrayContaining([
        'profiles',
        'profile_sections',
        'profile_events',
        'attribute_history',
        'consents',
        'imports',
      ]),
    );
  });

  it('leads every distributed table, and its primary key where it has one, with account_id', async () => {
    const { rows } = await db.query<{
      table: string;
      first: string;
    }>(`select c.relname as table, a.attname as first from pg_class c
      join pg_namespace n on n.oid = c.relnamespace join pg_attribute a on a.attrelid = c.oid and a.attnum = 1 where n.nspname = 'public'`);
    expect(rows.filter((r) => distributed.includes(r.table) && r.first !== 'account_id').map((r) => r.table)).toEqual(
      [],
    );
    const keys = await constraints('p');
    expect(
      keys
        .filter((k) => distributed.includes(k.table) && k.columns[0] !== 'account_id')
        .map((k) => `${k.table} (${k.columns.join(', ')})`),
    ).toEqual([]);
  });

  it('carries account_id in every foreign key between distributed tables, to account_id', async () => {
    const faults = (await constraints('f'))
      .filter((k) => distributed.includes(k.table))
      .filter(
        (k) =>
          k.columns[k.columns.indexOf('account_id')] === undefined ||
          k.refColumns[k.columns.indexOf('account_id')] !== 'account_id',
      )
      .map((k) => `${k.table}.${k.name} (${k.columns.join(', ')}) → (${k.refColumns.join(', ')})`);
    expect(faults).toEqual([]);
  });

  it('names account_id in every statement of the areas that reads or writes a distributed table', async () => {
    const all = await statements();
    expect(all.length).toBeGreaterThan(50);
    const faults = all
      .filter(({ sql }) => distributed.some((t) => new RegExp(`\\b(from|into|update|join)\\s+${t}\\b`, 'i').test(sql)))
      .filter(({ sql }) => !/\baccount_id\b/i.test(sql))
      .map(({ file, sql }) => `${file}: ${sql.replace(/\s+/g, ' ').slice(0, 140)}`);
    expect(faults).toEqual([]);
  });

  it('is distributed so on a Citus cluster: reference tables, colocated tables by account_id, the job queue on the coordinator, the functions on every node', async () => {
    const {
      rows: [{ citus }],
    } = await db.query<{ citus: boolean }>(
      "select exists (select 1 from pg_extension where extname = 'citus') as citus",
    );
    if (!citus) return;
    const { rows } = await db.query<{ name: string; method: string; column: string | null; colocation: number }>(
      `select logicalrelid::regclass::text as name, partmethod as method, column_to_column_name(logicalrelid, partkey) as column, colocationid as colocation
       from pg_dist_partition`,
    );
    const of = new Map(rows.map((r) => [r.name, r]));
    expect(REFERENCE_TABLES.filter((t) => of.get(t)?.method !== 'n' || of.get(t)?.column !== null)).toEqual([]);
    expect(COORDINATOR_TABLES.filter((t) => of.has(t))).toEqual([]);
    expect(distributed.filter((t) => of.get(t)?.method !== 'h' || of.get(t)?.column !== DISTRIBUTION_COLUMN)).toEqual(
      [],
    );
    expect(new Set(distributed.map((t) => of.get(t)!.colocation)).size).toBe(1);
    const { rows: functions } = await db.query<{ name: string }>(
      `select p.proname as name from pg_proc p where p.pronamespace = 'public'::regnamespace
       and not exists (select 1 from pg_dist_object o where o.classid = 'pg_proc'::regclass and o.objid = p.oid)`,
    );
    expect(functions).toEqual([]);
  });
});

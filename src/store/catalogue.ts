import type pg from 'pg';

/**
 * The program's tables as the catalogue lists them, for the copies of every table (the emulator's
 * snapshots, dump and restore): a table a new migration adds is in them the day it is added.
 */

/** A table or constraint name of the schema, quoted. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export interface Table {
  name: string;
  /** Columns that can be written, in the table's order: generated ones left out. */
  columns: string[];
  /** Whether an identity column is `generated always` (an insert then overrides it). */
  identityAlways: boolean;
}

/** The tables of the current schema but `except`, parents before the tables whose foreign keys point at them. */
export async function tablesOf(db: Pick<pg.ClientBase, 'query'>, except: readonly string[]): Promise<Table[]> {
  const { rows } = await db.query<{ name: string; columns: string[]; always: boolean; parents: string[] }>(
    `select c.relname as name,
       array(select a.attname::text from pg_attribute a
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
             order by a.attnum) as columns,
       exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attidentity = 'a') as always,
       array(select distinct p.relname::text from pg_constraint f join pg_class p on p.oid = f.confrelid
             where f.conrelid = c.oid and f.contype = 'f' and f.confrelid <> c.oid) as parents
     from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind in ('r', 'p') and not c.relispartition
       and c.relname <> all($1::text[])
     order by c.relname`,
    [except],
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

import type pg from 'pg';
import { ident } from './catalogue.ts';

/**
 * Distribution by account on Citus (docs/scaling.md). The program's schema is one for both
 * deployments; on a database with the citus extension, `migrate` calls `distribute` after the
 * migrations, so that every table it finds undistributed takes its place in the plan below. Without
 * the extension nothing happens.
 */

/**
 * Small tables read before the account is known (a token names its API key, a request its
 * account) or by every node, and rarely written: copied to every node.
 */
export const REFERENCE_TABLES: readonly string[] = ['accounts', 'api_keys', 'signing_keys', 'schema_migrations'];
/**
 * Tables that stay on the coordinator: the job queue is leased across accounts with `SKIP LOCKED`,
 * which needs the table in one place; its rows are few and short-lived.
 */
export const COORDINATOR_TABLES: readonly string[] = ['jobs'];
/** Every other table is distributed by this column, all colocated with the first. */
export const DISTRIBUTION_COLUMN = 'account_id';

/** Whether the database this client is connected to has the citus extension. */
export async function hasCitus(db: Pick<pg.ClientBase, 'query'>): Promise<boolean> {
  const { rows } = await db.query("select 1 from pg_extension where extname = 'citus'");
  return rows.length > 0;
}

/** Whether the schema has been distributed: its accounts are a reference table. */
export async function isDistributed(db: Pick<pg.ClientBase, 'query'>): Promise<boolean> {
  const { rows } = await db.query("select 1 from pg_dist_partition where logicalrelid = to_regclass('accounts')");
  return rows.length > 0;
}

interface ForeignKey {
  table: string;
  name: string;
  definition: string;
}

/**
 * Makes the reference tables and distributes every other table of the schema that Citus does not
 * know yet, then propagates the schema's functions to the workers. Citus distributes a table only
 * when every table its foreign keys point at is already distributed or a reference table, and turns
 * a plain table that points at a new reference table into a "local" one that it then cannot
 * distribute; so the foreign keys of the tables to convert are dropped first and added again once
 * every table has its place. Existing rows move to the shards with their table. Runs in the
 * caller's transaction (the migrator's), so a failure leaves the database as it was.
 */
export async function distribute(db: Pick<pg.ClientBase, 'query'>): Promise<string[]> {
  const { rows: tables } = await db.query<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
       and not exists (select 1 from pg_dist_partition p where p.logicalrelid = c.oid)
     order by c.relname`,
  );
  const pending = tables.map((t) => t.name).filter((t) => !COORDINATOR_TABLES.includes(t));
  const converted: string[] = [];
  if (pending.length > 0) {
    // Foreign keys to a reference table need Citus to do a transaction's work on each node over one
    // connection; it refuses to add them after it has created shards in parallel.
    await db.query("set local citus.multi_shard_modify_mode to 'sequential'");
    const { rows: keys } = await db.query<ForeignKey>(
      `select c.relname as table, k.conname as name, pg_get_constraintdef(k.oid) as definition
       from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_class r on r.oid = k.confrelid
       where k.contype = 'f' and (c.relname = any($1::text[]) or r.relname = any($1::text[]))
         and c.relnamespace = 'public'::regnamespace`,
      [pending],
    );
    for (const k of keys) await db.query(`alter table ${ident(k.table)} drop constraint ${ident(k.name)}`);
    for (const table of pending.filter((t) => REFERENCE_TABLES.includes(t))) {
      await db.query('select create_reference_table($1::regclass)', [table]);
      converted.push(table);
    }
    let colocateWith = (await colocationTable(db)) ?? 'default';
    for (const table of pending.filter((t) => !REFERENCE_TABLES.includes(t))) {
      await db.query('select create_distributed_table($1::regclass, $2, colocate_with => $3)', [
        table,
        DISTRIBUTION_COLUMN,
        colocateWith,
      ]);
      if (colocateWith === 'default') colocateWith = table;
      converted.push(table);
    }
    for (const k of keys)
      await db.query(`alter table ${ident(k.table)} add constraint ${ident(k.name)} ${k.definition}`);
  }
  // Statements pushed down to a worker call the schema's SQL functions there. A function whose first
  // argument is the account (profile_write_attributes) is distributed by it: Citus runs a call of it
  // whole on the worker that holds the account's rows, as it routes a statement that names one account.
  const { rows: functions } = await db.query<{ signature: string; by_account: boolean }>(
    `select f.signature, f.by_account from (
       select p.oid::regprocedure::text as signature, coalesce(p.proargnames[1] = $1, false) as by_account,
         (select o.distribution_argument_index from pg_dist_object o where o.classid = 'pg_proc'::regclass and o.objid = p.oid) as argument,
         exists (select 1 from pg_dist_object o where o.classid = 'pg_proc'::regclass and o.objid = p.oid) as known
       from pg_proc p where p.pronamespace = 'public'::regnamespace and p.prokind = 'f'
     ) f
     -- Citus propagates a function created on a distributed database itself, without its argument.
     where not f.known or (f.by_account and f.argument is null)`,
    [DISTRIBUTION_COLUMN],
  );
  for (const f of functions) {
    if (!f.by_account) await db.query('select create_distributed_function($1::regprocedure)', [f.signature]);
    else
      await db.query('select create_distributed_function($1::regprocedure, $2, colocate_with => $3)', [
        f.signature,
        DISTRIBUTION_COLUMN,
        await colocationTable(db),
      ]);
  }
  // Citus plans a statement whose distribution key is a parameter (every table statement of such a
  // function, the account its argument) again at each execution, and keeps no plan of it; with the
  // account a constant it plans the shard's statement as PostgreSQL does. So these functions plan
  // their statements for the values of each call (docs/scaling.md "Statements of one account").
  const { rows: generic } = await db.query<{ signature: string }>(
    `select p.oid::regprocedure::text as signature from pg_proc p
     where p.pronamespace = 'public'::regnamespace and p.prokind = 'f' and p.proargnames[1] = $1
       and not coalesce('plan_cache_mode=force_custom_plan' = any(p.proconfig), false)`,
    [DISTRIBUTION_COLUMN],
  );
  for (const f of generic) await db.query(`alter function ${f.signature} set plan_cache_mode = force_custom_plan`);
  return converted;
}

/** The table whose colocation group every distributed table joins; none before the first is distributed. */
async function colocationTable(db: Pick<pg.ClientBase, 'query'>): Promise<string | undefined> {
  const { rows } = await db.query<{ name: string | null }>(
    `select min(logicalrelid::regclass::text) as name from pg_dist_partition where partmethod = 'h'`,
  );
  return rows[0].name ?? undefined;
}

/**
 * The schema version the database is at (the number of its last migration), as SQL: the by-account
 * functions' copies are made from that version's definitions, and named by it.
 */
export const SCHEMA_VERSION = `(select max(left(name, 4)) from schema_migrations)`;

/**
 * The schema, on every node of a distributed database, of the by-account functions' copies for each
 * shard group, made from the definitions of schema `version`. A node that could not be reached when
 * a later migration changed a function keeps the schema of the version before: the program, which
 * names the current one, finds no copy there and calls the distributed function.
 */
export function shardCopiesSchema(version: string): string {
  if (!/^[0-9]{4}$/.test(version)) throw new Error(`not a schema version: ${version}`);
  return `account_shards_${version}`;
}

/** The copy of by-account function `name` for the shard group of `shard` (a shard of the colocation table), of schema `version`. */
export function shardCopyName(name: string, shard: string, version: string): string {
  return `${shardCopiesSchema(version)}.${name}_${shard}`;
}

/**
 * Makes, on every node, a copy of each PL/pgSQL function whose first argument is the account for
 * each shard group of the account-colocated tables: the function's definition with every table it
 * names after from, join, into, update or using replaced by that table's shard of the group (and a
 * reference table by its shard, on every node). On a worker those are plain tables, so the copy's
 * statements take PostgreSQL's cached plans, where the distributed function's statements go through
 * Citus's planner and are deparsed, parsed and planned again for the local shard at every call
 * (docs/scaling.md "Writes on the account's shard"). The copy first takes the lock Citus's writes
 * take on the shard group's metadata, which a shard move or split holds while it copies the last
 * writes and moves the placement, then checks that the group's placement is on this node; if not
 * (or the copy is missing: a node added or a shard split since), the call fails with
 * undefined_function (invalid_schema_name on a node without copies) and the program calls the distributed function, which Citus routes. Made
 * again, whole, at every migrate, one transaction per node; a node that cannot be reached then
 * keeps the copies it had. The copies are not Citus objects (made with DDL propagation off).
 */
export async function copyFunctionsToShards(db: Pick<pg.ClientBase, 'query'>): Promise<void> {
  const table = await colocationTable(db);
  if (!table) return;
  const { rows: functions } = await db.query<{ name: string; definition: string }>(
    `select p.proname as name, pg_get_functiondef(p.oid) as definition from pg_proc p join pg_language l on l.oid = p.prolang
     where p.pronamespace = 'public'::regnamespace and p.prokind = 'f' and p.proargnames[1] = $1 and l.lanname = 'plpgsql'
     order by p.proname`,
    [DISTRIBUTION_COLUMN],
  );
  const { rows: groups } = await db.query<{ shard: string; shards: Record<string, string> }>(
    `select f.shardid::text as shard, jsonb_object_agg(s.logicalrelid::regclass::text, shard_name(s.logicalrelid, s.shardid)) as shards
     from pg_dist_shard f join pg_dist_partition c on c.logicalrelid = f.logicalrelid
       join pg_dist_partition p on p.colocationid = c.colocationid
       join pg_dist_shard s on s.logicalrelid = p.logicalrelid and s.shardminvalue = f.shardminvalue
     where f.logicalrelid = $1::regclass
     group by f.shardid order by f.shardid`,
    [table],
  );
  const { rows: reference } = await db.query<{ name: string; shard: string }>(
    `select s.logicalrelid::regclass::text as name, shard_name(s.logicalrelid, s.shardid) as shard
     from pg_dist_shard s join pg_dist_partition p on p.logicalrelid = s.logicalrelid where p.partmethod = 'n'`,
  );
  const { rows: version } = await db.query<{ version: string }>(`select ${SCHEMA_VERSION} as version`);
  const schema = shardCopiesSchema(version[0].version);
  const here = `${schema}.shard_group_here`;
  const statements = [
    'begin',
    'set local citus.enable_ddl_propagation to off',
    // The copies of every version before, too.
    `do $drop$ declare s name; begin
  for s in select nspname from pg_namespace where nspname like 'account\\_shards\\_%' loop execute format('drop schema %I cascade', s); end loop;
end $drop$`,
    `create schema ${schema}`,
    // ShareLock (5) on the group's metadata, as Citus's executor takes for a write; a move holds ExclusiveLock.
    `create function ${here}(shard bigint) returns void language plpgsql as $here$
begin
  perform lock_shard_metadata(5, array[shard]);
  if not exists (select 1 from pg_dist_placement p join pg_dist_local_group l on l.groupid = p.groupid where p.shardid = shard) then
    raise exception 'the shard group of % is not on this node', shard using errcode = 'undefined_function';
  end if;
end
$here$`,
  ];
  for (const group of groups) {
    const shards = new Map([...reference.map((r) => [r.name, r.shard] as const), ...Object.entries(group.shards)]);
    for (const f of functions)
      statements.push(
        shardCopy(f.name, f.definition, { shard: group.shard, version: version[0].version, shards }, here),
      );
  }
  statements.push('commit');
  await db.query(
    'select nodeid, success, result from run_command_on_all_nodes($1, give_warning_for_connection_errors => true)',
    [statements.join(';\n')],
  );
}

/** The definition of function `name` as its copy of schema `version` for the group of `shard`, its tables named by `shards`. */
function shardCopy(
  name: string,
  definition: string,
  group: { shard: string; version: string; shards: Map<string, string> },
  here: string,
): string {
  const { shard, version, shards } = group;
  const head = `FUNCTION public.${name}(`;
  const begin = /^begin$/im;
  if (!definition.includes(head) || !begin.test(definition))
    throw new Error(`cannot copy the function ${name} to the shards: its definition is not of the expected form`);
  return (
    definition
      .replace(head, `FUNCTION ${shardCopyName(name, shard, version)}(`)
      // The copy's plain statements keep their plans (the distributed function plans each call).
      .replace(/^ SET plan_cache_mode TO .*\n/m, '')
      .replace(begin, (b) => `${b}\n  perform ${here}(${shard});`)
      .replace(
        /\b(from|join|into|update|using)(\s+)([a-z_][a-z0-9_]*)\b/gi,
        (m, word: string, space: string, table: string) => {
          const found = shards.get(table);
          return found ? `${word}${space}${found}` : m;
        },
      )
  );
}

import { afterAll, describe, expect, it } from 'vitest';
import { testDatabase } from '../../test/app.ts';
import { queryForAccount } from './account-statements.ts';
import { copyFunctionsToShards, SCHEMA_VERSION, shardCopiesSchema, shardCopyName } from './distribute.ts';
import { createPool } from './pool.ts';

/**
 * Statements of one account (src/store/account-statements.ts) on a real database: the test
 * database (PostgreSQL, or the Citus coordinator under npm run test:citus, where it is distributed).
 */
describe('queryForAccount', () => {
  const pools: { end(): Promise<void> }[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
  });
  const open = async (max: number) => {
    const pool = createPool(await testDatabase(), max);
    pools.push(pool);
    return pool;
  };
  const statement = (values: unknown[]) => ({
    name: 'test.echo',
    text: 'select $1::bigint as account, $2::text as text, $3::int as n',
    values,
  });

  it('writes the account id into the text, numbers the other parameters from $1 and prepares it per account', async () => {
    const pool = await open(1);
    const one = await queryForAccount(pool, '7', statement(['7', 'a $1 b', 1]));
    const other = await queryForAccount(pool, '8', statement(['8', "it's", 2]));
    expect(one.rows).toEqual([{ account: '7', text: 'a $1 b', n: 1 }]);
    expect(other.rows).toEqual([{ account: '8', text: "it's", n: 2 }]);
    // The prepared statements of the connection (one, so both ran on it) on one PostgreSQL; on a
    // Citus cluster the statements ran on the accounts' workers, and the coordinator's connection has none.
    const client = await pool.connect();
    try {
      const { rows } = await client.query<{ name: string; statement: string }>(
        "select name, statement from pg_prepared_statements where name like 'test.echo@%' order by name",
      );
      const citus = (await client.query("select 1 from pg_extension where extname = 'citus'")).rowCount! > 0;
      if (!citus)
        expect(rows).toEqual([
          { name: 'test.echo@7', statement: 'select 7::bigint as account, $1::text as text, $2::int as n' },
          { name: 'test.echo@8', statement: 'select 8::bigint as account, $1::text as text, $2::int as n' },
        ]);
    } finally {
      client.release();
    }
  });

  it('refuses what is not an account id, never writing it into a statement', async () => {
    const pool = await open(1);
    for (const id of ['1; drop table accounts', '', '-1', '01', '1e3', '99999999999999999999'])
      await expect(queryForAccount(pool, id, statement([id, 'x', 1]))).rejects.toThrow('not an account id');
  });

  it('keeps 200 statements per connection, deallocating the least recently used', async () => {
    const pool = await open(1);
    for (let account = 1; account <= 210; account++)
      await queryForAccount(pool, String(account), statement([String(account), 'x', account]));
    // Account 1 was dropped: it is prepared again, and answers.
    const again = await queryForAccount(pool, '1', statement(['1', 'y', 1]));
    expect(again.rows).toEqual([{ account: '1', text: 'y', n: 1 }]);
    const client = await pool.connect();
    try {
      const citus = (await client.query("select 1 from pg_extension where extname = 'citus'")).rowCount! > 0;
      if (!citus) {
        const { rows } = await client.query<{ name: string }>(
          "select name from pg_prepared_statements where name like 'test.echo@%'",
        );
        expect(rows.length).toBe(200);
        const names = new Set(rows.map((r) => r.name));
        expect(names.has('test.echo@1')).toBe(true);
        expect(names.has('test.echo@2')).toBe(false);
        expect(names.has('test.echo@210')).toBe(true);
      }
    } finally {
      client.release();
    }
  });

  it("on a Citus cluster, runs on the node that holds the account's shard", async () => {
    const pool = await open(2);
    if ((await pool.query("select 1 from pg_extension where extname = 'citus'")).rowCount === 0) return;
    for (const account of ['1', '2', '3', '4', '5', '6']) {
      const { rows: placed } = await pool.query<{ port: number }>(
        `select n.nodeport as port from pg_dist_placement p join pg_dist_node n on n.groupid = p.groupid
         where p.shardid = get_shard_id_for_distribution_column(
           (select min(logicalrelid::regclass::text) from pg_dist_partition where partmethod = 'h'), $1::bigint)`,
        [account],
      );
      const { rows } = await queryForAccount<{ port: number }>(pool, account, {
        name: 'test.port',
        text: 'select inet_server_port() as port where $1::bigint > 0',
        values: [account],
      });
      expect(rows[0].port).toBe(placed[0].port);
    }
  });

  it("on a Citus cluster, calls the by-account function's copy for the account's shard group, and the distributed function where the node has none", async () => {
    const pool = await open(2);
    if ((await pool.query("select 1 from pg_extension where extname = 'citus'")).rowCount === 0) return;
    const account = '3';
    const { rows: group } = await pool.query<{ shard: string }>(
      `select get_shard_id_for_distribution_column(
         (select min(logicalrelid::regclass::text) from pg_dist_partition where partmethod = 'h'), $1::bigint)::text as shard`,
      [account],
    );
    const { rows: at } = await pool.query<{ version: string }>(`select ${SCHEMA_VERSION} as version`);
    const copy = shardCopyName('profile_write_attributes', group[0].shard, at[0].version);
    // current_query() answers the text the node ran; the call writes nothing (no patches).
    const call = (on: typeof pool) =>
      queryForAccount<{ text: string; n: string }>(on, account, {
        name: 'test.copy',
        calls: 'profile_write_attributes',
        text: `select current_query() as text, (select count(*) from profile_write_attributes($1::bigint, '{}', '[]', '{}', '[]', '[]')) as n`,
        values: [account],
      });
    const onCopy = await call(pool);
    expect(onCopy.rows[0].text).toContain(`${copy}(`);
    expect(onCopy.rows[0].n).toBe('0');
    // Without the copy, then without any copies (a node added since migrate), on a pool of its own:
    // the account's node is kept per pool.
    try {
      for (const drop of [`drop function ${copy}`, `drop schema ${shardCopiesSchema(at[0].version)} cascade`]) {
        await pool.query('select run_command_on_all_nodes($1)', [`set citus.enable_ddl_propagation to off; ${drop}`]);
        const distributed = await call(await open(1));
        expect(distributed.rows[0].text).not.toContain(copy);
        expect(distributed.rows[0].text).toContain('profile_write_attributes(');
        expect(distributed.rows[0].n).toBe('0');
      }
    } finally {
      await copyFunctionsToShards(pool);
    }
    const { rows: made } = await pool.query<{ success: boolean; result: string }>(
      'select success, result from run_command_on_all_nodes($1)',
      [`select to_regprocedure('${copy}(bigint, bigint[], jsonb, bigint[], jsonb, jsonb)') is not null`],
    );
    expect(made.map((m) => [m.success, m.result])).toEqual(made.map(() => [true, 't']));
  });
});

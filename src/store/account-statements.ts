import pg from 'pg';
import { SCHEMA_VERSION, shardCopyName } from './distribute.ts';
import { checkOut, ProgramPool, type Queryable } from './pool.ts';

/**
 * Statements of one account with the account's id written into their text, planned once per
 * connection and kept, and on a Citus cluster sent to the worker that holds the account
 * (docs/scaling.md "Statements of one account").
 *
 * Citus plans a statement whose distribution key is a parameter again at every execution, on the
 * worker that runs it (its cached local plan is looked up by a task that such a plan does not keep);
 * with the key a constant it keeps the plan, as PostgreSQL does. So the hot statements of a request
 * are prepared per account: `queryForAccount` takes a named statement whose `$1` is the account id,
 * writes the id into the text as a literal (a bigint, checked: never text from a client) and numbers
 * the other parameters from `$1`. Each connection keeps the statements of its last
 * STATEMENTS_PER_CONNECTION (statement, account) pairs and deallocates the one it drops. On one
 * PostgreSQL this is the same statement under another name; on Citus the coordinator knows where the
 * account's rows are, and the statement goes straight to that worker (every Citus 11+ node has the
 * metadata to run it), so the coordinator is not on the way. There, a statement that calls a
 * by-account SQL function (`calls`) calls the function's copy for the account's shard group instead
 * (distribute.ts `copyFunctionsToShards`), whose statements name the shards as plain tables; where
 * the node has no such copy, or the shard group has left it, the distributed function.
 */

/** A named statement whose `$1` is the account id. */
export interface AccountStatement {
  name: string;
  text: string;
  values: unknown[];
  /** The by-account SQL function the statement calls, whose copy for the account's shard group it calls on a cluster. */
  calls?: string;
}

/** Prepared statements kept per connection; the least recently used beyond it is deallocated. */
const STATEMENTS_PER_CONNECTION = 200;
/** How long the node of an account is kept before it is looked up again (a shard moved meanwhile still answers, through Citus, from the old node). */
const PLACEMENT_TTL_MS = 30_000;
/** Accounts whose node is kept at most; beyond it the cache starts again. */
const PLACEMENTS_KEPT = 100_000;
/** An account id: a positive bigint, the only thing written into a statement's text. */
const ACCOUNT_ID = /^[1-9][0-9]{0,18}$/;
/** PostgreSQL's longest identifier: DEALLOCATE names a statement by one. */
const NAME_BYTES = 63;
/**
 * What a call of a function's shard copy answers where the node has no copy (undefined_function;
 * invalid_schema_name on a node that has none at all), or no longer holds the shard group.
 */
const NO_COPY = new Set(['42883', '3F000']);

/** Runs `statement` for `accountId`: with the id in its text, prepared once per connection, on the account's node. */
export async function queryForAccount<R extends pg.QueryResultRow>(
  db: Queryable,
  accountId: string,
  statement: AccountStatement,
): Promise<pg.QueryResult<R>> {
  if (!ACCOUNT_ID.test(accountId)) throw new Error(`not an account id: ${accountId}`);
  const name = `${statement.name}@${accountId}`;
  if (Buffer.byteLength(name) > NAME_BYTES) throw new Error(`statement name too long: ${name}`);
  const query = {
    name,
    text: statement.text.replace(/\$([0-9]+)/g, (_, n: string) => (n === '1' ? accountId : `$${Number(n) - 1}`)),
    values: statement.values.slice(1),
  };
  if (!(db instanceof pg.Pool)) return prepared<R>(db as pg.ClientBase, query);
  const nodes = await placements(db);
  const node = (await nodes?.nodeOf(accountId)) ?? { pool: db, shard: undefined };
  const onShard = node.shard && statement.calls ? onShardCopy(query, statement.calls, node) : undefined;
  const { client, release } = await checkOut(node.pool);
  try {
    if (onShard) {
      try {
        return await prepared<R>(client, onShard);
      } catch (err) {
        if (!NO_COPY.has((err as { code?: string }).code ?? '')) throw err;
        nodes?.withoutCopy(accountId);
      }
    }
    return await prepared<R>(client, query);
  } catch (err) {
    nodes?.forget(accountId);
    throw err;
  } finally {
    release();
  }
}

/** The statement with its call of `calls` made to the function's copy for the node's shard; undefined when its name would be too long. */
function onShardCopy(query: { name: string; text: string; values: unknown[] }, calls: string, node: Node) {
  const name = `${query.name}/${node.shard}`;
  if (Buffer.byteLength(name) > NAME_BYTES) return undefined;
  const text = query.text.replace(
    new RegExp(`\\b${calls}\\(`, 'g'),
    `${shardCopyName(calls, node.shard!, node.version!)}(`,
  );
  if (text === query.text) throw new Error(`the statement ${query.name} does not call ${calls}`);
  return { ...query, name, text };
}

/** The names each connection has prepared, least recently used first. */
const preparedNames = new WeakMap<pg.ClientBase, Set<string>>();

async function prepared<R extends pg.QueryResultRow>(
  client: pg.ClientBase,
  query: { name: string; text: string; values: unknown[] },
): Promise<pg.QueryResult<R>> {
  let names = preparedNames.get(client);
  if (!names) preparedNames.set(client, (names = new Set()));
  names.delete(query.name);
  names.add(query.name);
  if (names.size > STATEMENTS_PER_CONNECTION) {
    const [oldest] = names;
    names.delete(oldest);
    // node-postgres keeps the names it prepared on the connection, and prepares a name again only when it forgot it.
    const parsed = (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection
      .parsedStatements;
    if (parsed[oldest] !== undefined) {
      delete parsed[oldest];
      await client.query(`deallocate "${oldest}"`);
    }
  }
  return client.query<R>(query);
}

/** Where each account's rows are, for the pools of a Citus coordinator: undefined on PostgreSQL. */
const placementsOfPool = new WeakMap<pg.Pool, Promise<Placements | undefined>>();

function placements(pool: pg.Pool): Promise<Placements | undefined> | undefined {
  if (!(pool instanceof ProgramPool)) return undefined;
  let found = placementsOfPool.get(pool);
  if (!found) {
    found = Placements.of(pool);
    placementsOfPool.set(pool, found);
    // A database that did not answer is asked again at the next statement.
    found.catch(() => placementsOfPool.delete(pool));
  }
  return found;
}

/**
 * The node of an account: its pool, the shard of the colocation table that holds the account (its
 * shard group), and the database's schema version (whose function copies the node is to have).
 */
interface Node {
  pool: pg.Pool;
  shard: string | undefined;
  version?: string;
}

/**
 * The worker of each account on a distributed database, and one pool per worker (as large as the
 * coordinator's, opened at its first statement and ended with the coordinator's pool).
 */
class Placements {
  readonly #coordinator: ProgramPool;
  readonly #workers = new Map<string, pg.Pool>();
  readonly #accounts = new Map<string, { node: Promise<Node>; until: number }>();
  /** Once the coordinator's pool ends, no worker pool opens again: statements go to the ended pool, which refuses them. */
  #ended = false;

  private constructor(coordinator: ProgramPool) {
    this.#coordinator = coordinator;
    coordinator.onEnd(() => this.#end());
  }

  /** Placements of a pool's database when it is a distributed Citus database (its accounts a reference table). */
  static async of(pool: ProgramPool): Promise<Placements | undefined> {
    const { rows } = await pool.query<{ distributed: boolean }>(
      `select exists (select 1 from pg_extension where extname = 'citus')
         and to_regclass('accounts') is not null as distributed`,
    );
    if (!rows[0].distributed) return undefined;
    const { rows: reference } = await pool.query(
      "select 1 from pg_dist_partition where logicalrelid = to_regclass('accounts') and partmethod = 'n'",
    );
    return reference.length > 0 ? new Placements(pool) : undefined;
  }

  /** The pool of the node holding the account's shard (the coordinator's own when it holds it), and the shard. */
  nodeOf(accountId: string): Promise<Node> {
    const now = Date.now();
    const known = this.#accounts.get(accountId);
    if (known && known.until > now) return known.node;
    if (this.#accounts.size >= PLACEMENTS_KEPT) this.#accounts.clear();
    const node = this.#lookUp(accountId);
    this.#accounts.set(accountId, { node, until: now + PLACEMENT_TTL_MS });
    node.catch(() => this.forget(accountId));
    return node;
  }

  /** Calls the distributed functions for the account until its node is looked up again: its node had no copy. */
  withoutCopy(accountId: string): void {
    const known = this.#accounts.get(accountId);
    if (known) known.node = known.node.then((n) => ({ pool: n.pool, shard: undefined }));
  }

  /** Looks the account's node up again at its next statement (its statement failed there). */
  forget(accountId: string): void {
    this.#accounts.delete(accountId);
  }

  async #lookUp(accountId: string): Promise<Node> {
    const { rows } = await this.#coordinator.query<{
      shardid: string;
      groupid: number;
      nodename: string;
      nodeport: number;
      version: string;
    }>(
      `select p.shardid, n.groupid, n.nodename, n.nodeport, ${SCHEMA_VERSION} as version from pg_dist_placement p join pg_dist_node n on n.groupid = p.groupid
       where n.noderole = 'primary' and n.isactive and p.shardid = get_shard_id_for_distribution_column(
         (select min(logicalrelid::regclass::text) from pg_dist_partition where partmethod = 'h'), $1::bigint)`,
      [accountId],
    );
    const node = rows[0];
    if (!node || this.#ended) return { pool: this.#coordinator, shard: undefined };
    if (node.groupid === 0) return { pool: this.#coordinator, shard: node.shardid, version: node.version };
    const key = `${node.nodename}:${node.nodeport}`;
    let pool = this.#workers.get(key);
    if (!pool) {
      // The coordinator's connection string with the worker's host and port: the same database,
      // user and options (Citus reaches a node's shards in the database of the same name).
      const url = new URL(this.#coordinator.options.connectionString!);
      url.hostname = node.nodename;
      url.port = String(node.nodeport);
      pool = new pg.Pool({ connectionString: url.toString(), max: this.#coordinator.options.max });
      pool.on('error', () => {});
      this.#workers.set(key, pool);
    }
    return { pool, shard: node.shardid, version: node.version };
  }

  async #end(): Promise<void> {
    this.#ended = true;
    const pools = [...this.#workers.values()];
    this.#workers.clear();
    await Promise.all(pools.map((p) => p.end()));
  }
}

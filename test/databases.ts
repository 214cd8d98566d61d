import pg from 'pg';
import { withDatabase } from '../src/store/embedded.ts';

/**
 * Databases of the test run on the server of DATABASE_URL: one PostgreSQL, or the coordinator of a
 * Citus cluster. On a cluster a database exists on every node under one name (Citus reaches a
 * node's shards in the database of the same name), so each is created on every node, and cloning
 * the migrated template on every node clones the distributed schema with its shards.
 */

/** The URLs of the cluster's worker nodes when `server` is a Citus coordinator, else none. */
export async function workerNodes(server: string): Promise<string[]> {
  return withClient(server, async (db) => {
    const { rows: citus } = await db.query("select 1 from pg_extension where extname = 'citus'");
    if (citus.length === 0) return [];
    const { rows } = await db.query<{ host: string; port: number }>(
      "select nodename as host, nodeport as port from pg_dist_node where groupid <> 0 and noderole = 'primary' and isactive order by nodeid",
    );
    return rows.map((r) => nodeUrl(server, r.host, r.port));
  });
}

/**
 * Creates database `name` (from `template`, or empty) on the server and on each worker node. A new
 * empty database of a cluster gets the citus extension on every node and knows its nodes.
 */
export async function createDatabase(server: string, name: string, template?: string): Promise<string> {
  const workers = await workerNodes(server);
  for (const node of [server, ...workers]) {
    await withClient(node, async (db) => {
      for (let attempt = 0; ; attempt++) {
        try {
          await db.query(`create database ${name}${template ? ` template ${template}` : ''}`);
          break;
        } catch (err) {
          // Two files cloning at once: "source database is being accessed by other users".
          if (attempt > 20) throw err;
          await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
        }
      }
    });
  }
  if (workers.length > 0 && !template) {
    for (const node of [server, ...workers])
      await withClient(withDatabase(node, name), (db) => db.query('create extension citus'));
    const coordinator = new URL(server);
    await withClient(withDatabase(server, name), async (db) => {
      await db.query('select citus_set_coordinator_host($1, $2)', [
        coordinator.hostname,
        Number(coordinator.port || 5432),
      ]);
      for (const node of workers) {
        const u = new URL(node);
        await db.query('select citus_add_node($1, $2)', [u.hostname, Number(u.port || 5432)]);
      }
    });
  }
  return withDatabase(server, name);
}

/** Drops database `name` on the server and each worker node. */
export async function dropDatabase(server: string, name: string): Promise<void> {
  for (const node of [server, ...(await workerNodes(server))]) {
    // On a Citus node the maintenance daemon can connect again between the force's terminations
    // and the drop ("is being accessed by other users", 55006): tried again, a few times.
    for (let attempt = 1; ; attempt++) {
      try {
        await withClient(node, (db) => db.query(`drop database if exists ${name} with (force)`));
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006' || attempt === 5) throw err;
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  }
}

/**
 * Makes `name` a template that can be cloned on every node: no connections to it are allowed and
 * those open are ended (on a cluster, Citus's maintenance daemons hold some).
 */
export async function freezeTemplate(server: string, name: string): Promise<void> {
  for (const node of [server, ...(await workerNodes(server))]) {
    await withClient(node, async (db) => {
      await db.query(`alter database ${name} allow_connections false`);
      await db.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [name],
      );
    });
  }
}

function nodeUrl(server: string, host: string, port: number): string {
  const u = new URL(server);
  u.hostname = host;
  u.port = String(port);
  return u.toString();
}

/** A client on `url` for the length of `work`. */
export async function withClient<T>(url: string, work: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    return await work(db);
  } finally {
    await db.end();
  }
}

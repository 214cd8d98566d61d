import pg from 'pg';

/** A pool or a client inside a transaction: what every query function takes. */
export type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Opens the connection pool of the program. */
export function createPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  return pool;
}

/** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
export async function withTransaction<T>(pool: pg.Pool, work: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // pg-pool listens for errors only on idle clients. Without a listener here, a backend that ends
  // while this client is checked out (PostgreSQL stopping, pg_terminate_backend, a dropped
  // connection) emits an unhandled 'error' event, which crashes the process; with it, the
  // transaction's next query fails instead and the broken client is discarded, not reused.
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

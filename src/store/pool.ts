import pg from 'pg';

/** A pool or a client inside a transaction: what every query function takes. */
export type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/**
 * A pool of the program: pg's, with what must end with it (the pools of a Citus cluster's workers
 * that src/store/account-statements.ts opens beside it).
 */
export class ProgramPool extends pg.Pool {
  readonly #ending: (() => Promise<void>)[] = [];

  /** Runs `end` when the pool ends, before its own connections close. */
  onEnd(end: () => Promise<void>): void {
    this.#ending.push(end);
  }

  override end(): Promise<void>;
  override end(callback: () => void): void;
  override end(callback?: () => void): Promise<void> | void {
    const ended = Promise.all(this.#ending.splice(0).map((end) => end())).then(() => super.end());
    if (!callback) return ended;
    void ended.then(callback, callback);
  }
}

/** Opens the connection pool of the program. */
export function createPool(connectionString: string, max = 10): pg.Pool {
  const pool = new ProgramPool({ connectionString, max });
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  return pool;
}

/** A client checked out of a pool (`checkOut`). */
export interface CheckedOut {
  client: pg.PoolClient;
  /**
   * Gives the client back: discarded when its connection broke while it was out, or when told
   * (an error: a connection left in the middle of a COPY), reused otherwise.
   */
  release(discard?: Error | boolean): void;
}

/**
 * Checks a client out of `pool`, listening for its errors until it is released: every checkout of
 * the program goes through here. pg-pool listens for errors only on idle clients. Without a
 * listener, a backend that ends while a client is checked out (PostgreSQL stopping: 57P01,
 * pg_terminate_backend, a dropped connection) emits an unhandled 'error' event, which crashes the
 * process; with it, the client's next query fails instead and the broken client is discarded.
 */
export async function checkOut(pool: pg.Pool): Promise<CheckedOut> {
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken ??= err;
  };
  // Listening from within pg-pool's callback, not after a promise's turn: the read that made the
  // client ready can hold its end too (a dying server's FATAL), parsed before any promise settles.
  const client = await new Promise<pg.PoolClient>((resolve, reject) =>
    pool.connect((err, connected) => {
      if (err || !connected) return reject(err ?? new Error('no client'));
      connected.on('error', onError);
      resolve(connected);
    }),
  );
  return {
    client,
    release: (discard) => {
      client.removeListener('error', onError);
      client.release(discard || broken);
    },
  };
}

/**
 * Runs `work` in one transaction: committed when it resolves, rolled back when it throws. `begin`
 * opens it (another isolation level, read only).
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  work: (tx: pg.PoolClient) => Promise<T>,
  begin = 'begin',
): Promise<T> {
  const { client, release } = await checkOut(pool);
  try {
    await client.query(begin);
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    release();
  }
}

/** Tries of a statement that a concurrent writer made fail with serialization_failure. */
const RACED_TRIES = 5;

/** Whether an error is PostgreSQL's serialization_failure (SQLSTATE 40001), which a client meets by trying again. */
export function isSerializationFailure(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '40001';
}

/**
 * Runs a statement on a pool (each try its own transaction) again when it fails with
 * serialization_failure, up to 5 tries in all: a write that found its rows changed meanwhile
 * (migration 0019) reads them afresh on its next try.
 */
export async function retryRaced<T>(run: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await run();
    } catch (err) {
      if (tries >= RACED_TRIES || !isSerializationFailure(err)) throw err;
    }
  }
}

/**
 * retryRaced for a statement inside a transaction: behind a savepoint, which a failed try rolls
 * back to, since the failure would otherwise abort the whole transaction.
 */
export async function retryRacedInTransaction<T>(tx: Queryable, run: () => Promise<T>): Promise<T> {
  await tx.query('savepoint raced_write');
  const result = await retryRaced(async () => {
    try {
      return await run();
    } catch (err) {
      if (isSerializationFailure(err)) await tx.query('rollback to savepoint raced_write');
      throw err;
    }
  });
  await tx.query('release savepoint raced_write');
  return result;
}

/** Error codes of a database that does not answer: the socket's, and PostgreSQL's shutting down or starting up. */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '57P01', '57P02', '57P03']);

/**
 * Whether an error says that the database went away or is not back yet (a restart, a failover, a
 * network cut) rather than that a statement failed: the socket's errors, SQLSTATE class 08
 * (connection exception), admin_shutdown, crash_shutdown and cannot_connect_now. node-postgres
 * gives a connection that the server closed no code, only its message ("Connection terminated
 * unexpectedly", and for the next query of a transaction on it, withTransaction's, "Client has
 * encountered a connection error"), and Node an AggregateError when every address of a host refused.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
  if (
    err.message.startsWith('Connection terminated') ||
    err.message.startsWith('Client has encountered a connection error')
  )
    return true;
  return err instanceof AggregateError && err.errors.some(isDatabaseUnavailable);
}

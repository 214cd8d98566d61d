import type { Queryable } from './pool.ts';

/**
 * Calls made in the same turn of the event loop, gathered into one: `run` gets, per key, every
 * item asked for since the turn began and answers one result per item, in order. Requests that
 * arrive together (the HTTP parser hands the server every request a poll of the sockets found)
 * then share one statement and one round trip to PostgreSQL instead of one each: a point read
 * costs PostgreSQL a wake-up, a protocol exchange and an executor start-up whatever its size
 * (docs/benchmarks.md "Profiles").
 */
export function coalesce<K, T, R>(
  run: (key: K, items: T[]) => Promise<(R | PromiseLike<R>)[]>,
  maxItems = 64,
): (key: K, item: T) => Promise<R> {
  type Waiting = { item: T; resolve: (result: R | PromiseLike<R>) => void; reject: (err: unknown) => void };
  let pending: Map<K, Waiting[]> | undefined;
  const flush = () => {
    const batches = pending!;
    pending = undefined;
    for (const [key, waiting] of batches) {
      for (let from = 0; from < waiting.length; from += maxItems) {
        const part = waiting.slice(from, from + maxItems);
        run(
          key,
          part.map((w) => w.item),
        ).then(
          (results) => part.forEach((w, i) => w.resolve(results[i])),
          (err: unknown) => part.forEach((w) => w.reject(err)),
        );
      }
    }
  };
  return (key, item) =>
    new Promise<R>((resolve, reject) => {
      if (!pending) {
        pending = new Map();
        // After the poll phase: every request read in this turn has asked by then.
        setImmediate(flush);
      }
      const waiting = pending.get(key);
      if (waiting) waiting.push({ item, resolve, reject });
      else pending.set(key, [{ item, resolve, reject }]);
    });
}

/**
 * coalesce for statements: one gathering per pool (or client), so that only calls on the same
 * connections share a statement; `run` gets the pool with the key and the items.
 */
export function coalescePerPool<K, T, R>(
  run: (db: Queryable, key: K, items: T[]) => Promise<(R | PromiseLike<R>)[]>,
): (db: Queryable, key: K, item: T) => Promise<R> {
  const byPool = new WeakMap<Queryable, (key: K, item: T) => Promise<R>>();
  return (db, key, item) => {
    let call = byPool.get(db);
    if (!call) {
      call = coalesce((k: K, items: T[]) => run(db, k, items));
      byPool.set(db, call);
    }
    return call(key, item);
  };
}

/**
 * A shared write (for coalescePerPool) that, when a statement of several items fails, writes them
 * again one at a time, so that one item's failure (or a deadlock with another transaction) is
 * that item's alone.
 */
export function aloneOnFailure<K, T, R>(
  run: (db: Queryable, key: K, items: T[]) => Promise<R[]>,
): (db: Queryable, key: K, items: T[]) => Promise<(R | Promise<R>)[]> {
  return async (db, key, items) => {
    if (items.length === 1) return run(db, key, items);
    try {
      return await run(db, key, items);
    } catch {
      return items.map(async (item) => (await run(db, key, [item]))[0]);
    }
  };
}

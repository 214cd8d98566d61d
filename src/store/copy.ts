import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';

/** An array as PostgreSQL's array input: every element quoted, NULL for null. */
function arrayText(values: unknown[]): string {
  return `{${values.map((v) => (v === null || v === undefined ? 'NULL' : Array.isArray(v) ? arrayText(v) : `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`)).join(',')}}`;
}

/** A parameter's value as an SQL literal (its cast stays beside its placeholder). */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return pg.escapeLiteral(arrayText(value));
  if (value instanceof Date) return pg.escapeLiteral(value.toISOString());
  if (typeof value === 'object') return pg.escapeLiteral(JSON.stringify(value));
  return pg.escapeLiteral(String(value));
}

/**
 * A statement with its parameters written in, as COPY takes none. Placeholders are `$n::type`
 * (SqlValues writes them so), and only those are replaced.
 */
export function inlineValues(statement: { text: string; values: unknown[] }): string {
  return statement.text.replace(/\$(\d+)::/g, (whole, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= statement.values.length) throw new Error(`no value for placeholder $${n}`);
    return `${literal(statement.values[i])}::`;
  });
}

/**
 * The rows of a statement as CSV text (RFC 4180 quoting, an empty cell for null, `\n` after each
 * row; no header), written by PostgreSQL's COPY and streamed as it comes: a result of any size
 * passes through memory a chunk at a time, and no value is parsed or formatted in this process.
 * The statement runs in a read-only snapshot of its own connection (REPEATABLE READ). Destroying
 * the stream early, or a failure, discards the connection.
 */
export function copyCsvRows(pool: pg.Pool, statement: { text: string; values: unknown[] }): Readable {
  const out = new PassThrough();
  void (async () => {
    let client: pg.PoolClient | undefined;
    let failure: Error | undefined;
    try {
      const text = `copy (${inlineValues(statement)}) to stdout (format csv)`;
      client = await pool.connect();
      // A checked-out client whose backend ends emits 'error' (pg-pool listens on idle ones only):
      // heard, the COPY fails and the client is discarded instead of crashing the process.
      client.on('error', (err) => (failure ??= err));
      await client.query('begin isolation level repeatable read read only');
      await pipeline(client.query(copyTo(text)), out);
      await client.query('commit');
    } catch (err) {
      failure = err as Error;
      out.destroy(failure);
    } finally {
      // A connection left in the middle of a COPY cannot be used again.
      client?.release(failure);
    }
  })();
  return out;
}

import type pg from 'pg';
import { checkOut } from './pool.ts';

/**
 * The rows of a statement as arrays of cells, fetched through a cursor `batch` rows at a time,
 * so that a result of any size passes through memory a batch at a time. The statement runs in a
 * read-only snapshot of its own connection (REPEATABLE READ): every row comes from one moment
 * however long the reader takes. Stopping the iteration early closes the cursor. With `whole`, the
 * statement is planned for reading all of it.
 */
export async function* cursorRows(
  pool: pg.Pool,
  statement: { text: string; values: unknown[] },
  batch = 1000,
  options: { whole?: boolean } = {},
): AsyncGenerator<unknown[]> {
  const { client, release } = await checkOut(pool);
  let done = false;
  try {
    await client.query('begin isolation level repeatable read read only');
    // `whole`: the reader reads every row, so the statement is planned for its last row rather
    // than its first tenth (a cursor's default: nested loops of index probes per row, where hash
    // joins and a sort cost the email event export a third less), with room for that sort.
    if (options.whole) await client.query(`set local cursor_tuple_fraction = 1; set local work_mem = '64MB'`);
    for await (const rows of cursorBatches(client, statement, batch)) yield* rows;
    await client.query('commit');
    done = true;
  } finally {
    // After an error or an early return too, the transaction ends and the connection goes back clean.
    if (!done) await client.query('rollback').catch(() => {});
    release();
  }
}

/**
 * The rows of a statement as arrays of cells, `batch` at a time, through a cursor in the caller's
 * transaction (so in its snapshot): a result of any size passes through memory a batch at a time.
 * Stopping early leaves the cursor open until the transaction ends.
 */
export async function* cursorBatches(
  client: pg.PoolClient,
  statement: { text: string; values: unknown[] },
  batch: number,
): AsyncGenerator<unknown[][]> {
  const name = `rows_${++cursors}`;
  await client.query({ text: `declare ${name} no scroll cursor for ${statement.text}`, values: statement.values });
  for (;;) {
    const { rows } = await client.query<unknown[]>({ text: `fetch ${batch} from ${name}`, rowMode: 'array' });
    if (rows.length > 0) yield rows;
    if (rows.length < batch) break;
  }
  await client.query(`close ${name}`);
}
let cursors = 0;

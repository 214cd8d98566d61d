import net from 'node:net';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { testDatabase } from '../../test/app.ts';
import { checkOut, createPool, isDatabaseUnavailable } from './pool.ts';

describe('checkOut', () => {
  it('hears the error of a checked-out client whose backend ends (57P01), and discards the client', async () => {
    const pool = createPool(await testDatabase(), 2);
    const out = await checkOut(pool);
    let released = false;
    try {
      const pid = (await out.client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      // (Not events.once, which would take the 'error' event for its own.)
      const ended = new Promise((resolve) => out.client.once('end', resolve));
      // The backend ends while the client is out and idle: its 'error' event comes with no query to
      // fail, and without a listener it would crash the process (the test run reports it).
      await pool.query('select pg_terminate_backend($1)', [pid]);
      await ended;
      await expect(out.client.query('select 1')).rejects.toThrow();
      out.release();
      released = true;
      expect(pool.totalCount).toBe(1);
      expect((await pool.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      if (!released) out.release(true);
      await pool.end();
    }
  });

  it('hears a backend that ends in the same packet as it becomes ready, and discards the client', async () => {
    // What a busy client reads when the postmaster dies (kill -9) as a connection starts: the new
    // backend's ready message and its FATAL 57P01 ("unexpected postmaster exit") in one read. A
    // listener attached after a promise's turn comes too late: the 'error' event has no listener.
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.once('data', () => socket.end(Buffer.concat([authenticationOk, readyForQuery, adminShutdown])));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const pool = createPool(`postgres://someone@127.0.0.1:${port}/db`, 1);
    try {
      const out = await checkOut(pool);
      await expect(out.client.query('select 1')).rejects.toThrow();
      out.release();
      expect(pool.totalCount).toBe(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      await pool.end();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** A message of PostgreSQL's protocol: its type, its length, its body. */
function message(type: string, body: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length + 4);
  return Buffer.concat([Buffer.from(type), length, body]);
}

const authenticationOk = message('R', Buffer.alloc(4));
const readyForQuery = message('Z', Buffer.from('I'));
const adminShutdown = message(
  'E',
  Buffer.from(
    ['SFATAL', 'VFATAL', 'C57P01', 'Mterminating connection due to unexpected postmaster exit']
      .map((field) => `${field}\0`)
      .join('') + '\0',
  ),
);

/** Which errors of a real PostgreSQL count as the database gone (a 503 to retry, src/http/problems.ts), and which not. */
describe('isDatabaseUnavailable', () => {
  const failure = async (work: (client: pg.Client, other: pg.Client) => Promise<unknown>): Promise<unknown> => {
    const url = await testDatabase();
    const client = new pg.Client({ connectionString: url });
    const other = new pg.Client({ connectionString: url });
    client.on('error', () => {});
    await client.connect();
    await other.connect();
    try {
      await work(client, other);
      throw new Error('no failure');
    } catch (err) {
      return err;
    } finally {
      await client.end().catch(() => {});
      await other.end();
    }
  };

  it('counts a backend ended by the server (57P01 admin_shutdown, as in a restart) and a refused connection', async () => {
    const terminated = await failure(async (client, other) => {
      const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      // Settled at once, so that its failure is not unhandled while the test waits.
      const sleeping = client.query('select pg_sleep(30)').then(
        () => undefined,
        (err: unknown) => err,
      );
      // Once the statement runs, the server ends its backend.
      while (
        (await other.query(`select 1 from pg_stat_activity where pid = $1 and state = 'active'`, [pid])).rowCount === 0
      );
      await other.query('select pg_terminate_backend($1)', [pid]);
      throw await sleeping;
    });
    expect((terminated as { code?: string }).code).toBe('57P01');
    expect(isDatabaseUnavailable(terminated)).toBe(true);

    const closed = new pg.Client({ host: '127.0.0.1', port: 1, user: 'postgres' });
    const refused = await closed.connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isDatabaseUnavailable(refused)).toBe(true);
  });

  it('does not count a failed statement or an error of the program', async () => {
    expect(isDatabaseUnavailable(await failure((client) => client.query('select * from no_such_table')))).toBe(false);
    expect(isDatabaseUnavailable(await failure((client) => client.query('select 1/0')))).toBe(false);
    expect(isDatabaseUnavailable(new Error('Cannot use a pool after calling end on the pool'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });
});

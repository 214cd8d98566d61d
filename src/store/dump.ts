import crypto from 'node:crypto';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { ident, tablesOf } from './catalogue.ts';
import { migrate, migrateTo, migrationNames } from './migrate.ts';
import { checkOut, type CheckedOut } from './pool.ts';

/**
 * `audience dump` and `audience restore` (docs/operating.md "Backup and restore"): a copy of the
 * database that any supported PostgreSQL takes, written and read through the program's own
 * connection, so that no client of the server's release is needed.
 *
 * The file is gzip over a sequence of records, each a kind byte, its payload's length (4 bytes, big
 * endian) and the payload:
 *
 *   H  the header, JSON: the format, the program's and PostgreSQL's versions, the migrations
 *      applied (the schema version), the tables in load order with their columns, the sequences
 *   T  a table's rows begin (JSON: its name); D  rows, in COPY's text format; E  they end (JSON: how many)
 *   Z  the end (JSON: the SHA-256 of every byte before this record)
 *
 * A format of its own because each table's size is known only once its COPY has ended (tar wants
 * it first), and pg_dump's formats are written by its own client only. COPY's text format is what
 * pg_dump uses too: each type's text form, which every release reads (binary COPY is not
 * guaranteed across major releases); columns go by name, so their order in the tables may differ.
 */

const FORMAT = 'audience-dump';
const FORMAT_VERSION = 1;

/** What the header of a dump records. */
export interface DumpHeader {
  format: string;
  format_version: number;
  program: string;
  postgres: string;
  created_at: string;
  /** The migrations applied to the database dumped, in order: its schema version is the last. */
  schema: string[];
  tables: { name: string; columns: string[] }[];
  /** Each sequence's last value (null: none handed out yet). */
  sequences: { name: string; last_value: string | null }[];
}

/** Where a dump or restore is: the table being copied, its rows so far, and the file's bytes so far. */
export interface Progress {
  table: string;
  rows: number;
  bytes: number;
}

export interface DumpSummary {
  schema: string;
  tables: Record<string, number>;
  bytes: number;
}

/** The longest header or other JSON record a restore reads: a longer one is a damaged length. */
const MAX_JSON_RECORD = 64 * 1024 * 1024;

/** Tables the dump leaves out: the migrations applied are its header's schema, made again by the restore. */
const NOT_DUMPED = ['schema_migrations'];

/** The rows COPY's text format holds in `chunk`: one a line, a newline inside a value being written `\n`. */
function linesIn(chunk: Buffer): number {
  let n = 0;
  for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) n++;
  return n;
}

function recordHead(kind: string, length: number): Buffer {
  const head = Buffer.alloc(5);
  head.write(kind, 0, 'latin1');
  head.writeUInt32BE(length, 1);
  return head;
}

function jsonRecord(kind: string, value: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(value));
  return Buffer.concat([recordHead(kind, payload.length), payload]);
}

/**
 * Writes a dump of the database to `out`: every table of the schema in one snapshot (a read-only
 * REPEATABLE READ transaction), each by one COPY, streamed through gzip a chunk at a time, so that
 * memory stays the same whatever the size. Rows written meanwhile are not in it, and nothing waits
 * for the dump. `progress` is called after every chunk.
 */
export async function dump(
  pool: pg.Pool,
  out: Writable,
  options: { program: string; progress?: (p: Progress) => void },
): Promise<DumpSummary> {
  const { client, release } = await checkOut(pool);
  let failure: Error | undefined;
  try {
    await client.query('begin isolation level repeatable read read only');
    // The first statement takes the snapshot; the sequences, read after it, are at least where its rows' ids are.
    const {
      rows: [{ migrated }],
    } = await client.query<{ migrated: boolean }>("select to_regclass('schema_migrations') is not null as migrated");
    const schema = migrated
      ? (await client.query<{ name: string }>('select name from schema_migrations order by name')).rows.map(
          (m) => m.name,
        )
      : [];
    if (schema.length === 0)
      throw new Error('the database has no schema of this program (no migration applied): nothing to dump');
    const tables = await tablesOf(client, NOT_DUMPED);
    const { rows: sequences } = await client.query<{ name: string; last_value: string | null }>(
      `select sequencename::text as name, pg_sequence_last_value(format('%I.%I', schemaname, sequencename)::regclass)::text as last_value
       from pg_sequences where schemaname = current_schema() order by 1`,
    );
    const header: DumpHeader = {
      format: FORMAT,
      format_version: FORMAT_VERSION,
      program: options.program,
      postgres: (await client.query<{ server_version: string }>('show server_version')).rows[0].server_version,
      created_at: new Date().toISOString(),
      schema,
      tables: tables.map((t) => ({ name: t.name, columns: t.columns })),
      sequences,
    };
    const counts: Record<string, number> = {};
    let bytes = 0;
    const progress: Progress = { table: '', rows: 0, bytes: 0 };
    async function* records(): AsyncGenerator<Buffer> {
      const hash = crypto.createHash('sha256');
      const hashed = (b: Buffer) => (hash.update(b), b);
      yield hashed(jsonRecord('H', header));
      for (const t of tables) {
        Object.assign(progress, { table: t.name, rows: 0 });
        yield hashed(jsonRecord('T', { name: t.name }));
        const copy = client.query(copyTo(`copy ${ident(t.name)} (${t.columns.map(ident).join(', ')}) to stdout`));
        for await (const chunk of copy as AsyncIterable<Buffer>) {
          yield hashed(recordHead('D', chunk.length));
          yield hashed(chunk);
          progress.rows += linesIn(chunk);
          options.progress?.(progress);
        }
        counts[t.name] = copy.rowCount;
        yield hashed(jsonRecord('E', { rows: copy.rowCount }));
      }
      yield jsonRecord('Z', { sha256: hash.digest('hex') });
    }
    async function* counted(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
      for await (const chunk of source) {
        bytes += chunk.length;
        progress.bytes = bytes;
        yield chunk;
      }
    }
    await pipeline(records, zlib.createGzip(), counted, out);
    await client.query('commit');
    return { schema: schema.at(-1)!, tables: counts, bytes };
  } catch (err) {
    failure = err as Error;
    throw err;
  } finally {
    // A connection left in the middle of a COPY cannot be used again.
    release(failure);
  }
}

type DumpRecord = { kind: 'H' | 'T' | 'E'; value: any } | { kind: 'D'; data: Buffer };

/**
 * The records of a dump as they come: JSON ones whole, rows in the pieces they arrive in. Throws
 * when the bytes are not gzip, are cut short, or do not hash to the end record's SHA-256, and ends
 * only after that record matched.
 */
async function* recordsOf(inflated: AsyncIterable<Buffer>): AsyncGenerator<DumpRecord> {
  const hash = crypto.createHash('sha256');
  let pending: Buffer = Buffer.alloc(0);
  let kind = '';
  let left = -1; // bytes of the current record's payload still to come; -1: a record head comes next
  let ended = false;
  for await (const chunk of inflated) {
    if (ended) throw new Error('it has bytes after its end record');
    pending = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
    for (;;) {
      if (left === -1) {
        if (pending.length < 5) break;
        kind = pending.toString('latin1', 0, 1);
        left = pending.readUInt32BE(1);
        if (!'HTDEZ'.includes(kind) || (kind !== 'D' && left > MAX_JSON_RECORD))
          throw new Error('it is damaged: a record is not one a dump has');
        if (kind !== 'Z') hash.update(pending.subarray(0, 5));
        pending = pending.subarray(5);
      }
      if (kind === 'D') {
        // Rows go on in the pieces they come in: a record is never held whole.
        const piece = pending.subarray(0, left);
        if (piece.length > 0) {
          hash.update(piece);
          left -= piece.length;
          pending = pending.subarray(piece.length);
          yield { kind: 'D', data: piece };
        }
        if (left > 0) break;
        left = -1;
        continue;
      }
      if (pending.length < left) break;
      const payload = pending.subarray(0, left);
      pending = pending.subarray(left);
      left = -1;
      if (kind === 'Z') {
        const expected = (jsonOf(payload) as { sha256?: string }).sha256;
        if (expected !== hash.digest('hex')) throw new Error('its checksum (SHA-256) does not match its content');
        ended = true;
        if (pending.length > 0) throw new Error('it has bytes after its end record');
        break;
      }
      hash.update(payload);
      yield { kind, value: jsonOf(payload) } as DumpRecord;
    }
  }
  if (!ended) throw new Error('it ends before its end record: the file is truncated');
}

/** A JSON record's value; a damaged one is not JSON. */
function jsonOf(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    throw new Error('it is damaged: a record is not JSON');
  }
}

/** The header's schema checked against the migrations this program knows; answers the file's last. */
async function schemaOf(header: DumpHeader): Promise<string> {
  const known = await migrationNames();
  const unknown = header.schema.find((m) => !known.includes(m));
  if (unknown)
    throw new Error(
      `its schema is newer than this program's: migration ${unknown} is not one this program knows (the file was written by audience ${header.program}; restore it with that version or a later one)`,
    );
  if (header.schema.some((m, i) => known[i] !== m))
    throw new Error(`its migrations (${header.schema.join(', ')}) are not this program's first ones in order`);
  return header.schema.at(-1)!;
}

export interface RestoreSummary {
  from: { program: string; postgres: string; created_at: string };
  schema: string;
  tables: Record<string, number>;
  migrated: string[];
}

/**
 * Loads a dump into a database without tables (refused otherwise), in one transaction committed
 * only when the file's end record has matched its checksum: a damaged or truncated file, one of a
 * schema newer than the program's, or a database not empty writes nothing. The schema is made as
 * it was at the file's last migration, each table filled by COPY, the sequences set; then, once
 * committed, `migrate` applies the later migrations (and distributes the schema on Citus).
 */
export async function restore(
  pool: pg.Pool,
  input: Readable,
  options: { progress?: (p: Progress) => void } = {},
): Promise<RestoreSummary> {
  const inflated = zlib.createGunzip();
  input.on('error', (err) => inflated.destroy(err));
  input.pipe(inflated);
  let bytes = 0;
  input.on('data', (chunk: Buffer) => (bytes += chunk.length));
  const records = recordsOf(inflated);
  const next = () =>
    records.next().catch((err: Error & { code?: string }) => {
      throw new FileError(damaged(err));
    });
  let checkedOut: CheckedOut | undefined;
  let failure: Error | undefined;
  const counts: Record<string, number> = {};
  let header: DumpHeader | undefined;
  let last: string;
  let copy: ReturnType<typeof copyFrom> | undefined;
  try {
    const first = await next();
    header = !first.done && first.value.kind === 'H' ? (first.value.value as DumpHeader) : undefined;
    if (header?.format !== FORMAT) throw new Error('it is not a dump of audience (no audience-dump header)');
    if (header.format_version > FORMAT_VERSION)
      throw new Error(
        `it is of format ${header.format_version}, written by a newer program (audience ${header.program})`,
      );
    last = await schemaOf(header);
    checkedOut = await checkOut(pool);
    const { client } = checkedOut;
    await client.query('begin');
    await migrateTo(client, last);
    await checkTables(client, header, last);
    const rebuild = await dropIndexes(client);
    const progress: Progress = { table: '', rows: 0, bytes: 0 };
    for (;;) {
      const read = await next();
      if (read.done) break;
      const record = read.value;
      if (record.kind === 'T') {
        const table = header.tables.find((t) => t.name === record.value.name);
        if (!table || copy) throw new FileError(`it is damaged: rows of table ${record.value.name} out of place`);
        Object.assign(progress, { table: table.name, rows: 0 });
        copy = client.query(copyFrom(`copy ${ident(table.name)} (${table.columns.map(ident).join(', ')}) from stdin`));
      } else if (record.kind === 'D') {
        if (!copy) throw new FileError('it is damaged: rows outside a table');
        if (!copy.write(record.data)) await once(copy, 'drain');
        progress.rows += linesIn(record.data);
        progress.bytes = bytes;
        options.progress?.(progress);
      } else if (record.kind === 'E') {
        if (!copy) throw new FileError('it is damaged: the end of a table that did not begin');
        copy.end();
        await finished(copy).catch((err: Error) => {
          throw new Error(`table ${progress.table}: ${err.message}`);
        });
        if (copy.rowCount !== record.value.rows)
          throw new Error(
            `table ${progress.table} took ${copy.rowCount} rows where the file says ${record.value.rows}`,
          );
        counts[progress.table] = copy.rowCount;
        copy = undefined;
      }
    }
    await rebuild();
    for (const s of header.sequences) {
      if (s.last_value === null) await client.query(`alter sequence ${ident(s.name)} restart`);
      else await client.query('select setval($1::regclass, $2::bigint, true)', [ident(s.name), s.last_value]);
    }
    await client.query('commit');
  } catch (err) {
    failure = err as Error;
    // A COPY under way fails too when its connection is dropped below: `failure` is the reason.
    copy?.on('error', () => {});
    // The database refusing a row may be the first sign of a damaged file: read on, and say so when it is.
    if (checkedOut && !(failure instanceof FileError))
      failure = await (async () => {
        while (!(await next()).done);
      })().then(
        () => failure,
        (err: Error) => err,
      );
    input.destroy();
    throw new Error(`nothing was restored: ${failure!.message}`);
  } finally {
    // A connection left in the middle of a COPY cannot be used again; dropping it rolls back.
    checkedOut?.release(failure);
  }
  return {
    from: { program: header.program, postgres: header.postgres, created_at: header.created_at },
    schema: last,
    tables: counts,
    migrated: await migrate(pool),
  };
}

/**
 * Drops the indexes and constraints of the schema's tables (in the caller's transaction) and
 * answers the work that makes them again, as they were, once the rows are in: an index is then
 * built once, sorted, and a foreign key checked by one query, instead of both row by row during
 * COPY (the way pg_restore loads); it nearly halved PostgreSQL's CPU time of a restore (docs/benchmarks.md).
 */
async function dropIndexes(client: pg.ClientBase): Promise<() => Promise<void>> {
  const { rows: constraints } = await client.query<{ table: string; name: string; definition: string; type: string }>(
    `select c.relname as table, k.conname as name, pg_get_constraintdef(k.oid) as definition, k.contype as type
     from pg_constraint k join pg_class c on c.oid = k.conrelid
     where c.relnamespace = current_schema()::regnamespace and k.contype in ('p', 'u', 'x', 'f')
     order by k.contype = 'f' desc, c.relname, k.conname`,
  );
  // Indexes of their own, not those that constraints own (made again with them).
  const { rows: indexes } = await client.query<{ name: string; definition: string }>(
    `select i.relname as name, pg_get_indexdef(i.oid) as definition
     from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class c on c.oid = x.indrelid
     where c.relnamespace = current_schema()::regnamespace and c.relname <> 'schema_migrations'
       and not exists (select 1 from pg_constraint k where k.conindid = x.indexrelid and k.contype in ('p', 'u', 'x'))`,
  );
  const kept = constraints.filter((k) => k.table !== 'schema_migrations');
  // Foreign keys first (they lean on the unique indexes), then the constraints with indexes, then the other indexes.
  for (const k of kept) await client.query(`alter table ${ident(k.table)} drop constraint ${ident(k.name)}`);
  for (const i of indexes) await client.query(`drop index ${ident(i.name)}`);
  return async () => {
    for (const k of kept.filter((k) => k.type !== 'f'))
      await client.query(`alter table ${ident(k.table)} add constraint ${ident(k.name)} ${k.definition}`);
    for (const i of indexes) await client.query(i.definition);
    for (const k of kept.filter((k) => k.type === 'f'))
      await client.query(`alter table ${ident(k.table)} add constraint ${ident(k.name)} ${k.definition}`);
  };
}

/** Every table and column of the file is in the schema made for it. */
async function checkTables(client: pg.ClientBase, header: DumpHeader, last: string): Promise<void> {
  const made = new Map((await tablesOf(client, [])).map((t) => [t.name, new Set(t.columns)]));
  for (const t of header.tables) {
    const columns = made.get(t.name);
    if (!columns) throw new Error(`it has table ${t.name}, which the schema at ${last} does not have`);
    const missing = t.columns.find((c) => !columns.has(c));
    if (missing)
      throw new Error(`its table ${t.name} has column ${missing}, which the schema at ${last} does not have`);
  }
}

/** What is wrong with the file read, rather than with the database written. */
class FileError extends Error {}

/** A read error of the file in words: zlib's say only what it found ("unexpected end of file"). */
function damaged(err: Error & { code?: string }): string {
  if (err.code === 'Z_BUF_ERROR') return 'it ends too early: the file is truncated';
  if (err.code?.startsWith('Z_')) return `it is damaged or not a dump (gzip: ${err.message})`;
  return err.message;
}

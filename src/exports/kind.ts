import type { Readable } from 'node:stream';
import type pg from 'pg';
import type { TSchema } from 'typebox';
import type { AccountScope } from '../core/scope.ts';

/**
 * What an export kind is (docs/architecture.md "Where a new export kind goes"): the life cycle in
 * exports.ts knows every kind through this shape only, from the table in kinds.ts.
 */

/** Where an export is read once ready: the poll URLs, the single profile export's URL, or the email report URLs. */
export type ReadAt = 'reports' | 'single' | 'emails';

/** What the life cycle knows of every stored export: where it is read, and its file (none: a count's result). */
export interface StoredKind {
  readAt: ReadAt;
  /** The stored file's extension before `.gz`, and the media types it is sent as, the stored one first. */
  file: { extension: string; types: readonly string[] } | null;
}

/** A statement with its values ($1 and on): the whole of what an export asks the database. */
export interface Statement {
  text: string;
  values: unknown[];
}

/** A file an export writes: its header, and its rows as CSV as they stream from the database (`\n` after each row). */
export interface ExportFile {
  columns: string[];
  rows: Readable;
}

/**
 * What an export produces: a CSV file (its header, its rows as a stream), a document (its text as a
 * stream: JSON, or CSV whose lines the database writes) or a count's result.
 */
export type Output =
  { file: ExportFile } | { document: Iterable<string> | AsyncIterable<string> } | { result: Record<string, number> };

/**
 * An export created through a request. `plan` checks a request against the account's definitions
 * (400 naming the field) and answers a plan: plain JSON, stored with the export's job, which the
 * worker runs with `produce`. `statement` is the statement `produce` runs for the plan.
 */
export interface ExportKind<Body = never, Plan = unknown> extends StoredKind {
  /** The schema of its request body. */
  body: TSchema;
  plan(scope: AccountScope, body: Body): Plan;
  statement(scope: AccountScope, plan: Plan): Statement;
  produce(pool: pg.Pool, scope: AccountScope, plan: Plan): Promise<Output>;
}

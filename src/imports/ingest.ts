import type { Readable } from 'node:stream';
import type pg from 'pg';
import { importConsents, type ImportedConsent } from '../consents/consents.ts';
import { Problem } from '../core/problems.ts';
import { MAX_ATTEMPTS, type Job } from '../jobs/queue.ts';
import { importProfileRows, refreshProfileStatistics, type ImportRow } from '../profiles/bulk.ts';
import { normaliseKey } from '../profiles/keys.ts';
import { currentVersionId, findProfile, type Located } from '../profiles/locate.ts';
import { joinClusters } from '../profiles/profiles.ts';
import type { FileStore } from '../files/store.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { recordWebhookEvents } from '../webhooks/events.ts';
import { IMPORT_JOB, planImport, type ImportPlan } from './imports.ts';
import { CsvError, readCsv } from './csv.ts';
import * as q from './queries.ts';
import type { AccountScope } from '../core/scope.ts';
import type { AttributeType } from '../core/definitions.ts';
import { textFaultIn } from '../core/text.ts';

/** Rows written per transaction: large enough for set-based statements, small enough to resume cheaply. */
export const BATCH_ROWS = 2000;
/**
 * Batches written at once, each by its own connection, for imports with one keyspace (with
 * several, a row can reach profiles of other keys, which would then be written in two lanes).
 */
export const LANES = 2;
/** Errors of a batch that met a concurrent write of the same profile, and the tries it gets. */
const RETRIED_CODES = new Set(['40P01', '40001', '23505']);
const WRITE_ATTEMPTS = 3;
const IMPORT_LABEL = 'Profile import';

class RowError extends Error {}

const FALSE_CELLS = new Set(['', '0', 'false', 'no', 'n']);

/** A cell as a value of an attribute type (docs/imports.md "Cells"): dates in the formats people send become the type's form. */
export function convertCell(typeName: AttributeType, cell: string, column: string): unknown {
  const text = cell.trim();
  const fail = (what: string) => new RowError(`column "${column}": "${cell}" is not ${what}`);
  switch (typeName) {
    case 'Text':
      return cell;
    case 'Number':
    case 'Number with decimal': {
      const n = Number(/^-?\d+,\d+$/.test(text) ? text.replace(',', '.') : text);
      if (text === '' || !Number.isFinite(n)) throw fail('a number');
      return n;
    }
    case 'True/False': {
      const t = text.toLowerCase();
      if (['true', 'yes', 'y', '1'].includes(t)) return true;
      if (['false', 'no', 'n', '0'].includes(t)) return false;
      throw fail('true or false');
    }
    case 'Date': {
      const date = parseDate(text);
      if (!date) throw fail('a date');
      return date;
    }
    case 'Timestamp': {
      if (/^-?\d+$/.test(text)) return Number(text);
      const date = parseDate(text, true);
      if (!date) throw fail('a timestamp');
      return Date.parse(date.length === 10 ? `${date}T00:00:00Z` : date);
    }
    case 'Struct': {
      try {
        const value = JSON.parse(text);
        // Its field is not named: the reason is stored, and the field's own name may be the fault.
        const fault = textFaultIn(value)?.fault;
        if (fault)
          throw new RowError(
            `column "${column}": the JSON object ${fault === 'depth' ? 'nests too deeply' : 'holds a NUL or a lone surrogate, which no text may hold'}`,
          );
        if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value;
      } catch (err) {
        if (err instanceof RowError) throw err;
        // falls through to the error below
      }
      throw fail('a JSON object');
    }
    default:
      throw fail(`a value of type ${typeName}`);
  }
}

/**
 * A date cell as `YYYY-MM-DD` (or, with `keepTime`, an RFC 3339 date-time): ISO dates and
 * date-times, `YYYY/MM/DD`, `YYYYMMDD`, and day-first `DD.MM.YYYY`, `DD/MM/YYYY`, `DD-MM-YYYY`.
 */
function parseDate(text: string, keepTime = false): string | undefined {
  let y: number, m: number, d: number;
  let match: RegExpExecArray | null;
  if ((match = /^(\d{4})-(\d{2})-(\d{2})([T ].+)?$/.exec(text))) {
    if (match[4] && keepTime) {
      // A date-time without an offset is UTC (SPEC §1.2), never the server's local time.
      const iso = text.replace(' ', 'T');
      const ms = Date.parse(/(Z|[+-]\d{2}(:?\d{2})?)$/i.test(iso) ? iso : `${iso}Z`);
      return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
    }
    [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  } else if ((match = /^(\d{4})\/(\d{1,2})\/(\d{1,2})$/.exec(text)) || (match = /^(\d{4})(\d{2})(\d{2})$/.exec(text))) {
    [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
  } else if ((match = /^(\d{1,2})[./-](\d{1,2})[./-](\d{4})$/.exec(text))) {
    [d, m, y] = [Number(match[1]), Number(match[2]), Number(match[3])];
  } else {
    return undefined;
  }
  const day = new Date(Date.UTC(y, m - 1, d));
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== m - 1 || day.getUTCDate() !== d) return undefined;
  return `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

/** A data row as written: `key` is the first key found, normalised; `keys` holds it and the others as given. */
interface Parsed {
  line: number;
  key: string;
  keys: { keyspaceIndex: number; key: string }[];
  attributes: Record<string, unknown>;
  consents: { index: number; address: string | undefined }[];
}

/** Turns a data record into what the row writes, by the plan; throws RowError for a bad cell. */
function parseRecord(plan: ImportPlan, columns: Map<string, number>, record: string[], line: number): Parsed {
  const cell = (column: string) => {
    const text = record[columns.get(column)!] ?? '';
    // PostgreSQL stores no NUL: the row fails here rather than its batch in the database.
    if (text.includes('\u0000')) throw new RowError(`column "${column}" holds a NUL character (U+0000)`);
    return text;
  };
  const keys = plan.keyspaces
    .map((k, keyspaceIndex) => ({ keyspaceIndex, key: cell(k.column).trim() }))
    .filter((k) => k.key !== '');
  if (keys.length === 0) throw new RowError(`no key: column "${plan.keyspaces[0].column}" is empty`);
  try {
    keys[0].key = normaliseKey(plan.keyspaces[keys[0].keyspaceIndex].keyspace.kind, keys[0].key, 'key');
  } catch (err) {
    if (!(err instanceof Problem)) throw err;
    throw new RowError(err.detail);
  }
  const attributes: Record<string, unknown> = {};
  for (const a of plan.attributes) {
    const text = cell(a.column);
    if (text.trim() === '') {
      if (plan.clearExisting) attributes[a.versionId] = null;
      continue;
    }
    attributes[a.versionId] = convertCell(a.typeName, text, a.column);
  }
  const consents = plan.consents
    .map((c, index) => ({
      index,
      set: !FALSE_CELLS.has(cell(c.column).trim().toLowerCase()),
      address: c.addressColumn ? cell(c.addressColumn).trim() || undefined : undefined,
    }))
    .filter((c) => c.set)
    .map(({ index, address }) => ({ index, address }));
  return { line, key: keys[0].key, keys, attributes, consents };
}

/**
 * The delimiter of a file, from its header line: `;` when that line has more semicolons than commas
 * outside quotes, else `,`. One delimiter per file, so that the other character stays data (a
 * decimal comma in a semicolon file, a semicolon in a text cell of a comma file).
 */
async function sniffDelimiter(source: Readable): Promise<',' | ';'> {
  let quoted = false;
  let commas = 0;
  let semicolons = 0;
  let bytes = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      // Quotes, delimiters and line breaks are ASCII: one byte each in UTF-8.
      for (const ch of chunk.toString('latin1')) {
        if (ch === '"') quoted = !quoted;
        else if (quoted) continue;
        else if (ch === '\n' || ch === '\r') return semicolons > commas ? ';' : ',';
        else if (ch === ',') commas++;
        else if (ch === ';') semicolons++;
      }
      bytes += chunk.length;
      if (bytes > 1024 * 1024) break;
    }
  } finally {
    source.destroy();
  }
  return semicolons > commas ? ';' : ',';
}

export interface IngestDeps {
  pool: pg.Pool;
  files: FileStore;
  scopeOf(accountId: string): Promise<AccountScope>;
  /** Hears of each batch committed, with its number of data rows (for the rows-per-second metric). */
  committed(rows: number): void;
}

/** A row refused, with its line in the file. */
interface RowFailure {
  line: number;
  reason: string;
}

/** How an import ends: its last status and, for an error, the reason its status shows. */
interface Ending {
  status: 'completed' | 'error';
  message?: string;
}

/** One run of an import job, with what its batches are written by. */
interface ImportRun {
  deps: IngestDeps;
  accountId: string;
  importId: string;
  plan: ImportPlan;
}

/**
 * The worker's import job: streams the file (never whole), parses it as CSV with a header row,
 * and writes rows in batches, each in one transaction with the import's progress, so that a worker
 * killed in the middle resumes after the last committed batch without losing or repeating a row.
 */
export async function runImport(deps: IngestDeps, job: Job<typeof IMPORT_JOB>): Promise<void> {
  try {
    await ingestImport(deps, job);
  } catch (err) {
    // The last attempt: the import ends rather than staying in progress for ever, holding a
    // pending place and its file. The cause goes to the job, kept failed for the operator; the
    // import's message tells the client no more (a database error may quote the file's data).
    if (job.attempts >= MAX_ATTEMPTS) {
      const importId = job.payload.import_id;
      const row = await q.findImport(deps.pool, job.accountId, importId);
      if (row)
        await endImport(deps, job.accountId, importId, row, {
          status: 'error',
          message: `The import failed after ${MAX_ATTEMPTS} attempts for a reason of the service, not of the file; the operator's list of failed jobs has it`,
        });
    }
    throw err;
  }
}

/** One attempt of the import job. */
async function ingestImport(deps: IngestDeps, job: Job<typeof IMPORT_JOB>): Promise<void> {
  const { accountId } = job;
  const importId = job.payload.import_id;
  const row = await q.findImport(deps.pool, accountId, importId);
  if (!row) return;
  if (row.status === 'completed' || row.status === 'error')
    return endImport(deps, accountId, importId, row, { status: row.status });
  await q.setImportStatus(deps.pool, accountId, importId, 'in_progress');
  const scope = await deps.scopeOf(accountId);
  const section = scope.defs.sections.find((s) => s.id === row.section_id);
  let plan: ImportPlan;
  try {
    if (!section) throw new Problem('AUD-1102', 'The section of the import no longer exists');
    plan = planImport(scope.defs, section, q.importRequestOf(row));
  } catch (err) {
    if (!(err instanceof Problem)) throw err;
    return endImport(deps, accountId, importId, row, { status: 'error', message: err.detail });
  }
  await endImport(deps, accountId, importId, row, await ingestFile({ deps, accountId, importId, plan }, row));
}

/**
 * Ends the import. Its file goes then: it holds personal data, and the report keeps what is
 * needed of failed rows (line and reason). A job that ended the import but not the removal (a
 * crash, the store unreachable) removes the file when it runs again.
 */
async function endImport(
  deps: IngestDeps,
  accountId: string,
  importId: string,
  row: q.ImportRowDb,
  ending: Ending,
): Promise<void> {
  // The import.finished event commits with the status (docs/webhooks.md).
  if (row.status !== ending.status)
    await withTransaction(deps.pool, async (tx) => {
      await q.setImportStatus(tx, accountId, importId, ending.status, ending.message);
      await recordWebhookEvents(tx, accountId, 'import.finished', () => [
        { orderingKey: null, data: { import_id: importId, status: ending.status, message: ending.message ?? null } },
      ]);
    });
  await deps.files.remove(row.file_key);
}

/** The rows of a file after which its import refreshes the profile tables' statistics (refreshProfileStatistics). */
const STATISTICS_AFTER_ROWS = 10_000;

/** Reads the import's file and writes its data rows through the lanes; answers how the import ends. */
async function ingestFile(run: ImportRun, row: q.ImportRowDb): Promise<Ending> {
  const { deps, plan } = run;
  const delimiter = await sniffDelimiter(deps.files.read(row.file_key));
  // The lanes of this import: those of its first run, so that a resumed import skips the same rows.
  const lanesDone = row.lanes_done ?? new Array<number>(plan.keyspaces.length === 1 ? LANES : 1).fill(0);
  if (!row.lanes_done) await q.startImportLanes(deps.pool, run.accountId, run.importId, lanesDone.length);
  const lanes = new ImportLanes(run, lanesDone);
  let columns: Map<string, number> | undefined;
  try {
    // Leaving the loop early ends the generator, which destroys the file's stream.
    for await (const records of readCsv(deps.files.read(row.file_key), delimiter)) {
      for (const { record, line } of records) {
        if (!columns) {
          columns = new Map(record.map((name, i) => [name.trim(), i]));
          const missing = missingColumns(plan, columns);
          if (missing.length > 0)
            return {
              status: 'error',
              // The header is the client's text: a NUL in it would make the message unstorable.
              message: `The file has no column ${missing.map((c) => `"${c}"`).join(', ')} (header: ${record.join(', ').replaceAll('\u0000', '\ufffd')})`,
            };
          continue;
        }
        await lanes.add(readRow(plan, columns, record, line));
      }
    }
  } catch (err) {
    if (err instanceof CsvError) {
      // The rows before the fault are written; the import ends there.
      await lanes.finish().catch(() => {});
      return { status: 'error', message: `The file is not valid CSV: ${err.message}` };
    }
    throw err;
  }
  await lanes.finish();
  if (!columns) return { status: 'error', message: 'The file is empty: a header row is needed' };
  if (lanes.rowsRead >= STATISTICS_AFTER_ROWS) await refreshProfileStatistics(deps.pool);
  return { status: 'completed' };
}

/** The columns the plan reads that the file's header lacks. */
function missingColumns(plan: ImportPlan, columns: Map<string, number>): string[] {
  const needed = [
    ...plan.keyspaces.map((k) => k.column),
    ...plan.attributes.map((a) => a.column),
    ...plan.consents.flatMap((c) => [c.column, ...(c.addressColumn ? [c.addressColumn] : [])]),
  ];
  return needed.filter((c) => !columns.has(c));
}

/** A data record parsed by the plan, or refused for a bad cell. */
function readRow(plan: ImportPlan, columns: Map<string, number>, record: string[], line: number): Parsed | RowFailure {
  try {
    return parseRecord(plan, columns, record, line);
  } catch (err) {
    if (!(err instanceof RowError)) throw err;
    return { line, reason: err.message };
  }
}

/** Rows of a lane read since its last batch: the rows to write, and the rows refused by their cells. */
interface ParsedBatch {
  found: number;
  parsed: Parsed[];
  failures: RowFailure[];
}

const emptyBatch = (): ParsedBatch => ({ found: 0, parsed: [], failures: [] });

/**
 * One of the writers of an import: the rows whose key hashes to it, in file order. `done` is the
 * number of data rows read when its last batch committed: its rows among them are written.
 */
interface Lane {
  index: number;
  done: number;
  batch: ParsedBatch;
  writing: Promise<void>;
}

/**
 * The lanes of one run of an import and the count of data rows read, which each batch records as
 * its lane's progress. A lane gathers its next batch while its last one is being written.
 */
class ImportLanes {
  private readonly run: ImportRun;
  private readonly lanes: Lane[];
  private read = 0;

  /** The file's data rows read so far (in a resumed run, those its earlier runs wrote too). */
  get rowsRead(): number {
    return this.read;
  }

  constructor(run: ImportRun, lanesDone: number[]) {
    this.run = run;
    this.lanes = lanesDone.map((done, index) => ({ index, done, batch: emptyBatch(), writing: Promise.resolve() }));
  }

  /** Takes the next data row of the file into its lane's batch, unless an earlier run wrote it; writes a full batch. */
  async add(row: Parsed | RowFailure): Promise<void> {
    this.read++;
    // A key's rows go to one lane, and so are written in file order; a refused row to any.
    const lane = this.lanes['reason' in row ? this.read % this.lanes.length : laneOf(row.key, this.lanes.length)];
    if (this.read <= lane.done) return;
    lane.batch.found++;
    if ('reason' in row) lane.batch.failures.push(row);
    else lane.batch.parsed.push(row);
    if (lane.batch.found >= BATCH_ROWS) await this.flush(lane);
  }

  /** Writes what every lane holds, and waits for all the writes. */
  async finish(): Promise<void> {
    for (const lane of this.lanes) await this.flush(lane);
    for (const lane of this.lanes) await lane.writing;
  }

  /** Waits for the lane's batch in flight, and starts writing the one it has read. */
  private async flush(lane: Lane): Promise<void> {
    if (lane.batch.found === 0) return;
    const batch = lane.batch;
    lane.batch = emptyBatch();
    await lane.writing;
    lane.writing = writeBatch(this.run, lane.index, batch, this.read);
    // Awaited by the next flush or at the end; until then its failure must not count as unhandled.
    lane.writing.catch(() => {});
  }
}

/**
 * Writes a lane's batch in one transaction with the lane's progress (`rowsDone`), again when it met
 * a concurrent write of the same profile. The job's lease is renewed by the worker's heartbeat
 * (src/jobs/queue.ts), not after each batch: that renewal was a synchronous commit, which made the
 * lane wait for a WAL flush after every batch all the same.
 */
async function writeBatch(run: ImportRun, lane: number, batch: ParsedBatch, rowsDone: number): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const scope = await run.deps.scopeOf(run.accountId);
    try {
      await withTransaction(run.deps.pool, (tx) => applyBatch(tx, scope, run, { lane, batch, rowsDone }));
      run.deps.committed(batch.found);
      break;
    } catch (err) {
      // The other lane, or an API request, wrote the same profile at the same time: the batch
      // is written again, and then finds that profile.
      if (attempt >= WRITE_ATTEMPTS || !RETRIED_CODES.has(String((err as { code?: unknown }).code))) throw err;
    }
  }
}

/** The lane of a normalised key (FNV-1a), the same in every run. */
function laneOf(key: string, lanes: number): number {
  if (lanes === 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % lanes;
}

/** Writes one parsed batch of rows and records it (with its lane's progress, `rowsDone`), in the caller's transaction. */
async function applyBatch(
  tx: Queryable,
  scope: AccountScope,
  { plan, importId }: ImportRun,
  { lane, batch, rowsDone }: { lane: number; batch: ParsedBatch; rowsDone: number },
): Promise<void> {
  const failures = [...batch.failures];
  // The commit need not wait for its WAL to reach the disk: the batch commits with its lane's
  // progress, so a batch lost in a crash of the database is simply written again when the import
  // resumes; and the import's end (`completed`, a synchronous commit) flushes every batch before it.
  // A row can fail after its profile was written (no address to consent, a merge refused): the
  // batch is then written again without it, so that a failed row changes nothing.
  await tx.query('set local synchronous_commit = off; savepoint import_batch');
  let rows = batch.parsed;
  for (;;) {
    const written = await writeRows(tx, scope, plan, rows);
    if (written.late.length === 0) {
      await importConsents(tx, scope, written.consents, IMPORT_LABEL, written.newProfiles);
      await q.recordImportBatch(tx, scope.accountId, importId, {
        lane,
        rowsDone,
        found: batch.found,
        ...written.counts,
        failures: [...failures, ...written.failures],
      });
      return;
    }
    await tx.query('rollback to savepoint import_batch');
    failures.push(...written.late);
    const late = new Set(written.late.map((f) => f.line));
    rows = rows.filter((p) => !late.has(p.line));
  }
}

/**
 * Writes parsed rows: `failures` are rows refused before anything of theirs was written, `late`
 * rows that failed after their profile was written.
 */
async function writeRows(tx: Queryable, scope: AccountScope, plan: ImportPlan, parsed: Parsed[]) {
  const failures: RowFailure[] = [];
  const late: RowFailure[] = [];
  const counts = { new: 0, updated: 0, notChanged: 0 };
  const tags = Object.fromEntries(plan.tagIds.map((id) => [id, true]));
  // Rows are located by their first keyspace with a key; rows of the same keyspace go together.
  const byKeyspace = new Map<number, Parsed[]>();
  for (const p of parsed) {
    const group = byKeyspace.get(p.keys[0].keyspaceIndex);
    // Pushed, not copied: a copy per row was quadratic in the batch (16 MB of garbage per batch of 2,000).
    if (group) group.push(p);
    else byKeyspace.set(p.keys[0].keyspaceIndex, [p]);
  }
  const consents: ImportedConsent[] = [];
  // Profiles this batch created, when no row links other keys to them (version 1 with one keyspace, or version 2).
  const newProfiles = new Set<string>();
  // What each consent mapping reads its address from, looked up once per batch rather than per row.
  const consentMappings = plan.consents.map((mapping) => ({
    mapping,
    addressVersion: currentVersionId(plan.section, mapping.addressAttribute),
    addressKind: scope.defs.keyspaces.find((k) => k.mapped_attribute === mapping.addressAttribute)?.kind ?? 'crm-id',
  }));
  for (const [index, rows] of byKeyspace) {
    const keyspace = plan.keyspaces[index].keyspace;
    const importRows: ImportRow[] = rows.map((p) => ({
      line: p.line,
      key: p.keys[0].key,
      attributes: p.attributes,
      tags,
    }));
    const outcomes = await importProfileRows(tx, scope, keyspace, plan.section, importRows, {
      updateExisting: plan.updateExisting,
    });
    for (const [i, outcome] of outcomes.entries()) {
      const p = rows[i];
      if ('failed' in outcome) {
        failures.push({ line: outcome.line, reason: outcome.failed });
        continue;
      }
      const other = p.keys.length > 1 ? await linkOtherKeys(tx, scope, plan, p, outcome.canonicalId) : undefined;
      if (other) {
        late.push({ line: p.line, reason: other });
        continue;
      }
      let failed: string | undefined;
      const rowConsents: ImportedConsent[] = [];
      for (const c of p.consents) {
        const { mapping, addressVersion, addressKind } = consentMappings[c.index];
        const raw = c.address ?? (addressVersion ? outcome.values[addressVersion] : undefined);
        if (typeof raw !== 'string' || raw.trim() === '') {
          failed = `no address to consent: the profile has no ${mapping.addressAttribute}`;
          break;
        }
        let address: string;
        try {
          address = normaliseKey(addressKind, raw, 'address');
        } catch (err) {
          if (!(err instanceof Problem)) throw err;
          failed = err.detail;
          break;
        }
        rowConsents.push({
          canonicalId: outcome.canonicalId,
          topicId: mapping.topicId,
          channelId: mapping.channelId,
          sectionId: plan.section.id,
          type: mapping.type,
          address,
          resubscribe: mapping.resubscribe,
        });
      }
      if (failed) {
        late.push({ line: p.line, reason: failed });
        continue;
      }
      consents.push(...rowConsents);
      if (outcome.outcome === 'new' && plan.keyspaces.length === 1) newProfiles.add(outcome.canonicalId);
      if (outcome.outcome === 'new') counts.new++;
      else if (outcome.outcome === 'updated' || rowConsents.length > 0) counts.updated++;
      else counts.notChanged++;
    }
  }
  return { failures, late, counts, consents, newProfiles };
}

/**
 * Version 1: the row's keys in its other keyspaces: a missing profile is created, and with
 * `merge_profiles` it is merged with the row's profile (the row's values go to the profile of its
 * first key). Returns the reason of a failure (a locked key, a merge conflict).
 */
async function linkOtherKeys(
  tx: Queryable,
  scope: AccountScope,
  plan: ImportPlan,
  row: Parsed,
  canonicalId: string,
): Promise<string | undefined> {
  for (const { keyspaceIndex, key } of row.keys.slice(1)) {
    const mapping = plan.keyspaces[keyspaceIndex];
    let other: Located | undefined;
    try {
      other = await findProfile(tx, scope, {
        keyspace_discriminator: mapping.keyspace.discriminator,
        profile_key: key,
      });
      if (other && other.canonicalId !== canonicalId && mapping.mergeProfiles)
        await joinClusters(tx, scope, canonicalId, other.canonicalId, { checkConflicts: true });
    } catch (err) {
      if (!(err instanceof Problem)) throw err;
      return err.detail;
    }
    if (other) continue;
    const normalised = normaliseKey(mapping.keyspace.kind, key, 'key');
    const added = await importProfileRows(
      tx,
      scope,
      mapping.keyspace,
      plan.section,
      [{ line: row.line, key: normalised, attributes: {}, tags: {} }],
      { updateExisting: true },
    );
    const outcome = added[0];
    if ('failed' in outcome) return outcome.failed;
    if (mapping.mergeProfiles)
      await joinClusters(tx, scope, canonicalId, outcome.canonicalId, { checkConflicts: true });
  }
  return undefined;
}

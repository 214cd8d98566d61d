import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { SectionDefs } from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { listAttributes, listEvents, listTags, requireAllSections } from '../definitions/definitions.ts';
import type { FileStore } from '../files/store.ts';
import { enqueue, MAX_ATTEMPTS, type Job } from '../jobs/queue.ts';
import { OutboundError, type Outbound } from '../outbound/outbound.ts';
import { locateByExportKey, profileRecords, type ProfileRecord } from '../profiles/locate.ts';
import type { Queryable } from '../store/pool.ts';
import {
  failExport,
  markExportFailed,
  markExportReady,
  pollExport,
  queueExport,
  type ExportDeps,
  type ExportJob,
  type ReadyAnswer,
} from './exports.ts';
import { SINGLE_EXPORT } from './kinds.ts';
import * as q from './queries.ts';
import type { SingleExportBody, SingleExportRequest } from './schemas.ts';

/**
 * The single profile export, beta (SPEC §2.16, §4.7, §6.5; docs/exports.md "Single profile
 * export"): a request answered 202; a job that posts the verification callback to the request's
 * `callback_url`, writes the profile's file (JSON, gzip-compressed in the file store) and queues
 * the ready callback, which posts the URL of the file. Callbacks go through the address filter of
 * src/outbound/.
 */

export const SINGLE_EXPORT_JOB = 'export-single';
export const SINGLE_EXPORT_READY_JOB = 'export-single-ready';
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [SINGLE_EXPORT_JOB]: ExportJob;
    [SINGLE_EXPORT_READY_JOB]: ExportJob;
  }
}
/** A callback that has not answered in this time counts as unreachable, and is tried again with the queue's back-off. */
const CALLBACK_TIMEOUT_MS = 10_000;
/** SPEC §6.5: the first callback's body. */
const VERIFICATION = { code: 100, message: 'Callback verified' };
/** SPEC §6.4: a source event time before the start of 2020 is given as 0. */
const EARLIEST_SOURCE_TIME = Date.UTC(2020, 0, 1);
const gzip = promisify(zlib.gzip);

/** The URL of a single profile export's file, of the form ENDPOINTS.md "Facts" gives (SPE-10). */
export function singleExportUrl(publicUrl: string, accountId: string, exportId: string): string {
  return `${publicUrl}/audience/profiles/export-single/accounts/${accountId}/definitions/${exportId}?metadata=true`;
}

/**
 * What requestSingleExport can answer besides refusing a key restricted to sections: an export
 * key that is none, locates no profile or a locked one, a callback URL refused, the account's
 * pending places taken.
 */
export const SINGLE_EXPORT_PROBLEMS: readonly ProblemCode[] = [
  'AUD-1920',
  'AUD-1921',
  'AUD-1922',
  'AUD-1201',
  'AUD-1202',
  'AUD-1905',
];

/**
 * Requests a single profile export (SPEC §4.7): needs a key granted every section (SPEC §7.3), an
 * export key of [a-zA-Z0-9-]* that locates a profile (404, or 410 when it was locked) and an http
 * or https callback URL; takes one of the account's pending places. Answers the export's id.
 * Where the callback URL leads is checked when the job calls it, at connection time.
 */
export async function requestSingleExport(
  tx: Queryable,
  scope: AccountScope,
  exportKey: string,
  body: SingleExportBody,
): Promise<string> {
  requireAllSections(scope, 'a data export');
  if (!/^[a-zA-Z0-9-]*$/.test(exportKey))
    throw new Problem(
      'AUD-1920',
      `export_key "${exportKey}" is not an export key: letters, digits and hyphens only ([a-zA-Z0-9-]*)`,
    );
  if (!URL.canParse(body.callback_url))
    throw new Problem('AUD-1922', `callback_url "${body.callback_url}" is not a URL`);
  const { protocol } = new URL(body.callback_url);
  if (protocol !== 'http:' && protocol !== 'https:')
    throw new Problem('AUD-1921', `callback_url: the scheme "${protocol.slice(0, -1)}" is not http or https`);
  await locateByExportKey(tx, scope, exportKey);
  const request: SingleExportRequest = { ...body, export_key: exportKey };
  return queueExport(tx, scope, { kind: SINGLE_EXPORT, request }, SINGLE_EXPORT_JOB);
}

/**
 * Reads a single profile export's file at its URL (SPE-11): the URL's account must be the
 * token's (403 otherwise, AUTH-17); then as a poll: 404 while in progress or for an unknown id,
 * 503 when failed (the detail says why), 410 a day after it became ready.
 */
export async function readSingleExport(
  db: Queryable,
  files: FileStore,
  scope: AccountScope,
  accountId: string,
  exportId: string,
): Promise<ReadyAnswer> {
  if (accountId !== scope.accountId)
    throw new Problem('AUD-9', `The URL names the account "${accountId}", and the bearer token is of another account`);
  return pollExport(db, files, scope, exportId, 'single');
}

/** An attribute in the file: its value (null when it has none left) and, when asked for, its changes. */
interface AttributeEntry {
  value: unknown;
  history?: { value: unknown; changedAt: number }[];
}
/** An event in the file, as in the event export (SPEC §2.16). */
interface EventEntry {
  correlationId: string;
  sourceEventTime: number;
  typeId: string;
  createdAt: number;
  data: unknown;
}
interface SectionEntry {
  attributes: Record<string, AttributeEntry>;
  tags: Record<string, true>;
  events: EventEntry[];
}

/** The attribute versions, tags and event versions of a section that the API shows (hidden ones are left out, as in every read). */
function visibleIds(section: SectionDefs) {
  return {
    attributes: new Set(listAttributes(section, {}).flatMap((a) => a.versions.map((v) => v.id))),
    tags: new Set(listTags(section, {}).map((t) => t.id)),
    events: new Set(listEvents(section, {}).flatMap((e) => e.versions.map((v) => v.id))),
  };
}

/** A profile's sections in the file: those where it holds a visible value, tag, change or event. */
function sectionEntries(
  record: ProfileRecord,
  visible: Map<string, ReturnType<typeof visibleIds>>,
): Record<string, SectionEntry> {
  const sections: Record<string, SectionEntry> = {};
  const entry = (sectionId: string) => (sections[sectionId] ??= { attributes: {}, tags: {}, events: [] });
  const withHistory = record.history !== null;
  for (const [sectionId, data] of record.sections) {
    const shown = visible.get(sectionId);
    if (!shown) continue;
    for (const [versionId, value] of Object.entries(data.attributes)) {
      if (shown.attributes.has(versionId))
        entry(sectionId).attributes[versionId] = withHistory ? { value, history: [] } : { value };
    }
    for (const tagId of Object.keys(data.tags)) if (shown.tags.has(tagId)) entry(sectionId).tags[tagId] = true;
  }
  for (const change of record.history ?? []) {
    if (!visible.get(change.section_id)?.attributes.has(change.version_id)) continue;
    const attribute = (entry(change.section_id).attributes[change.version_id] ??= { value: null, history: [] });
    attribute.history!.push({ value: change.value, changedAt: change.changed_at.getTime() });
  }
  for (const e of record.events) {
    if (!visible.get(e.section_id)?.events.has(e.version_id)) continue;
    const time = e.event_time.getTime();
    entry(e.section_id).events.push({
      correlationId: e.correlation_id,
      sourceEventTime: time < EARLIEST_SOURCE_TIME ? 0 : time,
      typeId: e.version_id,
      createdAt: e.created_at.getTime(),
      data: e.data,
    });
  }
  return sections;
}

/**
 * The file of a single profile export (SPEC §2.16; docs/exports.md): `profiles` keyed by export
 * key, each with its sections keyed by section id, and with `include_type_definitions` the
 * `metadata` of those sections. A profile that is no longer there fails the export (a problem).
 */
async function singleExportFile(db: Queryable, scope: AccountScope, request: SingleExportRequest) {
  const located = await locateByExportKey(db, scope, request.export_key);
  const records = await profileRecords(db, scope, located, {
    members: request.include_merged_profiles === true,
    history: request.include_attribute_history === true,
  });
  const visible = new Map(scope.defs.sections.map((s) => [s.id, visibleIds(s)]));
  const profiles = Object.fromEntries(records.map((r) => [r.exportKey, { sections: sectionEntries(r, visible) }]));
  if (request.include_type_definitions !== true) return { profiles };
  const inFile = new Set(Object.values(profiles).flatMap((p) => Object.keys(p.sections)));
  const sections = scope.defs.sections
    .filter((s) => inFile.has(s.id))
    .map((s) => [
      s.id,
      {
        discriminator: s.discriminator,
        name: s.name,
        attributes: listAttributes(s, {}),
        tags: listTags(s, {}),
        events: listEvents(s, {}),
      },
    ]);
  return { profiles, metadata: { sections: Object.fromEntries(sections) } };
}

/** What the single profile export's jobs work with, beyond the other exports'. */
export interface SingleExportDeps extends ExportDeps {
  outbound: Outbound;
  /** The service's base address, of the file's URL. */
  publicUrl: string;
}

/**
 * Posts a callback body. Undefined when it was taken (2xx); else why not, and whether trying again
 * later may help: no answer (unreachable, timed out) or a server error or 429 may pass; a refused
 * address, a redirect (not followed: it could lead anywhere) or another 4xx will not.
 */
async function callBack(
  deps: SingleExportDeps,
  url: string,
  body: unknown,
): Promise<{ reason: string; retry: boolean } | undefined> {
  try {
    const status = await deps.outbound.postJson(url, body, { timeoutMs: CALLBACK_TIMEOUT_MS });
    if (status >= 200 && status < 300) return undefined;
    return {
      reason: `the callback URL answered ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`,
      retry: status >= 500 || status === 429,
    };
  } catch (err) {
    if (err instanceof OutboundError) return { reason: err.message, retry: err.transient };
    throw err;
  }
}

/**
 * The job of a single profile export. A queued export is not verified yet: the verification
 * callback comes first, and an export whose verification fails for good (or after the job's last
 * attempt) fails with the reason and gets no ready callback (SPE-09). A verified export is in
 * progress, so that a retry does not verify it again. Then the file is written, and the export is
 * marked ready with its sweeper and its ready callback's job in one transaction.
 */
export async function runSingleExport(deps: SingleExportDeps, job: Job<typeof SINGLE_EXPORT_JOB>): Promise<void> {
  const { accountId } = job;
  const exportId = job.payload.export_id;
  const row = await q.findExport(deps.pool, accountId, exportId);
  if (!row || row.kind !== SINGLE_EXPORT || (row.status !== 'queued' && row.status !== 'in_progress')) return;
  const request = row.request as SingleExportRequest;
  try {
    if (row.status === 'queued') {
      const failed = await callBack(deps, request.callback_url, VERIFICATION);
      if (failed?.retry && job.attempts < MAX_ATTEMPTS)
        throw new Error(`The verification callback failed: ${failed.reason}`);
      if (failed)
        return await markExportFailed(
          deps.pool,
          accountId,
          exportId,
          `The verification callback failed: ${failed.reason}; no ready callback is sent`,
        );
      await q.setExportInProgress(deps.pool, accountId, exportId);
    }
    const file = await singleExportFile(deps.pool, await deps.scopeOf(accountId), request);
    const fileKey = `exports/${accountId}/${exportId}.json.gz`;
    await deps.files.put(fileKey, Readable.from([await gzip(JSON.stringify(file))]));
    const ready: ExportJob = { export_id: exportId };
    await markExportReady(deps, accountId, exportId, { fileKey, result: null }, (tx) =>
      enqueue(tx, accountId, SINGLE_EXPORT_READY_JOB, ready),
    );
  } catch (err) {
    return failExport(deps, job, exportId, err);
  }
}

/**
 * The ready callback's job: posts `{code: 200, message: <the file's URL>}` (SPEC §6.5). One that
 * is not taken is tried again with the queue's back-off and, after the last attempt, kept failed
 * for the operator; the file stays readable at its URL for its day either way.
 */
export async function sendReadyCallback(
  deps: SingleExportDeps,
  job: Job<typeof SINGLE_EXPORT_READY_JOB>,
): Promise<void> {
  const { accountId } = job;
  const exportId = job.payload.export_id;
  const row = await q.findExport(deps.pool, accountId, exportId);
  if (!row || row.kind !== SINGLE_EXPORT || row.status !== 'ready') return;
  const failed = await callBack(deps, (row.request as SingleExportRequest).callback_url, {
    code: 200,
    message: singleExportUrl(deps.publicUrl, accountId, exportId),
  });
  if (failed) throw new Error(`The ready callback failed: ${failed.reason}`);
}

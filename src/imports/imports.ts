import crypto from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { CONSENT_TYPES } from '../consents/schemas.ts';
import {
  ALL_SECTIONS_PROBLEMS,
  keyspaceForProfileAccess,
  PROFILE_KEYSPACE_PROBLEMS,
  requireAllSections,
  SECTION_PROBLEMS,
  sectionOf,
} from '../definitions/definitions.ts';
import type { FileStore } from '../files/store.ts';
import type { UploadSigner } from '../files/upload-form.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import { pipeWhileWriting } from '../core/streams.ts';
import { enqueue, type Job } from '../jobs/queue.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';
import * as q from './queries.ts';
import type { ImportRequest } from './schemas.ts';
import {
  attributeOfVersion,
  attributeTypeOf,
  ATTRIBUTE_PROBLEMS,
  requireAttribute,
  requireWrite,
  WRITE_GRANT_PROBLEMS,
  type AttributeType,
  type Definitions,
  type KeyspaceRow,
  type SectionDefs,
} from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';

/**
 * What a request for an import can answer before its file arrives: its section, its key mappings' keyspaces,
 * and each mapping checked against the definitions (attributes, tags, consents) and the limits.
 */
export const IMPORT_REQUEST_PROBLEMS: readonly ProblemCode[] = [
  ...SECTION_PROBLEMS,
  ...ALL_SECTIONS_PROBLEMS,
  ...PROFILE_KEYSPACE_PROBLEMS,
  ...ATTRIBUTE_PROBLEMS,
  ...WRITE_GRANT_PROBLEMS,
  'AUD-1203',
  'AUD-1218',
  'AUD-1602',
  'AUD-1606',
  'AUD-1607',
  'AUD-1608',
  'AUD-1609',
  'AUD-1610',
  'AUD-1802',
  'AUD-1803',
  'AUD-1804',
];

/** What a request of version 1, which takes several keyspace mappings, can answer besides: several beside channel-specific topics. */
export const IMPORT_V1_REQUEST_PROBLEMS: readonly ProblemCode[] = [...IMPORT_REQUEST_PROBLEMS, 'AUD-1801'];

/** SPEC §8: the upload window and the largest file. */
export const UPLOAD_WINDOW_MS = 5 * 60 * 1000;
export const MAX_FILE_BYTES = 50 * 1024 * 1024;
export const IMPORT_JOB = 'import';
/**
 * The job that, once an import's upload window is long closed, removes a file stored for it that
 * never became its upload (its process was killed, or its database write failed, between the
 * two): due an hour after the window, when no upload begun within it is still arriving.
 */
export const UPLOAD_WINDOW_JOB = 'import-upload-window';
const LATE_UPLOAD_MS = 60 * 60 * 1000;
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [IMPORT_JOB]: { import_id: string };
    [UPLOAD_WINDOW_JOB]: { import_id: string };
  }
}
const FAILURES_SHOWN = 1000;

/** What an import writes, resolved against the account's definitions. */
export interface ImportPlan {
  section: SectionDefs;
  keyspaces: PlannedKeyspace[];
  updateExisting: boolean;
  clearExisting: boolean;
  attributes: { column: string; versionId: string; typeName: AttributeType }[];
  tagIds: string[];
  consents: {
    column: string;
    addressColumn: string | undefined;
    topicId: string;
    channelId: string;
    addressAttribute: string;
    type: string;
    resubscribe: boolean;
  }[];
}

/** A keyspace an import locates profiles in, and the column holding its keys. */
interface PlannedKeyspace {
  keyspace: KeyspaceRow;
  column: string;
  mergeProfiles: boolean;
}

/** Checks an import request against SPEC §4.6 and resolves what it writes; throws the problem of the first fault. */
export function planImport(defs: Definitions, section: SectionDefs, request: ImportRequest): ImportPlan {
  // In this order: the problem answered is that of the first fault.
  const keyspaces = planKeyspaces(defs, request);
  const attributes = planAttributes(section, request.body, keyspaces);
  const tagIds = planTags(section, request.body, keyspaces);
  const consents = planConsents(defs, section, request);
  return {
    section,
    keyspaces,
    attributes,
    tagIds,
    consents,
    updateExisting: request.body.options?.update_existing_profiles ?? true,
    clearExisting: request.body.options?.clear_existing_attributes ?? false,
  };
}

/** The keyspace mappings: keyspaces that manage subscriptions and take writes, one only beside channel-specific topics (version 1). */
function planKeyspaces(defs: Definitions, request: ImportRequest): PlannedKeyspace[] {
  const mappings =
    request.version === 1
      ? request.body.keyspace_mappings.map((m, i) => ({
          discriminator: m.keyspace_discriminator,
          column: m.field_selector,
          merge: m.merge_profiles ?? false,
          field: `keyspace_mappings[${i}]`,
        }))
      : [
          {
            discriminator: request.body.keyspace_mapping.keyspace_discriminator,
            column: request.body.keyspace_mapping.field_selector,
            merge: false,
            field: 'keyspace_mapping',
          },
        ];
  const keyspaces = mappings.map((m) => {
    const keyspace = keyspaceForProfileAccess(defs, m.discriminator);
    if (!keyspace.manage_subscriptions)
      throw new Problem(
        'AUD-1609',
        `${m.field}.keyspace_discriminator: "${keyspace.discriminator}" does not manage subscriptions and cannot be used for imports`,
      );
    if (keyspace.kind === 'export') throw new Problem('AUD-1203', `${m.field}: the export keyspace is read-only`);
    return { keyspace, column: m.column, mergeProfiles: m.merge };
  });
  const channelSpecific = defs.sections.some((s) => s.topics.some((t) => t.channel_id !== null));
  if (request.version === 1 && keyspaces.length > 1 && channelSpecific) {
    throw new Problem(
      'AUD-1801',
      'keyspace_mappings: with channel-specific topics on the account, an import (version 1) takes one keyspace mapping',
    );
  }
  return keyspaces;
}

/** The attribute mappings: current, visible attribute versions of the section, writable through every keyspace. */
function planAttributes(
  section: SectionDefs,
  body: ImportRequest['body'],
  keyspaces: PlannedKeyspace[],
): ImportPlan['attributes'] {
  return body.attribute_mappings.map((m, i) => {
    const field = `attribute_mappings[${i}].attribute_version_id`;
    const { version: v } = requireAttribute(
      section,
      m.attribute_version_id,
      attributeOfVersion(section, m.attribute_version_id),
      { writeThrough: keyspaces.map((k) => k.keyspace), field },
    );
    return { column: m.field_selector, versionId: v.id, typeName: attributeTypeOf(v) };
  });
}

/** The tag mappings: visible tags of the section, writable through every keyspace. */
function planTags(section: SectionDefs, body: ImportRequest['body'], keyspaces: PlannedKeyspace[]): string[] {
  return (body.tag_mappings ?? []).map((m, i) => {
    const tag = section.tags.find((t) => t.discriminator === m.tag_discriminator);
    if (!tag || tag.hidden)
      throw new Problem(
        'AUD-1218',
        `tag_mappings[${i}].tag_discriminator: tag "${m.tag_discriminator}" is not defined in section "${section.discriminator}"`,
      );
    for (const k of keyspaces) requireWrite('tag', tag, k.keyspace, `tag_mappings[${i}]`);
    return tag.tag_id;
  });
}

/** The consent mappings: each a topic of the section on a channel with an address attribute, each topic and channel once. */
function planConsents(defs: Definitions, section: SectionDefs, request: ImportRequest): ImportPlan['consents'] {
  // Only version 1 names an address column; version 2 reads the address from the profile.
  const mappings =
    request.version === 1
      ? (request.body.consent_mappings ?? []).map((m) =>
          m.consents.map((c) => ({ ...c, addressColumn: c.address_field_selector })),
        )
      : (request.body.consent_mappings ?? []).map((m) => m.consents.map((c) => ({ ...c, addressColumn: undefined })));
  const seen = new Set<string>();
  return mappings.flatMap((consents, i) =>
    consents.map((c, j) => {
      const field = `consent_mappings[${i}].consents[${j}]`;
      const topic = section.topics.find((t) => t.discriminator === c.topic_discriminator);
      if (!topic)
        throw new Problem(
          'AUD-1610',
          `${field}.topic_discriminator: topic "${c.topic_discriminator}" not found in section "${section.discriminator}"`,
        );
      if (!(CONSENT_TYPES as readonly string[]).includes(c.type))
        throw new Problem('AUD-1602', `${field}.type: consent state value "${c.type}" is unsupported`);
      let channel =
        c.channel_discriminator === undefined
          ? undefined
          : defs.channels.find((x) => x.discriminator === c.channel_discriminator);
      if (c.channel_discriminator !== undefined && !channel)
        throw new Problem(
          'AUD-1607',
          `${field}.channel_discriminator: channel ID "${c.channel_discriminator}" not found`,
        );
      if (topic.channel_id !== null) {
        if (channel && channel.channel_id !== topic.channel_id)
          throw new Problem(
            'AUD-1606',
            `${field}: the topic "${topic.discriminator}" is for another channel than "${channel.discriminator}"`,
          );
        channel = defs.channels.find((x) => x.channel_id === topic.channel_id);
      } else if (!channel) {
        throw new Problem(
          'AUD-1802',
          `${field}.channel_discriminator is required: the topic "${topic.discriminator}" is not channel-specific`,
        );
      }
      if (!channel!.address_attribute)
        throw new Problem(
          'AUD-1608',
          `${field}: communication type invalid for the channel "${channel!.discriminator}"`,
        );
      const id = `${topic.topic_id}/${channel!.channel_id}`;
      if (seen.has(id))
        throw new Problem(
          'AUD-1803',
          `${field}: another consent mapping already updates the topic "${topic.discriminator}" on "${channel!.discriminator}"`,
        );
      seen.add(id);
      return {
        column: c.field_selector,
        addressColumn: c.addressColumn,
        topicId: topic.topic_id,
        channelId: channel!.channel_id,
        addressAttribute: channel!.address_attribute!,
        type: c.type,
        resubscribe: c.resubscribe_if_opted_out ?? false,
      };
    }),
  );
}

/**
 * Creates an import (SPEC §4.6): checks the request, holds one of the account's pending places,
 * and answers the signed upload form, valid for 5 minutes.
 */
export async function createImport(
  tx: Queryable,
  scope: AccountScope,
  signer: UploadSigner,
  sectionDiscriminator: string,
  request: ImportRequest,
) {
  const section = sectionOf(scope, sectionDiscriminator);
  const plan = planImport(scope.defs, section, request);
  // Merging the profiles a row names joins their data in every section.
  if (plan.keyspaces.some((k) => k.mergeProfiles)) requireAllSections(scope, 'an import with merge_profiles');
  await q.lockAccountImports(tx, scope.accountId);
  const pending = await q.countPendingImports(tx, scope.accountId, scope.now);
  const limit = scope.limits.pending_imports;
  if (limit !== null && pending >= limit)
    throw new Problem(
      'AUD-1804',
      `The account has ${pending} imports pending; at most ${limit}. Retry when one has finished`,
    );
  const importId = crypto.randomUUID();
  const fileKey = `imports/${scope.accountId}/${importId}.csv`;
  const expiresAt = new Date(scope.now.getTime() + UPLOAD_WINDOW_MS);
  await q.insertImport(tx, scope.accountId, {
    importId,
    sectionId: section.id,
    request,
    fileKey,
    uploadExpiresAt: expiresAt,
  });
  await enqueue(
    tx,
    scope.accountId,
    UPLOAD_WINDOW_JOB,
    { import_id: importId },
    new Date(expiresAt.getTime() + LATE_UPLOAD_MS),
  );
  const form = signer.form(
    {
      key: fileKey,
      metaId: `${scope.accountId}/${importId}`,
      contentType: 'text/csv',
      maxBytes: MAX_FILE_BYTES,
      expiresAt,
    },
    scope.now,
  );
  return {
    import_id: importId,
    file_upload_url: form.url,
    file_upload_body: form.fields,
    file_upload_url_expires_at: expiresAt.toISOString(),
  };
}

/** An import's status and counts as clients see them: one still waiting for its file after its window is an error. */
function importResult(row: q.ImportRowDb, now: Date) {
  const expired = row.status === 'waiting_for_file' && row.upload_expires_at.getTime() < now.getTime();
  return {
    status: expired ? 'error' : row.status,
    profiles_found: row.profiles_found,
    profiles_processed: row.profiles_processed,
    profiles_failed: row.profiles_failed,
    ...(expired
      ? { message: 'No file was uploaded within the upload window' }
      : row.message
        ? { message: row.message }
        : {}),
  };
}

/** GET …/imports/{id}: the status, counts and report of an import of the section. */
export async function getImport(db: Queryable, scope: AccountScope, sectionDiscriminator: string, importId: string) {
  const section = sectionOf(scope, sectionDiscriminator);
  const row = await q.findImport(db, scope.accountId, importId);
  if (!row || row.section_id !== section.id)
    throw new Problem('AUD-1805', `No import "${importId}" in section "${section.discriminator}"`);
  return {
    import_id: row.import_id,
    result: importResult(row, scope.now),
    report: {
      profiles_new: row.profiles_new,
      profiles_updated: row.profiles_updated,
      profiles_not_changed: row.profiles_not_changed,
      profiles_failed: row.profiles_failed,
      failures: await q.listImportFailures(db, scope.accountId, row.import_id, FAILURES_SHOWN),
    },
  };
}

/** GET …/imports: the section's newest imports, each with its progress (rows read of the file's rows). */
export async function listImports(db: Queryable, scope: AccountScope, sectionDiscriminator: string, limit: number) {
  const section = sectionOf(scope, sectionDiscriminator);
  const rows = await q.listImportsBySection(db, scope.accountId, section.id, limit);
  return rows.map((row) => ({
    import_id: row.import_id,
    ...importResult(row, scope.now),
    rows_total: row.rows_total,
    created_at: row.created_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
  }));
}

/** The upload window's job: an import still waiting for its file has none, whatever the store holds under its key. */
export async function closeUploadWindow(
  deps: { pool: pg.Pool; files: FileStore },
  job: Job<typeof UPLOAD_WINDOW_JOB>,
): Promise<void> {
  const row = await q.findImport(deps.pool, job.accountId, job.payload.import_id);
  if (row?.status === 'waiting_for_file') await deps.files.remove(row.file_key);
}

/**
 * Takes the upload of an import's file (the signed form already verified): stores the file whole,
 * then queues the import for the worker in the same transaction as its status change.
 */
export async function acceptUpload(
  pool: pg.Pool,
  store: FileStore,
  accountId: string,
  importId: string,
  fileKey: string,
  file: Readable & { truncated?: boolean },
): Promise<void> {
  const row = await q.findImport(pool, accountId, importId);
  if (!row || row.file_key !== fileKey) throw new Problem('AUD-1806', 'The upload form does not belong to an import');
  if (row.status !== 'waiting_for_file')
    throw new Problem('AUD-1809', `The import ${importId} already has its file (status ${row.status})`);
  // A part cut at the size limit arrives short: it is no file to import. Failing the stream at its
  // end keeps it out of the store, which writes a file whole or not at all.
  // Its lines are counted on the way, for the import's progress: the total of rows to read.
  const lines = { ends: 0, last: 0x0a };
  const whole = new Transform({
    transform: (chunk: Buffer, _encoding, done) => {
      for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) lines.ends++;
      if (chunk.length > 0) lines.last = chunk[chunk.length - 1];
      done(null, chunk);
    },
    flush: (done) =>
      done(file.truncated ? new Problem('AUD-1808', `The file is over the limit of ${MAX_FILE_BYTES} bytes`) : null),
  });
  // The part's own errors, and the size limit's, fail `whole` and so the store's write, which then
  // keeps nothing; they are the caller's.
  await pipeWhileWriting(file, [whole], (piped) => store.put(fileKey, piped));
  await withTransaction(pool, async (tx) => {
    const locked = await q.findImport(tx, accountId, importId, true);
    if (locked?.status !== 'waiting_for_file')
      throw new Problem('AUD-1809', `The import ${importId} already has its file`);
    // A last line without its line end is a line too; the header is none of the rows.
    const fileLines = lines.ends + (lines.last === 0x0a ? 0 : 1);
    await q.queueImport(tx, accountId, importId, Math.max(fileLines - 1, 0));
    await enqueue(tx, accountId, IMPORT_JOB, { import_id: importId });
  });
}

/**
 * An account being deleted: `rows` erases its imports and their failures in the caller's
 * transaction; `files`, once that has committed, every file under the account's folder, partial
 * writes included.
 */
export const forgetAccountImports = {
  rows: (tx: Queryable, accountId: string): Promise<void> => q.deleteAccountRows(tx, accountId),
  files: (store: FileStore, accountId: string): Promise<void> => store.removeAll(`imports/${accountId}`),
  /** The accounts with files here. */
  accounts: (store: FileStore): Promise<string[]> => store.folders('imports'),
};

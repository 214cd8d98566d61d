import type { Activity, ActivityInput } from '../activities/schemas.ts';
import { eventsOfMessages, getActivity } from '../activities/activities.ts';
import { recordedEventTypes } from '../activities/events.ts';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { keyspaceForProfileAccess, sectionOf } from '../definitions/definitions.ts';
import { enqueueWith, type Job } from '../jobs/queue.ts';
import { findOrCreateProfiles } from '../profiles/bulk.ts';
import { normaliseKey } from '../profiles/keys.ts';
import { locateWithSectionData, refuseReadOnly, sectionValues } from '../profiles/locate.ts';
import crypto from 'node:crypto';
import type pg from 'pg';
import { aloneOnFailure, coalescePerPool } from '../store/coalesce.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import type { Attachment } from './message.ts';
import * as q from './queries.ts';
import {
  ATTACHMENTS_LIMIT,
  ATTACHMENTS_SIZE_LIMIT,
  VARIABLES_LIMIT,
  type SendBody,
  type SendStatus,
} from './schemas.ts';
import { checkTemplates } from './templates.ts';

/**
 * Transactional sends accepted (SPEC §2.15, §4.8; docs/mail.md): a send is checked and kept, with
 * its job, in one statement and answered at once; its status and the list of an activity's sends.
 * The job's run (run.ts) renders the activity's templates and hands the message to the mailer;
 * what follows is recorded as the activity's events (recording.ts: SENT, BOUNCED; then OPENED,
 * CLICKED through the tracking links, tracked-events.ts, and UNSUBSCRIBED, unsubscribe.ts).
 */

export const SEND_JOB = 'transactional-send';
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [SEND_JOB]: SendJob;
  }
}

/** A send's job as the worker takes it. */
export type SendJobRun = Job<typeof SEND_JOB>;

/** What a send needs to make its message, kept with it until it is sent. */
interface SendRequest {
  to_name: string;
  to_email_address: string;
  from_name?: string;
  from_email_address?: string;
  reply_email_address?: string;
  subject_line?: string;
  pre_header?: string;
  variables: Record<string, unknown>;
  attachments: Attachment[];
}

/** A send as its job carries it: the send's row need not be read, and the job exists exactly while the send is queued. */
export interface SendJob {
  transaction_id: string;
  activity_id: string;
  section_id: string;
  keyspace_id: string;
  profile_key: string;
  request: SendRequest;
}

/** An activity that takes sends: a transactional email activity, not archived; 404 otherwise (TX-13). */
export async function transactionalActivity(
  db: Queryable,
  scope: AccountScope,
  section: SectionDefs,
  activityId: string,
  options: { shared?: boolean } = {},
): Promise<Activity> {
  const activity = await getActivity(db, scope, section.id, activityId, options);
  if (activity.kind !== 'email' || activity.transactional !== true || activity.archived_at !== null) {
    throw new Problem('AUD-2001', `Activity "${activityId}" is not a transactional email activity of the section`);
  }
  return activity;
}

/** The rendered-size limits of SPEC §8 (TX-05..07) and the base64 of attachments; the body as a whole may exceed 100 KB (TX-08). */
function checkLimits(body: SendBody): void {
  if (body.variables !== undefined && Buffer.byteLength(JSON.stringify(body.variables)) > VARIABLES_LIMIT) {
    throw new Problem('AUD-2104', `variables: names and values take more than ${VARIABLES_LIMIT / 1024} KB`);
  }
  const attachments = body.attachments ?? [];
  if (attachments.length > ATTACHMENTS_LIMIT)
    throw new Problem('AUD-1007', `attachments: at most ${ATTACHMENTS_LIMIT}, not ${attachments.length}`);
  let size = 0;
  attachments.forEach((a, i) => {
    const content = a.content.replace(/\s+/g, '');
    if (content.length % 4 === 1 || !/^[A-Za-z0-9+/]*={0,2}$/.test(content))
      throw new Problem('AUD-2107', `attachments/${i}/content: not base64`);
    size += Buffer.byteLength(content, 'base64');
  });
  if (size > ATTACHMENTS_SIZE_LIMIT)
    throw new Problem(
      'AUD-2105',
      `attachments: ${size} bytes in all, over ${ATTACHMENTS_SIZE_LIMIT / (1024 * 1024)} MB`,
    );
}

/**
 * Accepts a send (TX-01..11): the activity must be a transactional email activity of the section
 * (404); the body within the limits of SPEC §8; the sender, subject and pre-header the request
 * omits are the activity's (and the request's own templates must parse); the profile that keyspace
 * and key name is created when missing (TX-10). A locked profile's send is kept with the status
 * suppressed and not sent. Answers the transaction id once the send and its job are committed.
 * The reads and the write are each shared with the other sends of the same turn of the event
 * loop (one statement, and one commit, for the sends that arrive together).
 */
export async function acceptSend(
  pool: pg.Pool,
  scope: AccountScope,
  target: { section_discriminator: string; activity_id: string },
  body: SendBody,
): Promise<string> {
  const section = sectionOf(scope, target.section_discriminator);
  const activity = await transactionalActivity(pool, scope, section, target.activity_id, { shared: true });
  checkLimits(body);
  const from = body.from_email_address ?? activity.sender_email_address;
  if (from === undefined)
    throw new Problem(
      'AUD-1003',
      `from_email_address: activity "${activity.id}" has no sender address, so the send must give one`,
    );
  if (body.subject_line === undefined && activity.email_subject === undefined)
    throw new Problem('AUD-1003', `subject_line: activity "${activity.id}" has no subject, so the send must give one`);
  if (activity.html === undefined && activity.text === undefined)
    throw new Problem('AUD-1003', `Activity "${activity.id}" has no body to send: give it html or text`);
  await checkTemplates(
    { subject: body.subject_line, preheader: body.pre_header },
    { subject: 'subject_line', preheader: 'pre_header' },
  );
  const keyspace = keyspaceForProfileAccess(scope.defs, body.keyspace_discriminator);
  refuseReadOnly(keyspace);
  const key = normaliseKey(keyspace.kind, body.profile_key);
  const found = await profileValues(pool, scope, keyspace, section, key);
  const send: q.NewSend = {
    account_id: scope.accountId,
    transaction_id: crypto.randomUUID(),
    activity_id: activity.id,
    section_id: section.id,
    keyspace_id: keyspace.keyspace_id,
    profile_key: key,
    to_address: body.to_email_address,
    status: 'queued',
    status_reason: null,
    created_at: scope.now,
  };
  if (found === 'locked') {
    await pool.query(q.insertSends([{ ...send, status: 'suppressed', status_reason: 'the profile is locked' }]));
    return send.transaction_id;
  }
  const request: SendRequest = {
    to_name: body.to_name,
    to_email_address: body.to_email_address,
    from_email_address: from,
    from_name: body.from_name ?? activity.sender_name,
    reply_email_address: body.reply_email_address ?? activity.reply_to,
    subject_line: body.subject_line,
    pre_header: body.pre_header,
    variables: body.variables ?? {},
    attachments: body.attachments ?? [],
  };
  await writeQueued(pool, {
    send,
    job: {
      transaction_id: send.transaction_id,
      activity_id: send.activity_id,
      section_id: send.section_id,
      keyspace_id: send.keyspace_id,
      profile_key: key,
      request,
    },
  });
  return send.transaction_id;
}

interface Queued {
  send: q.NewSend;
  job: SendJob;
}

/** The queued sends of each pool: those of one turn of the event loop are written, with their jobs, in one statement. */
const queuedWrites = coalescePerPool(
  aloneOnFailure(async (db: Queryable, _key: string, all: Queued[]) => {
    await enqueueWith(
      db,
      SEND_JOB,
      all.map((x) => ({ accountId: x.send.account_id, payload: x.job })),
      q.insertSends(all.map((x) => x.send)),
    );
    return all.map(() => undefined);
  }),
);

/**
 * Writes a queued send and its job in one autocommitted statement shared with the other sends of
 * the same turn. A shared statement that fails is tried again one send at a time, so that one
 * send's failure (its account deleted meanwhile) is its own.
 */
function writeQueued(pool: pg.Pool, queued: Queued): Promise<void> {
  return queuedWrites(pool, 'sends', queued);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A send's status (TX-12); 404 for an activity that takes no sends or a transaction it does not have (TX-13). */
export async function sendStatus(
  db: Queryable,
  scope: AccountScope,
  target: { section_discriminator: string; activity_id: string; transaction_id: string },
): Promise<{ id: string; status: SendStatus }> {
  const section = sectionOf(scope, target.section_discriminator);
  await transactionalActivity(db, scope, section, target.activity_id);
  const row = UUID.test(target.transaction_id)
    ? await q.findSend(db, scope.accountId, target.transaction_id.toLowerCase())
    : undefined;
  if (!row || row.activity_id !== target.activity_id)
    throw new Problem('AUD-2106', `Activity "${target.activity_id}" has no transaction "${target.transaction_id}"`);
  return { id: row.transaction_id, status: row.status === 'sent' ? await reportedStatus(db, scope, row) : row.status };
}

/**
 * The newest sends of a transactional activity (for the console), each with its status as the
 * status route answers it and the events recorded of it, oldest first.
 */
export async function listSends(
  db: Queryable,
  scope: AccountScope,
  target: { section_discriminator: string; activity_id: string; limit: number },
) {
  const section = sectionOf(scope, target.section_discriminator);
  await transactionalActivity(db, scope, section, target.activity_id);
  const rows = await q.listSendsByActivity(db, scope.accountId, target.activity_id, target.limit);
  const events = await eventsOfMessages(
    db,
    scope.accountId,
    target.activity_id,
    rows.map((r) => r.transaction_id),
  );
  return rows.map((row) => {
    const own = events.get(row.transaction_id) ?? [];
    return {
      id: row.transaction_id,
      status: row.status === 'sent' ? statusReported(own.map((e) => e.type)) : row.status,
      ...(row.status_reason === null ? {} : { status_reason: row.status_reason }),
      profile_key: row.profile_key,
      to_address: row.to_address,
      created_at: row.created_at.toISOString(),
      sent_at: row.sent_at?.toISOString() ?? null,
      events: own,
    };
  });
}

/**
 * What became of a sent message, from the reports of its delivery that came in as events of its
 * activity with its transaction id as correlation id (docs/mail.md "Delivery reports"): a bounce,
 * even after a delivery report, is `bounced`; a delivery `delivered`; none leaves it `sent`.
 */
async function reportedStatus(db: Queryable, scope: AccountScope, send: q.SendRow): Promise<SendStatus> {
  return statusReported(await recordedEventTypes(db, scope, send.activity_id, send.transaction_id));
}

/** The status of a sent message by the types of its events: a bounce wins over a delivery. */
function statusReported(types: string[]): SendStatus {
  return types.includes('BOUNCED') ? 'bounced' : types.includes('DELIVERED') ? 'delivered' : 'sent';
}

/** The check of an email activity's templates when it is saved (ActivityWriter.checkEmail): those of a transactional one must parse. */
export async function checkActivityTemplates(input: ActivityInput): Promise<void> {
  if (input.transactional !== true) return;
  await checkTemplates(
    { subject: input.email_subject, preheader: input.preheader, html: input.html, text: input.text },
    { subject: 'email_subject' },
  );
}

/**
 * The attribute values of a profile in a section: one read (shared with the other reads of the
 * same turn) when the profile is there; else the profile is created (TX-10), or found locked.
 */
export async function profileValues(
  pool: pg.Pool,
  scope: AccountScope,
  keyspace: KeyspaceRow,
  section: SectionDefs,
  key: string,
): Promise<Record<string, unknown> | 'locked'> {
  try {
    return (
      await locateWithSectionData(
        pool,
        scope,
        { keyspace_discriminator: keyspace.discriminator, profile_key: key },
        section,
      )
    ).data.attributes;
  } catch (err) {
    if (!(err instanceof Problem)) throw err;
  }
  const { profiles, locked } = await withTransaction(pool, (tx) =>
    findOrCreateProfiles(tx, scope, keyspace, section, [key]),
  );
  return locked.size > 0 ? 'locked' : sectionValues(pool, scope, profiles.get(key)!, section.id);
}

/** Erases the sends and the outbox of an account being deleted. */
export async function forgetAccountMail(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

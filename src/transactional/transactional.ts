import type { Activity, ActivityEventInput, ActivityInput } from '../activities/schemas.ts';
import { eventsOfMessages, getActivity } from '../activities/activities.ts';
import { recordActivityEvents, recordedEventTypes } from '../activities/events.ts';
import { addSuppression, isSuppressed } from '../consents/consents.ts';
import type { KeyspaceRow, SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { namespace } from '../definitions/builtins.ts';
import { keyspaceForProfileAccess, sectionOf } from '../definitions/definitions.ts';
import { completeJobs, enqueueWith, MAX_ATTEMPTS, type Job } from '../jobs/queue.ts';
import { findOrCreateProfiles } from '../profiles/bulk.ts';
import { normaliseKey } from '../profiles/keys.ts';
import { locateWithSectionData, refuseReadOnly, sectionValues } from '../profiles/profiles.ts';
import crypto from 'node:crypto';
import type pg from 'pg';
import { aloneOnFailure, coalescePerPool } from '../store/coalesce.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { DeliveryError, type Mailer } from './mailer.ts';
import { composeMessage, type Attachment } from './message.ts';
import * as q from './queries.ts';
import {
  ATTACHMENTS_LIMIT,
  ATTACHMENTS_SIZE_LIMIT,
  VARIABLES_LIMIT,
  type SendBody,
  type SendStatus,
} from './schemas.ts';
import { checkTemplates, type MessageTemplates } from './templates.ts';
import { readTracking, trackingKey, type TrackedLink, type TrackingKind, type TrackingTarget } from './tracking.ts';

/**
 * Transactional sends (SPEC §2.15, §4.8; docs/mail.md): a send is checked and kept, with its job,
 * in one statement and answered at once; the job renders the activity's templates
 * and hands the message to the mailer; the send's status and the activity's events (SENT,
 * BOUNCED, then OPENED, CLICKED and UNSUBSCRIBED through the tracking links) follow.
 */

export const SEND_JOB = 'transactional-send';
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [SEND_JOB]: SendJob;
  }
}

type SendJobRun = Job<typeof SEND_JOB>;

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
interface SendJob {
  transaction_id: string;
  activity_id: string;
  section_id: string;
  keyspace_id: string;
  profile_key: string;
  request: SendRequest;
}

/** What the events of a send name. */
type SendRef = Pick<q.SendRow, 'account_id' | 'transaction_id' | 'activity_id' | 'keyspace_id' | 'profile_key'>;

/** An activity that takes sends: a transactional email activity, not archived; 404 otherwise (TX-13). */
async function transactionalActivity(
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

/** What the send job works with. */
export interface SendDeps {
  pool: pg.Pool;
  mailer: Mailer;
  scopeOf: (accountId: string) => Promise<AccountScope>;
  vendor: string;
  /** The base of tracking links (TRACKING_URL, or the public URL). */
  trackingUrl: string;
  serverSecret: string;
  /** Told the end of each send, once its status is stored (the worker counts them for /metrics). */
  ended?: (status: 'sent' | 'failed' | 'suppressed' | 'bounced') => void;
}

/** The name a template reads an attribute by: the last word of its discriminator, `-` as `_` (`profile.first_name`). */
function templateName(discriminator: string): string {
  return discriminator.slice(discriminator.lastIndexOf('.') + 1).replaceAll('-', '_');
}

/** A profile's attribute values in a section, by template name: the visible attributes, the value of their newest version that has one. */
function profileContext(section: SectionDefs, values: Record<string, unknown>): Record<string, unknown> {
  const profile: Record<string, unknown> = {};
  for (const attribute of section.attributes) {
    if (attribute.hidden) continue;
    const version = [...attribute.versions].reverse().find((v) => values[v.id] !== undefined && values[v.id] !== null);
    if (version) profile[templateName(attribute.discriminator)] = values[version.id];
  }
  return profile;
}

/** Records events of sends of one account through the activities area: the transaction id is their correlation id. */
async function recordEvents(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  events: ({ send: SendRef } & Omit<
    ActivityEventInput,
    'activity_id' | 'keyspace_discriminator' | 'profile_key' | 'correlation_id'
  >)[],
): Promise<void> {
  const inputs: ActivityEventInput[] = [];
  for (const { send, ...event } of events) {
    const keyspace = scope.defs.keyspaces.find((k) => k.keyspace_id === send.keyspace_id);
    // A keyspace removed since the send: the events have no profile to land on.
    if (!keyspace) continue;
    inputs.push({
      ...event,
      activity_id: send.activity_id,
      keyspace_discriminator: keyspace.discriminator,
      profile_key: send.profile_key,
      correlation_id: send.transaction_id,
    });
  }
  if (inputs.length > 0) await recordActivityEvents(tx, scope, vendor, inputs);
}

/** Ends a send that will not be sent: its status and its reason, and its job completed with it (so it is not run again). */
async function endSend(
  deps: SendDeps,
  job: SendJobRun,
  send: SendRef,
  status: 'failed' | 'suppressed' | 'bounced',
  reason: string,
): Promise<'completed'> {
  // The scope before the transaction: a job holds one connection at a time, so that the lanes of the worker cannot wait on each other's.
  const scope = await deps.scopeOf(send.account_id);
  await withTransaction(deps.pool, async (tx) => {
    await q.updateSend(tx, send.account_id, send.transaction_id, { status, reason });
    if (status === 'bounced') await recordEvents(tx, scope, deps.vendor, [{ send, type: 'BOUNCED' }]);
    await completeJobs(tx, [job]);
  });
  deps.ended?.(status);
  return 'completed';
}

/** The tracking key of each job's dependencies, derived once rather than per message. */
const trackingKeys = new WeakMap<SendDeps, Buffer>();

/**
 * The send job (docs/mail.md "Lifecycle"): renders the message and hands it to the mailer. An
 * address suppressed on the email channel or a profile locked since is not sent to (suppressed);
 * a template that fails to render, a 5xx answer, or a 4xx answer still there after the job's last
 * attempt fail the send (a refused recipient: bounced); any other refusal is tried again with the
 * queue's back-off. A sent message records SENT. The job carries the send (the job is there
 * exactly while the send is queued); the activity, the suppression and the profile are read in
 * statements shared with the other sends under way.
 */
export async function runSend(deps: SendDeps, job: SendJobRun): Promise<void | 'completed'> {
  const { payload } = job;
  const send: SendRef = {
    account_id: job.accountId,
    transaction_id: payload.transaction_id,
    activity_id: payload.activity_id,
    keyspace_id: payload.keyspace_id,
    profile_key: payload.profile_key,
  };
  const { request } = payload;
  const scope = await deps.scopeOf(job.accountId);
  const section = scope.defs.sections.find((s) => s.id === payload.section_id);
  const keyspace = scope.defs.keyspaces.find((k) => k.keyspace_id === payload.keyspace_id);
  if (!section || !keyspace)
    return endSend(deps, job, send, 'failed', 'the section or keyspace of the send no longer exists');
  // Three reads at once rather than one after the other: each waits for a turn's statement.
  const [activity, suppressed, values] = await Promise.all([
    transactionalActivity(deps.pool, scope, section, send.activity_id, { shared: true }).catch((err: unknown) => {
      if (err instanceof Problem) return err;
      throw err;
    }),
    isSuppressed(deps.pool, scope, `${namespace(deps.vendor)}.channels.email`, request.to_email_address),
    profileValues(deps.pool, scope, keyspace, section, send.profile_key),
  ]);
  if (activity instanceof Problem)
    return endSend(
      deps,
      job,
      send,
      'failed',
      `the activity is no longer a transactional email activity: ${activity.detail}`,
    );
  if (suppressed) return endSend(deps, job, send, 'suppressed', 'the address is suppressed on the email channel');
  if (values === 'locked') return endSend(deps, job, send, 'suppressed', 'the profile is locked');
  const profile = profileContext(section, values);

  const templates: MessageTemplates = {
    subject: request.subject_line ?? activity.email_subject ?? '',
    preheader: request.pre_header ?? activity.preheader ?? '',
    html: activity.html ?? '',
    text: activity.text ?? null,
  };
  let key = trackingKeys.get(deps);
  if (!key) trackingKeys.set(deps, (key = trackingKey(deps.serverSecret)));
  let composed: Awaited<ReturnType<typeof composeMessage>>;
  try {
    composed = await composeMessage({
      templates,
      variables: request.variables,
      profile,
      from: { name: request.from_name ?? '', address: request.from_email_address! },
      to: { name: request.to_name, address: request.to_email_address },
      ...(request.reply_email_address ? { replyTo: request.reply_email_address } : {}),
      attachments: request.attachments,
      tracking: {
        base: deps.trackingUrl,
        key,
        target: { accountId: send.account_id, transactionId: send.transaction_id },
      },
    });
  } catch (err) {
    return endSend(deps, job, send, 'failed', (err as Error).message);
  }
  try {
    await deps.mailer.send(send.account_id, send.transaction_id, composed.message);
  } catch (err) {
    if (!(err instanceof DeliveryError)) throw err;
    if (!err.permanent && job.attempts < MAX_ATTEMPTS)
      throw new Error(`the mail server did not take the message: ${err.message}; tried again later`);
    return endSend(deps, job, send, err.refused ? 'bounced' : 'failed', `the mail server answered: ${err.message}`);
  }
  await sentRecorder(deps).record({ job, scope, send, links: composed.links, messageId: composed.message.messageId });
  deps.ended?.('sent');
  return 'completed';
}

/**
 * The attribute values of a profile in a section: one read (shared with the other reads of the
 * same turn) when the profile is there; else the profile is created (TX-10), or found locked.
 */
async function profileValues(
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

/** A message the mail server took, to be recorded as sent. */
interface Sent {
  job: SendJobRun;
  scope: AccountScope;
  send: SendRef;
  links: TrackedLink[];
  messageId: string;
}

/**
 * Records sent messages: their sends marked sent, SENT recorded on their activities and their jobs
 * completed, in one transaction for every message that was taken while the previous one ran
 * (a commit, and the statements of recordActivityEvents, for many sends instead of one each).
 * When a batch fails, each of its messages is recorded alone, so that only the one at fault fails.
 */
class SentRecorder {
  private readonly deps: SendDeps;
  private waiting: { sent: Sent; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private running = false;

  constructor(deps: SendDeps) {
    this.deps = deps;
  }

  record(sent: Sent): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ sent, resolve, reject });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, SENT_BATCH);
      try {
        await this.write(batch.map((w) => w.sent));
        for (const w of batch) w.resolve();
      } catch (err) {
        if (batch.length === 1) batch[0].reject(err);
        else for (const w of batch) await this.write([w.sent]).then(w.resolve, w.reject);
      }
    }
    this.running = false;
  }

  private async write(batch: Sent[]): Promise<void> {
    await withTransaction(this.deps.pool, async (tx) => {
      await q.markSendsSent(
        tx,
        batch.map(({ send, links, messageId, scope }) => ({
          accountId: send.account_id,
          transactionId: send.transaction_id,
          links,
          messageId,
          sentAt: scope.now,
        })),
      );
      for (const sends of Map.groupBy(batch, (b) => b.send.account_id).values()) {
        await recordEvents(
          tx,
          sends[0].scope,
          this.deps.vendor,
          sends.map((b) => ({ send: b.send, type: 'SENT' })),
        );
      }
      await completeJobs(
        tx,
        batch.map((b) => b.job),
      );
    });
  }
}

/** Sends recorded in one transaction at most. */
const SENT_BATCH = 200;

const recorders = new WeakMap<SendDeps, SentRecorder>();

function sentRecorder(deps: SendDeps): SentRecorder {
  let recorder = recorders.get(deps);
  if (!recorder) {
    recorder = new SentRecorder(deps);
    recorders.set(deps, recorder);
  }
  return recorder;
}

/** The device class of a user agent, as OPENED and CLICKED events tell it (SPEC §2.16). */
export function deviceOf(userAgent: string | undefined): string {
  if (!userAgent) return 'UNKNOWN';
  if (/smart-?tv|hbbtv|appletv|googletv|crkey|roku/i.test(userAgent)) return 'SMART_TV';
  if (/ipad|tablet|kindle|silk|playbook|android(?!.*mobile)/i.test(userAgent)) return 'TABLET';
  if (/mobi|iphone|ipod|android|blackberry|windows phone/i.test(userAgent)) return 'MOBILE';
  return 'DESKTOP';
}

/** What a tracking link names, read with the server secret; 404 (AUD-2102) for a link this service did not make. */
export function readTrackingLink(serverSecret: string, kind: TrackingKind, token: string): TrackingTarget {
  return readTracking(trackingKey(serverSecret), kind, token);
}

/** The send a tracking link names; 404 when it is gone (its account or activity deleted). */
async function trackedSend(db: Queryable, scope: AccountScope, target: TrackingTarget): Promise<q.SendRow> {
  const send = await q.findSend(db, scope.accountId, target.transactionId);
  if (!send || send.status === 'queued' || send.status === 'failed' || send.status === 'suppressed')
    throw new Problem('AUD-2102', "This link's message was not sent");
  return send;
}

/** The open pixel was loaded: OPENED, once per send (the activities area keeps events once per correlation id). */
export async function trackOpen(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
  userAgent: string | undefined,
): Promise<void> {
  await recordEvents(tx, scope, vendor, [
    { send: await trackedSend(tx, scope, target), type: 'OPENED', device: deviceOf(userAgent) },
  ]);
}

/** A click link was followed: CLICKED, once per send, and the address of the link the message held there. */
export async function trackClick(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
  userAgent: string | undefined,
): Promise<string> {
  const send = await trackedSend(tx, scope, target);
  const link = send.links[target.link ?? -1];
  if (!link) throw new Problem('AUD-2102', 'This click link names no link of its message');
  await recordEvents(tx, scope, vendor, [
    {
      send,
      type: 'CLICKED',
      device: deviceOf(userAgent),
      link_id: String(target.link),
      link_url: link.url,
      link_title: link.title,
    },
  ]);
  return link.url;
}

/**
 * The unsubscribe link or the one-click unsubscribe (RFC 8058): the address the message went to
 * is suppressed on the email channel, so that nothing more is sent to it, and UNSUBSCRIBED is
 * recorded once.
 */
export async function unsubscribe(
  tx: Queryable,
  scope: AccountScope,
  vendor: string,
  target: TrackingTarget,
): Promise<void> {
  const send = await trackedSend(tx, scope, target);
  await addSuppression(tx, scope, {
    channel_discriminator: `${namespace(vendor)}.channels.email`,
    address: send.to_address,
    reason: `Unsubscribed from transactional activity ${send.activity_id}`,
  });
  await recordEvents(tx, scope, vendor, [{ send, type: 'UNSUBSCRIBED' }]);
}

/** Erases the sends and the outbox of an account being deleted. */
export async function forgetAccountMail(tx: Queryable, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
}

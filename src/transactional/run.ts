import { isSuppressed } from '../consents/consents.ts';
import type { SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { namespace } from '../definitions/builtins.ts';
import { completeJobs, MAX_ATTEMPTS } from '../jobs/queue.ts';
import { withTransaction } from '../store/pool.ts';
import { DeliveryError, type Mailer } from './mailer.ts';
import { composeMessage } from './message.ts';
import * as q from './queries.ts';
import { recordEvents, sentRecorder, type RecordDeps, type SendRef } from './recording.ts';
import { profileValues, transactionalActivity, type SendJobRun } from './sends.ts';
import type { MessageTemplates } from './templates.ts';
import { trackingKey } from './tracking.ts';

/**
 * The send job's run (docs/mail.md "Lifecycle and statuses"): a send's message rendered and handed to the
 * mailer, or the send ended without it.
 */

/** What the send job works with. */
export interface SendDeps extends RecordDeps {
  mailer: Mailer;
  scopeOf: (accountId: string) => Promise<AccountScope>;
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

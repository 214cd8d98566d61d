import type { Queryable } from '../store/pool.ts';
import type { SendStatus } from './schemas.ts';
import type { TrackedLink } from './tracking.ts';

/** A message of the outbox, without its source. */
export interface OutboxRow {
  message_id: string;
  transaction_id: string | null;
  created_at: Date;
  sender: string;
  recipients: string[];
  subject: string;
  size: number;
}

const OUTBOX_FIELDS =
  'message_id::text, transaction_id::text, created_at, sender, recipients, subject, octet_length(source) as size';

export async function insertOutboxMessage(
  db: Queryable,
  accountId: string,
  m: { transactionId: string; sender: string; recipients: string[]; subject: string; source: Buffer },
): Promise<string> {
  const { rows } = await db.query<{ message_id: string }>(
    `insert into transactional_outbox (account_id, transaction_id, sender, recipients, subject, source)
     values ($1::bigint, $2::uuid, $3, $4::text[], $5, $6) returning message_id::text`,
    [accountId, m.transactionId, m.sender, m.recipients, m.subject, m.source],
  );
  return rows[0].message_id;
}

/** The newest messages first. */
export async function listOutboxMessages(db: Queryable, accountId: string, limit: number): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `select ${OUTBOX_FIELDS} from transactional_outbox where account_id = $1::bigint order by message_id desc limit $2`,
    [accountId, limit],
  );
  return rows;
}

export async function findOutboxMessage(
  db: Queryable,
  accountId: string,
  messageId: string,
): Promise<(OutboxRow & { source: Buffer }) | undefined> {
  const { rows } = await db.query<OutboxRow & { source: Buffer }>(
    `select ${OUTBOX_FIELDS}, source from transactional_outbox where account_id = $1::bigint and message_id = $2::bigint`,
    [accountId, messageId],
  );
  return rows[0];
}

export async function deleteOutboxMessages(db: Queryable, accountId: string): Promise<number> {
  const { rowCount } = await db.query('delete from transactional_outbox where account_id = $1::bigint', [accountId]);
  return rowCount ?? 0;
}

/** A send as its job, its status route and its tracking links read it. */
export interface SendRow {
  account_id: string;
  transaction_id: string;
  activity_id: string;
  section_id: string;
  keyspace_id: string;
  profile_key: string;
  to_address: string;
  status: SendStatus;
  status_reason: string | null;
  links: TrackedLink[];
}

/** A send as it is kept when accepted: what it was made of goes in its job (docs/mail.md "Lifecycle"). */
export interface NewSend extends Omit<SendRow, 'links'> {
  created_at: Date;
}

/** The insert of accepted sends, as a statement (for enqueueWith, which writes their jobs with it); answers nothing of its own. */
export function insertSends(sends: NewSend[]): { text: string; values: unknown[] } {
  return {
    text: `insert into transactional_sends (account_id, transaction_id, activity_id, section_id, keyspace_id, profile_key, to_address, status, status_reason, created_at)
     select * from json_to_recordset($1::json) as s(account_id bigint, transaction_id uuid, activity_id text, section_id bigint, keyspace_id bigint,
       profile_key text, to_address text, status text, status_reason text, created_at timestamptz)
     returning transaction_id`,
    values: [JSON.stringify(sends)],
  };
}

export async function findSend(db: Queryable, accountId: string, transactionId: string): Promise<SendRow | undefined> {
  const { rows } = await db.query<SendRow>(
    `select account_id::text, transaction_id::text, activity_id, section_id::text, keyspace_id::text, profile_key, to_address, status, status_reason, links
     from transactional_sends where account_id = $1::bigint and transaction_id = $2::uuid`,
    [accountId, transactionId],
  );
  return rows[0];
}

/** A send as the list of an activity's sends shows it. */
export interface SendListRow {
  transaction_id: string;
  profile_key: string;
  to_address: string;
  status: SendStatus;
  status_reason: string | null;
  created_at: Date;
  sent_at: Date | null;
}

/** The newest sends of an activity. */
export async function listSendsByActivity(
  db: Queryable,
  accountId: string,
  activityId: string,
  limit: number,
): Promise<SendListRow[]> {
  const { rows } = await db.query<SendListRow>(
    `select transaction_id::text, profile_key, to_address, status, status_reason, created_at, sent_at
     from transactional_sends where account_id = $1::bigint and activity_id = $2
     order by created_at desc, transaction_id limit $3`,
    [accountId, activityId, limit],
  );
  return rows;
}

/** Ends a send unsent, with the reason (its job, which held what it was made of, is completed with it). */
export async function updateSend(
  db: Queryable,
  accountId: string,
  transactionId: string,
  s: { status: SendStatus; reason: string },
): Promise<void> {
  await db.query(
    'update transactional_sends set status = $3, status_reason = $4 where account_id = $1::bigint and transaction_id = $2::uuid',
    [accountId, transactionId, s.status, s.reason],
  );
}

/**
 * Sends the mail server took: their links and message ids are kept (what they were made of goes
 * with their jobs). One statement per account, so that each runs on the account's node of a cluster.
 */
export async function markSendsSent(
  db: Queryable,
  sends: { accountId: string; transactionId: string; links: TrackedLink[]; messageId: string; sentAt: Date }[],
): Promise<void> {
  const byAccount = Map.groupBy(sends, (m) => m.accountId);
  for (const [accountId, ofAccount] of byAccount) {
    await db.query(
      `update transactional_sends s set status = 'sent', links = m.links, message_id = m.message_id, sent_at = m.sent_at
       from json_to_recordset($2::json) as m(transaction_id uuid, links jsonb, message_id text, sent_at timestamptz)
       where s.account_id = $1::bigint and s.transaction_id = m.transaction_id`,
      [
        accountId,
        JSON.stringify(
          ofAccount.map((m) => ({
            transaction_id: m.transactionId,
            links: m.links,
            message_id: m.messageId,
            sent_at: m.sentAt,
          })),
        ),
      ],
    );
  }
}

/** Erases the sends and the outbox of a deleted account. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from transactional_sends where account_id = $1::bigint', [accountId]);
  await db.query('delete from transactional_outbox where account_id = $1::bigint', [accountId]);
}

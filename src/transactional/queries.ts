import type { Queryable } from '../store/pool.ts';

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

const OUTBOX_FIELDS = 'message_id::text, transaction_id::text, created_at, sender, recipients, subject, octet_length(source) as size';

export async function insertOutboxMessage(db: Queryable, accountId: string, m: { transactionId: string; sender: string; recipients: string[]; subject: string; source: Buffer }): Promise<string> {
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

export async function findOutboxMessage(db: Queryable, accountId: string, messageId: string): Promise<(OutboxRow & { source: Buffer }) | undefined> {
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

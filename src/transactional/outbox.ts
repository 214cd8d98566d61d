import { Problem } from '../core/problems.ts';
import type { Queryable } from '../store/pool.ts';
import * as q from './queries.ts';

/**
 * The built-in outbox (docs/mail.md "The outbox"): where messages go when no SMTP server is
 * configured, read by the operator like a local mail catcher.
 */

/** The account's newest messages first, without their source. */
export function listOutbox(db: Queryable, accountId: string, limit: number): Promise<q.OutboxRow[]> {
  return q.listOutboxMessages(db, accountId, limit);
}

/**
 * One message with its source as it would have gone over SMTP, and its HTML and text parts decoded
 * (for the console, which shows the HTML in a sandboxed frame); 404 (AUD-2103) when the outbox does not hold it.
 */
export async function readOutboxMessage(
  db: Queryable,
  accountId: string,
  messageId: string,
): Promise<q.OutboxRow & { source: string; html: string | null; text: string | null }> {
  const row = await q.findOutboxMessage(db, accountId, messageId);
  if (!row) throw new Problem('AUD-2103', `The outbox of account ${accountId} holds no message ${messageId}`);
  // Loaded here, not at the start: mailparser and what it brings took 0.2 s of every start's CPU.
  const { simpleParser } = await import('mailparser');
  const parsed = await simpleParser(row.source, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
  // nodemailer writes 7-bit text (quoted-printable and base64 parts), so the source reads as text.
  return { ...row, source: row.source.toString('utf8'), html: parsed.html || null, text: parsed.text ?? null };
}

/** Empties the account's outbox; answers how many messages it held. */
export function emptyOutbox(db: Queryable, accountId: string): Promise<number> {
  return q.deleteOutboxMessages(db, accountId);
}

/** A message of the outbox as a test reads it: its parts decoded and the links it holds. */
export interface ReadMessage extends q.OutboxRow {
  from: string;
  to: string[];
  text: string | null;
  html: string | null;
  /** Every http(s) link of the message, in order of appearance, once each: tracking links of clicks, the unsubscribe link, the open pixel. */
  links: string[];
  /** The link of its List-Unsubscribe header. */
  unsubscribe: string | null;
}

/**
 * The account's newest messages, decoded (the emulator's mail: docs/emulator.md "Mail"). Parsed
 * with mailparser, loaded when a message is read, as nodemailer writes quoted-printable and base64 parts.
 */
export async function readOutbox(db: Queryable, accountId: string, limit: number): Promise<ReadMessage[]> {
  const { simpleParser } = await import('mailparser');
  const rows = await q.listOutboxMessages(db, accountId, limit);
  return Promise.all(
    rows.map(async (row) => {
      const { source } = (await q.findOutboxMessage(db, accountId, row.message_id))!;
      const parsed = await simpleParser(source);
      const html = typeof parsed.html === 'string' ? parsed.html : null;
      const text = parsed.text ?? null;
      const links = [
        ...new Set(
          [...`${html ?? ''}\n${text ?? ''}`.matchAll(/https?:\/\/[^\s"'<>]+/g)].map((m) =>
            m[0].replaceAll('&amp;', '&'),
          ),
        ),
      ];
      const header = parsed.headerLines.find((h) => h.key === 'list-unsubscribe');
      const unsubscribe = /<(https?:[^>]+)>/.exec(header?.line ?? '');
      return {
        ...row,
        from: parsed.from?.text ?? row.sender,
        to: row.recipients,
        text,
        html,
        links,
        unsubscribe: unsubscribe?.[1] ?? null,
      };
    }),
  );
}

import type { Transporter } from 'nodemailer';
import type { OutboundTap } from '../outbound/recorder.ts';
import type { Queryable } from '../store/pool.ts';
import * as q from './queries.ts';

/**
 * Where messages go (docs/mail.md "Delivery"): an SMTP server (SMTP_URL) through nodemailer's
 * pooled transport, or, without one, the built-in outbox, which keeps each message whole in the
 * database for the operator to read. Both build the message the same way, DKIM-signed when a key
 * is configured, so the outbox shows exactly what would have gone out.
 */

export interface Address {
  name: string;
  address: string;
}

/** A message ready to go: rendered, its links tracked. */
export interface OutgoingMessage {
  /** `<…@…>`: names the send in bounce reports. */
  messageId: string;
  from: Address;
  to: Address;
  replyTo?: string;
  subject: string;
  html: string;
  text: string;
  headers: Record<string, string>;
  attachments: { filename: string; contentType: string; content: Buffer }[];
}

/** A DKIM signing key (RFC 6376) and where its public half is published: `<selector>._domainkey.<domain>`. */
export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

export interface MailerOptions {
  /** Unset: the outbox. */
  smtpUrl?: string;
  dkim?: DkimKey;
}

/**
 * A message the server did not take. `permanent`: it answered 5xx, and sending it again would be
 * refused again; else (4xx, no answer, a lost connection) a later attempt may pass. `refused`:
 * the server refused the recipient (a bounce), not the message.
 */
export class DeliveryError extends Error {
  readonly permanent: boolean;
  readonly refused: boolean;
  constructor(message: string, permanent: boolean, refused: boolean) {
    super(message);
    this.permanent = permanent;
    this.refused = refused;
  }
}

export interface Mailer {
  readonly kind: 'smtp' | 'outbox';
  /** Sends one message; answers the server's reply, or throws a DeliveryError. */
  send(accountId: string, transactionId: string, message: OutgoingMessage): Promise<{ response: string }>;
  close(): Promise<void>;
}

/** SMTP connections kept open at once, unless SMTP_URL's `maxConnections` says otherwise. */
const POOL_SIZE = 5;

/** nodemailer's options of a message. */
function mailOf(message: OutgoingMessage) {
  return {
    messageId: message.messageId,
    from: message.from,
    to: message.to,
    ...(message.replyTo ? { replyTo: message.replyTo } : {}),
    subject: message.subject,
    html: message.html,
    text: message.text,
    headers: message.headers,
    attachments: message.attachments,
  };
}

/** Something that looks like an email address, within angle brackets or not. */
const ADDRESS = /[^\s<>@"]+@[^\s<>"]+/g;

/** nodemailer's error in our terms; anything without an SMTP answer may pass on a later attempt. */
function deliveryError(err: unknown): DeliveryError {
  const e = err as {
    message?: string;
    response?: string;
    responseCode?: number;
    permanent?: boolean;
    rejected?: string[];
  };
  const permanent = e.permanent ?? (e.responseCode !== undefined && e.responseCode >= 500);
  // The answer alone, without the addresses in it: nodemailer's message repeats the refused
  // address, and so do mail servers' answers (Postfix: `450 4.1.1 <ann@example.com>: Recipient
  // address rejected`), which the job's error, and so the log, must not carry.
  const reason = (e.response ?? e.message ?? String(err)).replace(ADDRESS, '[address]');
  return new DeliveryError(reason, permanent, (e.rejected?.length ?? 0) > 0);
}

/**
 * The mailer of a process: SMTP when `smtpUrl` is set, else the outbox in `db`. nodemailer is
 * loaded on the first message. `tap`: every message is recorded as an outbound call of kind
 * `mail`, and a fault may answer in the server's place (the emulator's, src/outbound/recorder.ts).
 */
export function openMailer(options: MailerOptions, db: Queryable, tap?: OutboundTap): Mailer {
  const mailer = openUntapped(options, db);
  if (!tap) return mailer;
  return {
    kind: mailer.kind,
    send: (accountId, transactionId, message) =>
      tap.call(
        {
          kind: 'mail',
          method: 'SEND',
          target: message.to.address,
          body: {
            from: message.from,
            to: message.to,
            ...(message.replyTo ? { reply_to: message.replyTo } : {}),
            subject: message.subject,
            text: message.text,
            html: message.html,
          },
        },
        {
          deliver: () => mailer.send(accountId, transactionId, message),
          answerOf: (r) => ({ status: 250, body: r.response }),
          faulted: (outcome) => {
            if ('refused' in outcome)
              throw new DeliveryError(
                `the mail server refused the connection (the emulator's fault ${outcome.fault})`,
                false,
                false,
              );
            if (outcome.status < 400) return { response: `${outcome.status} (the emulator's fault ${outcome.fault})` };
            throw new DeliveryError(
              `${outcome.status} (the emulator's fault ${outcome.fault})`,
              outcome.status >= 500,
              false,
            );
          },
        },
      ),
    close: () => mailer.close(),
  };
}

function openUntapped(options: MailerOptions, db: Queryable): Mailer {
  let transporter: Promise<Transporter> | undefined;
  const transport = () => {
    transporter ??= import('nodemailer').then(({ default: nodemailer }) => {
      const dkim = options.dkim ? { dkim: options.dkim } : {};
      if (!options.smtpUrl) return nodemailer.createTransport({ streamTransport: true, buffer: true, ...dkim });
      // Options the URL gives (tls.*, requireTLS, maxConnections …) win over these.
      return nodemailer.createTransport({ url: options.smtpUrl, pool: true, maxConnections: POOL_SIZE, ...dkim });
    });
    return transporter;
  };
  if (!options.smtpUrl) {
    return {
      kind: 'outbox',
      async send(accountId, transactionId, message) {
        const info = await (await transport()).sendMail(mailOf(message));
        const id = await q.insertOutboxMessage(db, accountId, {
          transactionId,
          sender: message.from.address,
          recipients: [message.to.address],
          subject: message.subject,
          source: info.message as Buffer,
        });
        return { response: `kept in the outbox as message ${id}` };
      },
      async close() {},
    };
  }
  return {
    kind: 'smtp',
    async send(_accountId, _transactionId, message) {
      try {
        const info = await (await transport()).sendMail(mailOf(message));
        return { response: String(info.response ?? '') };
      } catch (err) {
        throw deliveryError(err);
      }
    },
    async close() {
      if (transporter) (await transporter).close();
    },
  };
}

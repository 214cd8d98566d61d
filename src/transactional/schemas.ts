import { Type, type Static } from 'typebox';
import { ActivityEventView } from '../activities/schemas.ts';
import { DateTime } from '../core/schemas.ts';

/** SPEC §8: the variables of a send, names and values, in all. */
export const VARIABLES_LIMIT = 200 * 1024;
/** SPEC §8: attachments of a send. */
export const ATTACHMENTS_LIMIT = 5;
/** SPEC §8: the attachments' content in all (decoded). */
export const ATTACHMENTS_SIZE_LIMIT = 2 * 1024 * 1024;
/**
 * The body limit of a send (TX-08): five attachments of 2 MB in all as base64 (4/3 of it), the
 * variables and the other fields; above the general 100 KB. What is over the limits of SPEC §8
 * but under this one is read and answered with the limit it is over.
 */
export const SEND_BODY_LIMIT = 4 * 1024 * 1024;

const Email = (description: string) => Type.String({ format: 'email', description });

/** The body of a transactional send (SPEC §4.8). */
export const SendBody = Type.Object(
  {
    keyspace_discriminator: Type.String({
      description: 'The keyspace of profile_key: the profile that gets the events (created when missing)',
    }),
    profile_key: Type.String({ description: "The profile's key in the keyspace" }),
    to_name: Type.String({ description: "The recipient's name" }),
    to_email_address: Email("The recipient's address"),
    from_name: Type.Optional(Type.String({ description: "The sender's name; the activity's when omitted" })),
    from_email_address: Type.Optional(Email("The sender's address; the activity's when omitted")),
    reply_email_address: Type.Optional(Email("The reply-to address; the activity's when omitted")),
    subject_line: Type.Optional(Type.String({ description: "The subject (a template); the activity's when omitted" })),
    pre_header: Type.Optional(Type.String({ description: "The pre-header (a template); the activity's when omitted" })),
    variables: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description: 'Values the templates read by name; names and values up to 200 KB in all',
      }),
    ),
    attachments: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ minLength: 1, description: 'The file name' }),
            content_type: Type.String({ minLength: 1, description: 'The media type, such as application/pdf' }),
            content: Type.String({ description: 'The content, base64' }),
          },
          { additionalProperties: false },
        ),
        { description: 'At most 5, up to 2 MB in all' },
      ),
    ),
  },
  { additionalProperties: false },
);
export type SendBody = Static<typeof SendBody>;

export const SendParams = Type.Object({
  section_discriminator: Type.String(),
  activity_id: Type.String({ description: 'A transactional email activity of the section' }),
});
export const TransactionParams = Type.Object({
  section_discriminator: Type.String(),
  activity_id: Type.String(),
  transaction_id: Type.String({ description: 'The id a send answered' }),
});

export const SEND_STATUSES = ['queued', 'sent', 'delivered', 'bounced', 'failed', 'suppressed'] as const;
export type SendStatus = (typeof SEND_STATUSES)[number];

export const Transaction = Type.Object({ id: Type.String({ description: "The send's id" }) });
export const TransactionStatus = Type.Object({
  id: Type.String(),
  status: Type.Union(
    SEND_STATUSES.map((s) => Type.Literal(s)),
    {
      description:
        'queued (accepted, not sent yet), sent (the mail server took it), delivered, bounced, failed (not sent: the server refused it or could not be reached in time), suppressed (not sent: the address is suppressed or the profile locked)',
    },
  ),
});

export const TrackingParams = Type.Object({ token: Type.String({ description: 'The signed token of the link' }) });

export const OutboxQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'At most this many, newest first' }),
  },
  { additionalProperties: false },
);
export const OutboxMessageParams = Type.Object({
  account_id: Type.String({ pattern: '^[0-9]{1,18}$', description: 'Account id' }),
  message_id: Type.String({ pattern: '^[0-9]{1,18}$', description: 'Message id in the outbox' }),
});
export const OutboxMessage = Type.Object({
  message_id: Type.String(),
  transaction_id: Type.Union([Type.String(), Type.Null()], { description: 'The send the message is of' }),
  created_at: DateTime,
  sender: Type.String({ description: 'The envelope sender' }),
  recipients: Type.Array(Type.String(), { description: 'The envelope recipients' }),
  subject: Type.String(),
  size: Type.Integer({ description: 'Bytes of the source' }),
  source: Type.String({ description: 'The message as it would have gone over SMTP (RFC 5322)' }),
  html: Type.Union([Type.String(), Type.Null()], { description: 'Its HTML part, decoded; null when it has none' }),
  text: Type.Union([Type.String(), Type.Null()], { description: 'Its text part, decoded; null when it has none' }),
});

export const SendListParams = Type.Object({
  section_discriminator: Type.String(),
  activity_id: Type.String({ description: 'A transactional email activity' }),
});

export const SendListQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 500, default: 50, description: 'At most this many, newest first' }) },
  { additionalProperties: false },
);

export const SendList = Type.Object({
  items: Type.Array(
    Type.Object({
      ...TransactionStatus.properties,
      status_reason: Type.Optional(Type.String({ description: 'Why it ended failed, bounced or suppressed' })),
      profile_key: Type.String(),
      to_address: Type.String(),
      created_at: DateTime,
      sent_at: Type.Union([DateTime, Type.Null()]),
      events: Type.Array(ActivityEventView, { description: 'The events recorded of it, oldest first' }),
    }),
    { description: 'Sends of the activity, newest first' },
  ),
});

import { Type, type Static } from 'typebox';
import { DateTime } from '../core/schemas.ts';

/** The five kinds of activities (SPEC §2.14), named as the paths of their routes name them. */
export const ACTIVITY_KINDS = ['email', 'sms', 'website', 'marketing-automation', 'forms-and-pages'] as const;
export type ActivityKindName = (typeof ACTIVITY_KINDS)[number];

/** Status values: the three SPEC §2.14 names, and the ones before and between them (docs/activities.md). */
export const ACTIVITY_STATUSES = ['draft', 'scheduled', 'active', 'paused', 'sent', 'finished'] as const;
export type ActivityStatus = (typeof ACTIVITY_STATUSES)[number];

/** Activity ids are strings of one kind across the five kinds (ACT-17): chosen by the operator, or numbers the service gives. */
export const ActivityId = Type.String({
  pattern: '^[A-Za-z0-9_-]{1,100}$',
  description: 'Activity id: letters, digits, _ and -, up to 100',
});

export const FormElement = Type.Object(
  {
    type: Type.String({ minLength: 1, description: 'Element type, e.g. input_field' }),
    id: Type.String(),
    name: Type.String(),
    required: Type.Boolean(),
    placeholder: Type.String(),
    confirm_placeholder: Type.String(),
    confirm: Type.Boolean(),
  },
  { additionalProperties: false, title: 'FormElement' },
);
export type FormElement = Static<typeof FormElement>;

const Email = Type.String({ format: 'email' });

/** An activity as the operator writes it (operator API, CLI, manifest). Kind-specific fields are refused on other kinds. */
export const ActivityInput = Type.Object(
  {
    kind: Type.Enum(ACTIVITY_KINDS, { description: 'Cannot change once created' }),
    section_discriminator: Type.String({
      description: 'The section the activity belongs to; cannot change once created',
    }),
    name: Type.String({ minLength: 1 }),
    status: Type.Optional(Type.Enum(ACTIVITY_STATUSES, { description: 'draft when omitted' })),
    created_at: Type.Optional(DateTime),
    sent_at: Type.Optional(Type.Union([DateTime, Type.Null()])),
    archived: Type.Optional(
      Type.Boolean({ description: 'An archived activity leaves the public routes and takes no events' }),
    ),
    // Email.
    email_subject: Type.Optional(Type.String()),
    sender_name: Type.Optional(Type.String()),
    sender_email_address: Type.Optional(Email),
    reply_to: Type.Optional(Email),
    preheader: Type.Optional(Type.String()),
    html: Type.Optional(Type.String({ description: 'The HTML body' })),
    text: Type.Optional(Type.String({ description: 'The plain-text body' })),
    transactional: Type.Optional(
      Type.Boolean({ description: 'A transactional email, sent one at a time through the transactional routes' }),
    ),
    // Marketing automation.
    description: Type.Optional(Type.String()),
    trigger_type: Type.Optional(
      Type.Union([Type.Literal('api'), Type.Literal('other')], {
        description: 'How the automation starts: through the API, or otherwise',
      }),
    ),
    // Forms and pages.
    form_type: Type.Optional(
      Type.Union([Type.Literal('form'), Type.Literal('page')], {
        description: 'form (the default) or page; only forms have aql_queries',
      }),
    ),
    elements: Type.Optional(
      Type.Array(FormElement, { description: 'Present once the form is saved as draft or published' }),
    ),
  },
  { additionalProperties: false },
);
export type ActivityInput = Static<typeof ActivityInput>;

/** A whole activity, as the operator API answers it and other areas read it (getActivity). */
export const Activity = Type.Object(
  {
    id: Type.String(),
    kind: Type.Enum(ACTIVITY_KINDS),
    section_discriminator: Type.String(),
    name: Type.String(),
    status: Type.Enum(ACTIVITY_STATUSES),
    created_at: DateTime,
    sent_at: Type.Union([DateTime, Type.Null()]),
    archived_at: Type.Union([DateTime, Type.Null()]),
    email_subject: Type.Optional(Type.String()),
    sender_name: Type.Optional(Type.String()),
    sender_email_address: Type.Optional(Type.String()),
    reply_to: Type.Optional(Type.String()),
    preheader: Type.Optional(Type.String()),
    html: Type.Optional(Type.String()),
    text: Type.Optional(Type.String()),
    transactional: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String()),
    trigger_type: Type.Optional(Type.Union([Type.Literal('api'), Type.Literal('other')])),
    form_type: Type.Optional(Type.Union([Type.Literal('form'), Type.Literal('page')])),
    elements: Type.Optional(Type.Array(FormElement)),
  },
  { title: 'Activity' },
);
export type Activity = Static<typeof Activity>;

// ---- Events (SPEC §2.16, §6) ----

export const EMAIL_EVENT_TYPES = [
  'SENT',
  'DELIVERED',
  'OPENED',
  'CLICKED',
  'BOUNCED',
  'UNSUBSCRIBED',
  'ABUSE',
] as const;
export const SMS_EVENT_TYPES = ['SENT', 'DELIVERED', 'CLICKED', 'BOUNCED', 'UNSUBSCRIBED'] as const;
export const FORM_EVENT_TYPES = ['VIEWED', 'STARTED', 'REJECTED', 'SUBMITTED'] as const;
export const EVENT_TYPES = [...EMAIL_EVENT_TYPES, ...FORM_EVENT_TYPES] as const;
export type ActivityEventType = (typeof EVENT_TYPES)[number];

/** One event of an activity, as a source (an email service, the transactional mail area) reports it. */
export const ActivityEventInput = Type.Object(
  {
    activity_id: ActivityId,
    type: Type.Enum(EVENT_TYPES),
    keyspace_discriminator: Type.String({ description: 'The keyspace of profile_key' }),
    profile_key: Type.String({ minLength: 1 }),
    correlation_id: Type.String({
      minLength: 1,
      maxLength: 200,
      description: 'Source-assigned; an event of the same activity, type and correlation id is recorded once',
    }),
    event_time: Type.Optional(
      Type.String({ format: 'date-time', description: 'The source time; the server time when omitted' }),
    ),
    split_id: Type.Optional(Type.String({ description: 'Email: the sub-activity of a split sending' })),
    variation: Type.Optional(Type.String({ description: 'Email: the split test group' })),
    device: Type.Optional(Type.String({ description: 'OPENED, CLICKED: TABLET, MOBILE, DESKTOP, SMART_TV, UNKNOWN' })),
    location: Type.Optional(Type.String({ description: 'OPENED, CLICKED: ISO 3166-1 alpha-2 country code' })),
    link_id: Type.Optional(Type.String({ description: 'CLICKED' })),
    link_url: Type.Optional(Type.String({ description: 'CLICKED' })),
    link_title: Type.Optional(Type.String({ description: 'CLICKED' })),
    bounce_code: Type.Optional(
      Type.Integer({
        minimum: 1000,
        maximum: 9999,
        description:
          'BOUNCED: 1000-1999 rejected, 2000-2999 invalid address, 3000-3999 temporarily unavailable, 4000-4999 technical, 5000-5999 informational, 9999 unknown',
      }),
    ),
    unsubscribe_topic: Type.Optional(
      Type.String({
        description: "UNSUBSCRIBED: a topic of the activity's section, which the profile is opted out of",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ActivityEventInput = Static<typeof ActivityEventInput>;

/** The ingestion body: at most this many events a request. */
export const EVENTS_PER_REQUEST = 100_000;
export const ActivityEventBatch = Type.Object(
  {
    items: Type.Array(ActivityEventInput, { maxItems: EVENTS_PER_REQUEST }),
  },
  { additionalProperties: false },
);

export const IngestionResult = Type.Object({
  received: Type.Integer({ description: 'Events in the request' }),
  recorded: Type.Integer({ description: 'Events recorded now' }),
  duplicates: Type.Integer({
    description: 'Events recorded before (same activity, type and correlation id), or twice in the request',
  }),
  skipped: Type.Array(Type.Object({ item: Type.Integer(), reason: Type.String() }), {
    description: 'Events not recorded: their profile is locked, or was deleted while the batch was recorded',
  }),
});
export type IngestionResult = Static<typeof IngestionResult>;

// ---- Public views (SPEC §2.14, §4.8) ----

const Rate = (what: string) => Type.Number({ description: `${what}, a fraction from 0 to 1 (docs/activities.md)` });
const Count = (what: string) => Type.Integer({ description: what });

export const EmailStatistics = Type.Object({
  sent: Count('Profiles sent to'),
  delivered: Count('Profiles delivered to'),
  delivery_rate: Rate('delivered / sent'),
  opens: Count('Opens'),
  unique_opens: Count('Profiles that opened'),
  open_rate: Rate('unique_opens / delivered'),
  clicks: Count('Clicks'),
  unique_clicks: Count('Profiles that clicked'),
  click_rate: Rate('unique_clicks / delivered'),
  click_to_open_rate: Rate('unique_clicks / unique_opens'),
  bounces: Count('Profiles bounced'),
  bounce_rate: Rate('bounces / sent'),
  unsubscribes: Count('Profiles that unsubscribed'),
  unsubscribe_rate: Rate('unsubscribes / delivered'),
  spam_complaints: Count('Profiles that complained'),
  spam_complaint_rate: Rate('spam_complaints / delivered'),
});
export const SmsStatistics = Type.Object({
  sent: Count('Profiles sent to'),
  delivered: Count('Profiles delivered to'),
  delivery_rate: Rate('delivered / sent'),
  clicks: Count('Profiles that clicked'),
  click_rate: Rate('clicks / delivered'),
  bounces: Count('Profiles bounced'),
  bounce_rate: Rate('bounces / sent'),
  unsubscribes: Count('Profiles that unsubscribed'),
  unsubscribe_rate: Rate('unsubscribes / delivered'),
});
export type EmailStatistics = Static<typeof EmailStatistics>;
export type SmsStatistics = Static<typeof SmsStatistics>;

const aqlOf = (keys: readonly string[]) =>
  Type.Object(
    Object.fromEntries(keys.map((k) => [k, Type.String({ description: 'AQL selecting the profiles counted' })])),
  );
export const EMAIL_AQL_KEYS = {
  sent: 'SENT',
  delivered: 'DELIVERED',
  opens: 'OPENED',
  clicks: 'CLICKED',
  bounces: 'BOUNCED',
  spam_complaints: 'ABUSE',
  unsubscribes: 'UNSUBSCRIBED',
} as const;
export const SMS_AQL_KEYS = {
  sent: 'SENT',
  delivered: 'DELIVERED',
  clicks: 'CLICKED',
  bounces: 'BOUNCED',
  unsubscribes: 'UNSUBSCRIBED',
} as const;
export const FORM_AQL_KEYS = {
  viewed: 'VIEWED',
  started: 'STARTED',
  rejected: 'REJECTED',
  submitted: 'SUBMITTED',
} as const;

const Common = {
  id: Type.String({ description: 'Activity id' }),
  name: Type.String(),
  status: Type.String(),
  created_at: DateTime,
};
const SentAt = Type.Union([DateTime, Type.Null()], { description: 'null until sent' });

export const EmailActivityItem = Type.Object({
  ...Common,
  sent_at: SentAt,
  email_subject: Type.String(),
  statistics: Type.Optional(EmailStatistics),
});
export const EmailActivity = Type.Object({
  ...EmailActivityItem.properties,
  aql_queries: aqlOf(Object.keys(EMAIL_AQL_KEYS)),
});
export const SmsActivityItem = Type.Object({ ...Common, statistics: Type.Optional(SmsStatistics) });
export const SmsActivity = Type.Object({
  ...SmsActivityItem.properties,
  aql_queries: aqlOf(Object.keys(SMS_AQL_KEYS)),
});
export const WebsiteActivity = Type.Object(Common);
export const AutomationActivity = Type.Object({ ...Common, description: Type.String() });
export const FormActivityItem = Type.Object(Common);
export const FormActivity = Type.Object({
  ...Common,
  elements: Type.Optional(Type.Array(FormElement)),
  aql_queries: Type.Optional(aqlOf(Object.keys(FORM_AQL_KEYS))),
});

export const TimelineQuery = Type.Object(
  {
    unit: Type.Union([Type.Literal('hour'), Type.Literal('day')], {
      default: 'day',
      description: 'The length of each point, in UTC',
    }),
    points: Type.Integer({ minimum: 1, maximum: 366, default: 30, description: 'How many, the last holding now' }),
  },
  { additionalProperties: false },
);

export const Timeline = Type.Object({
  unit: Type.String(),
  points: Type.Array(
    Type.Object({
      at: DateTime,
      events: Type.Record(Type.String(), Type.Integer(), {
        description: "Events by type in the hour or day from `at` (every type of the activity's kind, 0 when none)",
      }),
    }),
  ),
});

export const ActivityEventView = Type.Object({
  type: Type.String(),
  correlation_id: Type.String({ description: 'The message the event is of (a transactional send: its id)' }),
  event_time: DateTime,
  device: Type.Optional(Type.String()),
  location: Type.Optional(Type.String()),
  link_url: Type.Optional(Type.String()),
  bounce_code: Type.Optional(Type.Integer()),
  unsubscribe_topic: Type.Optional(Type.String()),
});

export const ActivityEventsQuery = Type.Object(
  {
    correlation_id: Type.Optional(Type.String({ description: "Only this message's events" })),
    limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100, description: 'At most this many, newest first' }),
  },
  { additionalProperties: false },
);

import type { ActivityChannel } from '../definitions/builtins.ts';
import {
  EMAIL_AQL_KEYS,
  EMAIL_EVENT_TYPES,
  FORM_AQL_KEYS,
  FORM_EVENT_TYPES,
  SMS_AQL_KEYS,
  SMS_EVENT_TYPES,
  type Activity,
  type ActivityInput,
  type ActivityKindName,
  type EmailStatistics,
  type SmsStatistics,
} from './schemas.ts';

/**
 * What an activity kind means (docs/architecture.md "Where a new activity kind goes"): the writes,
 * the public reads, the event ingestion and the route table know every kind through this shape
 * only, from the table below.
 */
export interface ActivityKind {
  /** The fields of its activities besides the common ones (a write refuses the others' fields). */
  fields: readonly (keyof ActivityInput)[];
  /** The values a write gives its fields that the input leaves out. */
  defaults: Partial<ActivityInput>;
  /**
   * The channel whose built-in event type records the activity's events; undefined when it has
   * none (website and automation activities, and pages of forms and pages).
   */
  channel(activity: Pick<Activity, 'form_type'>): ActivityChannel | undefined;
  /** The types of its events, and the keys of its `aql_queries` with the type each selects; none without events. */
  events?: { types: readonly string[]; aql: Readonly<Record<string, string>> };
  /** Its statistics from an activity's counters, when its public reads offer them (`include_statistics`). */
  statistics?(counters: Counters): EmailStatistics | SmsStatistics;
  /** Its own fields that the public lists show, besides the common ones. */
  listed(activity: Activity): Record<string, unknown>;
  /** Its own fields that a public read of one activity adds to those listed. */
  read(activity: Activity): Record<string, unknown>;
  /** Whether its public list may be narrowed to the activities triggered through the API (`trigger_types`). */
  triggers: boolean;
  /** Whether a write checks its templates first (the transactional mail area's check). */
  templates: boolean;
}

/** An activity's counters: event type → how many events, and of how many profiles. */
export type Counters = Map<string, { events: number; profiles: number }>;

const none = () => ({});

/** The table of activity kinds, by the name stored in an activity's row. */
export const ACTIVITY_KIND_TABLE: Record<ActivityKindName, ActivityKind> = {
  email: {
    fields: [
      'email_subject',
      'sender_name',
      'sender_email_address',
      'reply_to',
      'preheader',
      'html',
      'text',
      'transactional',
    ],
    defaults: { transactional: false },
    channel: () => 'email',
    events: { types: EMAIL_EVENT_TYPES, aql: EMAIL_AQL_KEYS },
    statistics: emailStatistics,
    listed: (activity) => ({ sent_at: activity.sent_at, email_subject: activity.email_subject ?? '' }),
    read: none,
    triggers: false,
    templates: true,
  },
  sms: {
    fields: ['text'],
    defaults: {},
    channel: () => 'sms',
    events: { types: SMS_EVENT_TYPES, aql: SMS_AQL_KEYS },
    statistics: smsStatistics,
    listed: none,
    read: none,
    triggers: false,
    templates: false,
  },
  website: {
    fields: [],
    defaults: {},
    channel: () => undefined,
    listed: none,
    read: none,
    triggers: false,
    templates: false,
  },
  'marketing-automation': {
    fields: ['description', 'trigger_type'],
    defaults: { description: '', trigger_type: 'other' },
    channel: () => undefined,
    listed: (activity) => ({ description: activity.description ?? '' }),
    read: none,
    triggers: true,
    templates: false,
  },
  'forms-and-pages': {
    fields: ['form_type', 'elements'],
    defaults: { form_type: 'form' },
    channel: (activity) => (activity.form_type === 'page' ? undefined : 'forms'),
    events: { types: FORM_EVENT_TYPES, aql: FORM_AQL_KEYS },
    listed: none,
    read: (activity) => (activity.elements ? { elements: activity.elements } : {}),
    triggers: false,
    templates: false,
  },
};

/** A fraction, 0 when there is nothing to divide by. */
const rate = (part: number, whole: number) => (whole === 0 ? 0 : part / whole);

/** Email statistics from an activity's counters (docs/activities.md "Statistics"). */
function emailStatistics(c: Counters): EmailStatistics {
  const profiles = (type: string) => c.get(type)?.profiles ?? 0;
  const events = (type: string) => c.get(type)?.events ?? 0;
  const sent = profiles('SENT');
  const delivered = profiles('DELIVERED');
  const uniqueOpens = profiles('OPENED');
  const uniqueClicks = profiles('CLICKED');
  const bounces = profiles('BOUNCED');
  const unsubscribes = profiles('UNSUBSCRIBED');
  const complaints = profiles('ABUSE');
  return {
    sent,
    delivered,
    delivery_rate: rate(delivered, sent),
    opens: events('OPENED'),
    unique_opens: uniqueOpens,
    open_rate: rate(uniqueOpens, delivered),
    clicks: events('CLICKED'),
    unique_clicks: uniqueClicks,
    click_rate: rate(uniqueClicks, delivered),
    click_to_open_rate: rate(uniqueClicks, uniqueOpens),
    bounces,
    bounce_rate: rate(bounces, sent),
    unsubscribes,
    unsubscribe_rate: rate(unsubscribes, delivered),
    spam_complaints: complaints,
    spam_complaint_rate: rate(complaints, delivered),
  };
}

/** SMS statistics from an activity's counters: every count is of profiles. */
function smsStatistics(c: Counters): SmsStatistics {
  const profiles = (type: string) => c.get(type)?.profiles ?? 0;
  const [sent, delivered, clicks, bounces, unsubscribes] = [
    'SENT',
    'DELIVERED',
    'CLICKED',
    'BOUNCED',
    'UNSUBSCRIBED',
  ].map(profiles);
  return {
    sent,
    delivered,
    delivery_rate: rate(delivered, sent),
    clicks,
    click_rate: rate(clicks, delivered),
    bounces,
    bounce_rate: rate(bounces, sent),
    unsubscribes,
    unsubscribe_rate: rate(unsubscribes, delivered),
  };
}

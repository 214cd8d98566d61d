import { Type, type Static } from 'typebox';
import { DateTime } from '../core/schemas.ts';
import { WEBHOOK_EVENT_TYPES } from './events.ts';

/** The shapes of the webhook routes and of the payloads they deliver (docs/webhooks.md). */

export const EventType = Type.Union(
  WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: 'An event type an endpoint can subscribe to' },
);

/** A signing secret: `whsec_` and the base64 of 24 to 64 random bytes (Standard Webhooks). */
export const Secret = Type.String({
  pattern: '^whsec_[A-Za-z0-9+/]{32,88}={0,2}$',
  description: '`whsec_` then the base64 of 24 to 64 bytes',
});

const Url = Type.String({ minLength: 1, maxLength: 2000, description: 'Where deliveries are POSTed: http or https' });
const EventTypes = Type.Array(EventType, {
  minItems: 1,
  maxItems: WEBHOOK_EVENT_TYPES.length,
  uniqueItems: true,
  description: 'The event types delivered to the endpoint',
});
const Description = Type.String({ maxLength: 1000, description: 'What the endpoint is for' });

export const EndpointCreate = Type.Object(
  {
    url: Url,
    event_types: EventTypes,
    description: Type.Optional(Description),
    enabled: Type.Optional(Type.Boolean({ default: true })),
    secret: Type.Optional(Secret),
  },
  { additionalProperties: false },
);
export type EndpointCreate = Static<typeof EndpointCreate>;

export const EndpointPatch = Type.Object(
  {
    url: Type.Optional(Url),
    event_types: Type.Optional(EventTypes),
    description: Type.Optional(Description),
    enabled: Type.Optional(
      Type.Boolean({ description: 'false stops new deliveries; true resumes an endpoint paused by failures' }),
    ),
  },
  { additionalProperties: false },
);
export type EndpointPatch = Static<typeof EndpointPatch>;

export const EndpointState = Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('disabled')], {
  description:
    'active: delivering; paused: stopped by failures, its deliveries wait until it is enabled again; disabled: turned off',
});

export const Endpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  event_types: Type.Array(EventType),
  description: Type.String(),
  enabled: Type.Boolean(),
  state: EndpointState,
  paused_at: Type.Union([DateTime, Type.Null()]),
  consecutive_failures: Type.Integer({ description: 'Failed attempts since the last delivered one' }),
  previous_secret_until: Type.Union([DateTime, Type.Null()], {
    description: 'Until then the secret a rotation replaced signs beside the new one',
  }),
  created_at: DateTime,
});
export type Endpoint = Static<typeof Endpoint>;

export const EndpointWithSecret = Type.Object({
  ...Endpoint.properties,
  secret: Type.String({ description: 'The signing secret: shown in this answer only' }),
});

export const Rotation = Type.Object(
  {
    secret: Type.Optional(Secret),
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 7 * 86_400,
        default: 86_400,
        description: 'How long the old secret keeps signing beside the new one',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Attempt = Type.Object({
  attempt: Type.Integer(),
  attempted_at: DateTime,
  status: Type.Union([Type.Integer(), Type.Null()], { description: "The answer's HTTP status; null when none came" }),
  latency_ms: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why the attempt failed' }),
});

export const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')], {
  description: 'pending: waiting for its next attempt; delivered: a 2xx answer; failed: retries ended',
});

export const Delivery = Type.Object({
  event_id: Type.String({ description: 'The webhook-id of every attempt' }),
  event_type: EventType,
  created_at: DateTime,
  status: DeliveryStatus,
  attempts: Type.Integer(),
  next_attempt_at: Type.Union([DateTime, Type.Null()]),
  delivered_at: Type.Union([DateTime, Type.Null()]),
  last_attempt: Type.Union([Attempt, Type.Null()]),
});

export const DeliveryWithAttempts = Type.Object({
  ...Delivery.properties,
  payload: Type.Record(Type.String(), Type.Unknown(), { description: 'The body every attempt sends' }),
  attempt_log: Type.Array(Attempt, { description: 'Every attempt, oldest first' }),
});

export const DeliveryQuery = Type.Object({
  status: Type.Optional(DeliveryStatus),
  since: Type.Optional(Type.String({ format: 'date-time', description: 'Events written at or after this time' })),
  until: Type.Optional(Type.String({ format: 'date-time', description: 'Events written before this time' })),
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
});

export const ReplayRange = Type.Object(
  {
    since: Type.String({ format: 'date-time', description: 'Events written at or after this time' }),
    until: Type.String({ format: 'date-time', description: 'Events written before this time' }),
    failed_only: Type.Optional(Type.Boolean({ default: false, description: 'Only deliveries whose retries ended' })),
  },
  { additionalProperties: false },
);

// ---- Payloads (the OpenAPI document's `webhooks`) ----

const ProfileRef = Type.Object({ export_key: Type.String({ description: "The profile's export key" }) });

/** A profile's entry into or exit from a live segment (docs/aql.md "Live segments"). */
function SegmentChange(what: 'entered' | 'exited') {
  return Type.Object({
    segment_discriminator: Type.String(),
    profile: Type.Object(ProfileRef.properties, { description: `The canonical profile that ${what} the segment` }),
    at: DateTime,
  });
}

/** The data of each event type. */
export const EVENT_DATA = {
  'consent.changed': Type.Object({
    profile: ProfileRef,
    section_discriminator: Type.String(),
    topic_discriminator: Type.String(),
    channel_discriminator: Type.String(),
    type: Type.String({ description: 'The new consent type: opt-in, opt-out, pending-opt-in, confirmed-opt-in' }),
    previous_type: Type.Union([Type.String(), Type.Null()], { description: 'null: the first consent' }),
    source: Type.String(),
  }),
  'profile.merged': Type.Object({
    profile: Type.Object(ProfileRef.properties, { description: 'The canonical profile of the merged cluster' }),
    merged: Type.Array(ProfileRef, { description: 'The other profiles of the cluster, oldest first' }),
  }),
  'profile.unmerged': Type.Object({
    profile: Type.Object(ProfileRef.properties, { description: 'The profile taken out of its cluster' }),
    former_canonical: ProfileRef,
  }),
  'profile.deleted': Type.Object({
    profiles: Type.Array(ProfileRef, { description: 'Every profile of the deleted cluster' }),
    locked: Type.Boolean({ description: 'Locked for good: its identifiers may never be used again' }),
  }),
  'import.finished': Type.Object({
    import_id: Type.String(),
    status: Type.Union([Type.Literal('completed'), Type.Literal('error')]),
    message: Type.Union([Type.String(), Type.Null()]),
  }),
  'export.finished': Type.Object({
    export_id: Type.String(),
    kind: Type.String(),
    status: Type.Union([Type.Literal('ready'), Type.Literal('failed')]),
    message: Type.Union([Type.String(), Type.Null()]),
  }),
  'segment.entered': SegmentChange('entered'),
  'segment.exited': SegmentChange('exited'),
} satisfies Record<(typeof WEBHOOK_EVENT_TYPES)[number], unknown>;

/** The body of a delivery of `type`. */
export function payloadSchema(type: (typeof WEBHOOK_EVENT_TYPES)[number]) {
  return Type.Object({
    type: Type.Literal(type),
    timestamp: DateTime,
    data: EVENT_DATA[type],
  });
}

/**
 * An endpoint in the account manifest (docs/manifest.md "Webhooks"): the fields of a new
 * endpoint, matched by URL; its secret is never read back.
 */
export const ManifestWebhook = EndpointCreate;
export type ManifestWebhook = EndpointCreate;

-- Webhooks (docs/webhooks.md): the endpoints an account subscribes, the outbox of events written in
-- the transaction of the change that causes each, one delivery per event and subscribed endpoint,
-- and every attempt of a delivery.

create table webhook_endpoints (
  account_id bigint not null references accounts on delete cascade,
  endpoint_id bigint generated always as identity,
  url text not null,
  event_types text[] not null,
  description text not null default '',
  -- Off by the account's choice: no new deliveries are made for it.
  enabled boolean not null default true,
  -- Paused by failures (docs/webhooks.md "Pausing"): deliveries wait until it is enabled again.
  paused_at timestamptz,
  -- Failed attempts since its last delivered one.
  consecutive_failures integer not null default 0,
  -- The signing secret (whsec_…), sealed (AES-256-GCM under a key derived from SERVER_SECRET), and
  -- the one it replaced, which keeps signing beside it until previous_secret_until.
  secret bytea not null,
  previous_secret bytea,
  previous_secret_until timestamptz,
  created_at timestamptz not null default now(),
  primary key (account_id, endpoint_id),
  unique (account_id, url)
);

create table webhook_events (
  account_id bigint not null references accounts on delete cascade,
  event_seq bigint generated always as identity,
  -- The webhook-id of its deliveries: stable across attempts and replays.
  event_id text not null,
  type text not null,
  -- Events of one key are delivered to an endpoint in the order they were written (a profile's id); null: no order.
  ordering_key text,
  data jsonb not null,
  created_at timestamptz not null default now(),
  primary key (account_id, event_seq),
  unique (account_id, event_id)
);
create index webhook_events_created on webhook_events (account_id, created_at);

create table webhook_deliveries (
  account_id bigint not null,
  endpoint_id bigint not null,
  event_seq bigint not null,
  ordering_key text,
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
  attempts integer not null default 0,
  -- Failed attempts since it was written or replayed: its back-off step.
  retries integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  -- A worker sending it holds it until then; one that died lets it go then.
  leased_until timestamptz,
  -- Retries end at this time (a day after the event, or after a replay).
  retry_until timestamptz not null,
  delivered_at timestamptz,
  primary key (account_id, endpoint_id, event_seq),
  foreign key (account_id, endpoint_id) references webhook_endpoints on delete cascade,
  foreign key (account_id, event_seq) references webhook_events on delete cascade
);
create index webhook_deliveries_pending on webhook_deliveries (account_id, endpoint_id, event_seq) where status = 'pending';
-- The earlier pending delivery of the same ordering key, which holds a delivery back.
create index webhook_deliveries_key on webhook_deliveries (account_id, endpoint_id, ordering_key, event_seq) where status = 'pending';
create index webhook_deliveries_event on webhook_deliveries (account_id, event_seq);

create table webhook_attempts (
  account_id bigint not null,
  endpoint_id bigint not null,
  event_seq bigint not null,
  attempt integer not null,
  attempted_at timestamptz not null,
  -- The answer's HTTP status; null when there was none (error says why).
  status integer,
  latency_ms integer not null,
  error text,
  primary key (account_id, endpoint_id, event_seq, attempt),
  foreign key (account_id, endpoint_id, event_seq) references webhook_deliveries on delete cascade
);

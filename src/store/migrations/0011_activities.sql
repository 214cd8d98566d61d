-- Activities (SPEC §2.14, §4.8, §6; docs/activities.md): the five kinds, their events and the
-- counters their statistics are read from.

-- Generated activity ids: one sequence for every kind, so that ids are strings of one kind (ACT-17).
create sequence activity_ids;

create table activities (
  account_id bigint not null references accounts on delete cascade,
  -- Chosen by the operator, or a number of activity_ids.
  activity_id text not null,
  section_id bigint not null,
  -- email, sms, website, marketing-automation or forms-and-pages.
  kind text not null,
  name text not null,
  status text not null,
  created_at timestamptz not null,
  sent_at timestamptz,
  -- Archived activities leave the public lists and take no more events; their events stay.
  archived_at timestamptz,
  -- The fields of the kind (an email's subject, sender and bodies; an automation's trigger; a form's elements).
  details jsonb not null default '{}',
  updated_at timestamptz not null,
  primary key (account_id, activity_id),
  foreign key (account_id, section_id) references sections
);
-- The public lists: the 500 most recent of a kind in a section.
create index activities_recent on activities (account_id, section_id, kind, created_at desc) where archived_at is null;

-- Every event of an activity as received (SPEC §2.16), also written as a profile event of the
-- built-in event type of its channel. The key makes ingestion idempotent: a source that sends an
-- event again (same activity, type and correlation id) adds nothing.
create table activity_events (
  account_id bigint not null,
  activity_id text not null,
  -- SENT, DELIVERED, OPENED, CLICKED, BOUNCED, UNSUBSCRIBED, ABUSE; forms: VIEWED, STARTED, REJECTED, SUBMITTED.
  type text not null,
  correlation_id text not null,
  event_id bigint generated always as identity,
  section_id bigint not null,
  -- The canonical profile the event was recorded on.
  profile_id bigint not null,
  -- The source's time, or the server's when the source gave none: what windows and cursors use.
  event_time timestamptz not null,
  -- The source's time as given; null when it gave none.
  source_time timestamptz,
  server_time timestamptz not null,
  split_id text,
  variation text,
  device text,
  location text,
  link_id text,
  link_url text,
  link_title text,
  bounce_code integer,
  unsubscribe_topic text,
  primary key (account_id, activity_id, type, correlation_id),
  -- Deleting a profile erases its events; the counters keep what they counted.
  foreign key (account_id, profile_id) references profiles on delete cascade
);
-- The email event export reads a section's events in a time window, in order, from a cursor
-- (event_time, event_id).
create index activity_events_by_time on activity_events (account_id, section_id, event_time, event_id);

-- The profiles that have at least one event of a type of an activity: unique counts (unique
-- opens, recipients) grow by the rows a batch adds here.
create table activity_recipients (
  account_id bigint not null,
  activity_id text not null,
  type text not null,
  profile_id bigint not null,
  primary key (account_id, activity_id, type, profile_id)
);

-- Counters kept as events arrive, so that statistics need no scan of events: per activity and
-- event type, the events and the distinct profiles.
create table activity_counters (
  account_id bigint not null,
  activity_id text not null,
  type text not null,
  events bigint not null,
  profiles bigint not null,
  primary key (account_id, activity_id, type)
);

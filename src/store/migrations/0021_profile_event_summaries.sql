-- Per profile and event version, what its events are in sum (docs/aql.md): how many, the first and
-- the last event time. An event term without conditions on the event's data and without a time
-- window reads one row per profile here instead of every event of the profile.
--
-- Kept by the statements that write and delete profile events, in the same statement
-- (src/profiles/queries): events are appended, never rewritten, and deleted only with their
-- profile or account, so a row only grows until it is deleted. Merges leave events, and so their
-- rows, on the profile that received them.
create table profile_event_summaries (
  account_id bigint not null,
  profile_id bigint not null,
  section_id bigint not null,
  version_id bigint not null,
  event_count bigint not null,
  first_time timestamptz not null,
  last_time timestamptz not null,
  primary key (account_id, profile_id, section_id, version_id)
);

-- The profiles with an event of one version, read index-only by counts. No column of it changes
-- when events are added, so that the update of a row can be a heap-only one.
create index profile_event_summaries_by_version on profile_event_summaries (account_id, section_id, version_id, profile_id);

insert into profile_event_summaries (account_id, profile_id, section_id, version_id, event_count, first_time, last_time)
select account_id, profile_id, section_id, version_id, count(*), min(event_time), max(event_time)
from profile_events
group by account_id, profile_id, section_id, version_id;

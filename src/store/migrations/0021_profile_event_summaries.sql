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

-- The number of profiles with events, as the planner sees it: from the default sample (30,000
-- rows) of 26 million events of 10 million profiles ANALYZE took 457,034 distinct profiles, where a
-- sample of 600,000 finds a quarter of the rows distinct (6.6 million). With so few, PostgreSQL made the profiles of a window's
-- events unique in each parallel worker before joining them with the section rows, each worker
-- the whole of them: 110 s for a count's semi-join that takes 29-31 s as the parallel hash semi-join
-- it plans with the larger sample (docs/benchmarks.md "Issue 26").
alter table profile_events alter column profile_id set statistics 2000;

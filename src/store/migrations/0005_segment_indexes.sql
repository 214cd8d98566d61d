-- Segments over many profiles (docs/benchmarks.md "Segments").

-- The events of one version in a time range, with their profile: the event terms of counts and
-- trends read them index-only, from the window's start to its end.
create index profile_events_by_version on profile_events (account_id, section_id, version_id, event_time) include (profile_id);

-- The history of one attribute version, profile by profile in time order, with the values: a trend
-- reads it index-only and in the order in which it finds when each value was replaced. It replaces
-- the index by version and time, which no query uses.
create index attribute_history_by_attribute on attribute_history (account_id, section_id, version_id, profile_id, changed_at) include (value);
drop index attribute_history_by_version;

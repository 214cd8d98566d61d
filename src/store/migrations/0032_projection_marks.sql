-- Counts from a projection (docs/aql.md "Counts from a projection"): every profile write that marks
-- its profiles for the live segments (profile_changes) also leaves a mark here with the id of its
-- transaction. A process that keeps an account's projection in memory brings it up to date before a
-- count with the marks its last snapshot did not see (pg_visible_in_snapshot), so the count is exact
-- as of the count's own snapshot; unlike profile_changes, nothing takes these marks away.
create table projection_marks (
  account_id bigint not null,
  xid xid8 not null default pg_current_xact_id(),
  profile_id bigint not null,
  primary key (account_id, xid, profile_id)
);

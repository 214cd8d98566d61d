-- Counts from a projection (docs/aql.md "Counts from a projection"): every profile write that marks
-- its profiles for the live segments (profile_changes) also leaves a mark here with the id of its
-- transaction. A process that keeps an account's projection in memory brings it up to date before a
-- count with the marks its last snapshot did not see (pg_visible_in_snapshot), so the count is exact
-- as of the count's own snapshot. The live segments job prunes them (projection_prunes below).
create table projection_marks (
  account_id bigint not null,
  xid xid8 not null default pg_current_xact_id(),
  profile_id bigint not null,
  primary key (account_id, xid, profile_id)
);

-- The pruning of an account's marks by the live segments job: marks of transactions before
-- `pruned_below` are gone (a projection whose snapshot's xmin is older reads its columns whole);
-- `next_below` is the xmin of the job's snapshot at `recorded_at`, the horizon of the next pruning,
-- which comes once that is PRUNE_AFTER old, so that a projection counted at least that often never
-- misses a mark.
create table projection_prunes (
  account_id bigint primary key,
  pruned_below xid8 not null,
  next_below xid8 not null,
  recorded_at timestamptz not null
);

-- Live segments (docs/aql.md "Live segments"): what a marked write changed of its profile, as bits,
-- so that the live segments job evaluates only the segments it can change: 1 the profile's section
-- data (attributes, tags), 2 its events, 3 both (creations of clusters, merges, unmerges, deletes;
-- and every mark written before this column). Marks of one profile add up their bits.
alter table profile_changes add column kinds smallint not null default 3;

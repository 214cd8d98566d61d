-- When each member of a merge cluster was merged into it (the time it stopped being a profile of
-- its own), so that a cluster can be read with its history: null for a canonical or standalone
-- profile, and for members merged before this column was added.
alter table profiles add column merged_at timestamptz;

-- An import is written by one or more lanes at once (src/imports/ingest.ts), each with its own
-- progress: lanes_done[i] is the number of data rows read when lane i's last batch committed. Set
-- when the import starts, so that a resumed import keeps its number of lanes.
alter table imports add column lanes_done integer[];
-- Imports begun before this migration had one lane.
update imports set lanes_done = array[rows_done] where rows_done > 0;
alter table imports drop column rows_done;

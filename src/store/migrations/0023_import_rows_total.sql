-- The data rows of an import's file, counted as its upload is stored (its lines after the header;
-- a quoted cell that spans lines counts each), so that a console shows progress as rows read of
-- this total. Null until the file has come.
alter table imports add column rows_total integer;

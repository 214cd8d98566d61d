-- What the console's list of exports says of each: the data rows of a ready CSV or Excel file (its
-- lines after the header; null for a count, a JSON document or an export made before), and the
-- client id of the API key that requested it.
alter table exports add column row_count integer, add column requested_by text;

-- import-reads
select import_id::text, section_id::text, version, request, status, file_key, upload_expires_at, lanes_done,
  profiles_found, profiles_processed, profiles_failed, profiles_new, profiles_updated, profiles_not_changed, message,
  rows_total, created_at, finished_at from imports where account_id = $1::bigint and import_id = $2::uuid

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"

-- then
select import_id::text, section_id::text, version, request, status, file_key, upload_expires_at, lanes_done,
  profiles_found, profiles_processed, profiles_failed, profiles_new, profiles_updated, profiles_not_changed, message,
  rows_total, created_at, finished_at from imports where account_id = $1::bigint and import_id = $2::uuid for update

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"

-- then
select import_id::text, section_id::text, version, request, status, file_key, upload_expires_at, lanes_done,
  profiles_found, profiles_processed, profiles_failed, profiles_new, profiles_updated, profiles_not_changed, message,
  rows_total, created_at, finished_at from imports where account_id = $1::bigint and section_id = $2::bigint
     order by created_at desc, import_id limit $3

-- $1 = "7"
-- $2 = "10"
-- $3 = 50

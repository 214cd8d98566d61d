-- import-status
update imports set status = $3, message = coalesce($4, message)
     where account_id = $1::bigint and import_id = $2::uuid

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"
-- $3 = "in_progress"
-- $4 = null

-- then
update imports set status = $3, message = coalesce($4, message), finished_at = now()
     where account_id = $1::bigint and import_id = $2::uuid

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"
-- $3 = "error"
-- $4 = "The file is not valid CSV"

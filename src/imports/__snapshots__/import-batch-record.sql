-- import-batch-record
update imports set lanes_done[$9::int + 1] = $3, profiles_found = profiles_found + $4,
       profiles_processed = profiles_processed + $5 + $6 + $7, profiles_new = profiles_new + $5,
       profiles_updated = profiles_updated + $6, profiles_not_changed = profiles_not_changed + $7,
       profiles_failed = profiles_failed + $8
     where account_id = $1::bigint and import_id = $2::uuid

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"
-- $3 = 1500
-- $4 = 500
-- $5 = 120
-- $6 = 300
-- $7 = 78
-- $8 = 0
-- $9 = 2

-- then
update imports set lanes_done[$9::int + 1] = $3, profiles_found = profiles_found + $4,
       profiles_processed = profiles_processed + $5 + $6 + $7, profiles_new = profiles_new + $5,
       profiles_updated = profiles_updated + $6, profiles_not_changed = profiles_not_changed + $7,
       profiles_failed = profiles_failed + $8
     where account_id = $1::bigint and import_id = $2::uuid

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"
-- $3 = 1500
-- $4 = 500
-- $5 = 120
-- $6 = 300
-- $7 = 78
-- $8 = 2
-- $9 = 2

-- then
insert into import_failures (account_id, import_id, line, reason)
       select $1::bigint, $2::uuid, l, r from unnest($3::int[], $4::text[]) as f(l, r) on conflict do nothing

-- $1 = "7"
-- $2 = "0b3a4c1e-6f0d-4b7e-9a51-2f1d7c9e8a10"
-- $3 = [17,42]
-- $4 = ["column \"points\": \"many\" is not a number","no key: column \"email\" is empty"]

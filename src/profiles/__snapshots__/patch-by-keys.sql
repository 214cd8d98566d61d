-- patch-by-keys
select n from profile_write_attributes($1::bigint, $2::bigint[], $3::jsonb, $4::bigint[], $5::jsonb, $6::jsonb) as n

-- $1 = "7"
-- $2 = "{1,1}"
-- $3 = "[\"ann@example.com\",\"bob@example.com\"]"
-- $4 = "{10,10}"
-- $5 = "[{\"3301\":120},{\"3201\":null}]"
-- $6 = "[\"2026-01-15T12:00:00.000Z\",\"2026-01-15T12:00:00.000Z\"]"

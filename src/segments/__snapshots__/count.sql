-- count
select case when exists (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) then (select count(*) from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p where exists (select 1 from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id
        and ps.section_id = $2::bigint
        and jsonb_path_exists(coalesce(ps.cluster_attributes, ps.attributes), $3::jsonpath, $4::jsonb, true)) and exists (select 1 from profile_identifiers i join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id
      where i.account_id = $1::bigint and (m.profile_id = p.profile_id or m.canonical_id = p.profile_id) and i.keyspace_id = any($8::bigint[]))) else (select count(*) from (select p.* from profile_sections p where p.account_id = $1::bigint and p.section_id = $5::bigint) p where coalesce(jsonb_path_exists(coalesce(p.cluster_attributes, p.attributes), $6::jsonpath, $7::jsonb, true), false) and exists (select 1 from profile_identifiers i
      where i.account_id = $1::bigint and i.profile_id = p.profile_id and i.keyspace_id = any($8::bigint[]))) end as n

-- $1 = "7"
-- $2 = "10"
-- $3 = "strict $.\"3301\" ? (@ > $c)"
-- $4 = "{\"c\":100}"
-- $5 = "10"
-- $6 = "strict $.\"3301\" ? (@ > $c)"
-- $7 = "{\"c\":100}"
-- $8 = ["1","3"]

-- evaluation
select found.profile_id, found.canonical_id, f.sections, f.events
     from (
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id from profiles p
       where $5::boolean and p.account_id = $1::bigint and p.export_key = $3
       union all
       select p.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id
       from profile_identifiers i join profiles p on p.account_id = i.account_id and p.profile_id = i.profile_id
       where not $5::boolean and i.account_id = $1::bigint and i.keyspace_id = $2::bigint and i.profile_key = $3
       limit 1) found
     cross join lateral (select
    (select coalesce(jsonb_object_agg(ps.section_id::text, jsonb_strip_nulls(coalesce(ps.cluster_attributes, ps.attributes))), '{}')
     from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = found.canonical_id) as sections,
    (select coalesce(jsonb_agg(jsonb_build_array(e.section_id::text, e.version_id::text, floor(extract(epoch from e.event_time) * 1000), e.data)), '[]')
     from profile_events e where cardinality($4::bigint[]) > 0 and e.account_id = $1::bigint and e.version_id = any($4::bigint[])
       and e.profile_id in (select m.profile_id from profiles m where m.account_id = $1::bigint and (m.profile_id = found.canonical_id or m.canonical_id = found.canonical_id))) as events) f

-- $1 = "7"
-- $2 = "1"
-- $3 = "ann@example.com"
-- $4 = "{5101}"
-- $5 = false

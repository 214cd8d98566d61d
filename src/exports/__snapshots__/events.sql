-- events
with chosen as (
      select p.profile_id, p.export_key from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p where exists (select 1 from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id
        and ps.section_id = $2::bigint
        and jsonb_path_exists(coalesce(ps.cluster_attributes, ps.attributes), $3::jsonpath, $4::jsonb, true))
    )
    select c.export_key, x.section_id::text, x.attributes, x.correlation_id, x.event_time, x.version_id::text, x.created_at, x.data
    from chosen c cross join lateral (
      select s.section_id, 0 as kind, null::timestamptz as event_time, null::bigint as event_id,
        (select coalesce(jsonb_object_agg(w.key, jsonb_build_object('value', case when w.tag then null else d.attrs -> w.stored end)), '{}'::jsonb)
         from unnest($5::bigint[], $6::text[], $7::text[], $8::boolean[]) w(section_id, key, stored, tag)
         where w.section_id = s.section_id
           and case when w.tag then d.tags -> w.stored = 'true'::jsonb else coalesce(jsonb_typeof(d.attrs -> w.stored), 'null') <> 'null' end) as attributes,
        null::text as correlation_id, null::bigint as version_id, null::timestamptz as created_at, null::jsonb as data
      from unnest($12::bigint[]) s(section_id)
      left join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = c.profile_id and ps.section_id = s.section_id) d on true
      union all
      select e.section_id, 1, e.event_time, e.event_id, null, e.correlation_id, e.version_id, e.created_at, e.data from (select e.section_id, e.event_id, e.version_id, e.event_time, e.created_at, e.correlation_id, e.data from profile_events e
    where e.account_id = $1::bigint
      and e.profile_id = any(array(select c.profile_id union all select m.profile_id from profiles m where m.account_id = $1::bigint and m.canonical_id = c.profile_id))
      and e.version_id = any($9::bigint[])
      and e.event_time >= $10::timestamptz and e.event_time < $11::timestamptz) e
    ) x
    order by c.profile_id, x.section_id, x.kind, x.event_time, x.event_id

-- $1 = "7"
-- $2 = "10"
-- $3 = "strict $.\"3301\" ? (@ > $c)"
-- $4 = "{\"c\":100}"
-- $5 = ["10","10"]
-- $6 = ["3301","vip"]
-- $7 = ["3301","41"]
-- $8 = [false,true]
-- $9 = ["5101"]
-- $10 = "2026-01-01T00:00:00.000Z"
-- $11 = "2026-01-08T00:00:00.000Z"
-- $12 = ["10"]

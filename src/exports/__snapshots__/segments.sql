-- segments
with base as (
      select p.profile_id, p.export_key, d.attrs, d.tags, d.updated_at, exists (select 1 from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id
        and ps.section_id = $2::bigint
        and jsonb_path_exists(coalesce(ps.cluster_attributes, ps.attributes), $3::jsonpath, $4::jsonb, true)) as s0
      from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p
      left join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id and ps.section_id = $5::bigint) d on true
      -- A fence: the filter below reads the segment columns rather than judging the segments again.
      offset 0
    ), selected as (
      select b.* from base b where b.s0
    ), wanted as (
      select * from selected k where exists (select 1 from profile_identifiers i where i.account_id = $1::bigint
    and i.profile_id = any(array(select k.profile_id union all select m.profile_id from profiles m where m.account_id = $1::bigint and m.canonical_id = k.profile_id))
    and i.keyspace_id = any($6::bigint[]))
    ), chosen as (select * from wanted )
    select c.export_key, case jsonb_typeof(c.attrs -> $7::text) when 'string' then (c.attrs -> $7::text) #>> '{}' when 'null' then null else (c.attrs -> $7::text)::text end, case when c.tags -> $8::text = 'true'::jsonb then '1' else '0' end from chosen c order by c.profile_id

-- $1 = "7"
-- $2 = "10"
-- $3 = "strict $.\"3301\" ? (@ > $c)"
-- $4 = "{\"c\":100}"
-- $5 = "10"
-- $6 = ["1","3"]
-- $7 = "3301"
-- $8 = "41"

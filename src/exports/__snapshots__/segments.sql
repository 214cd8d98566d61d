-- segments
with base as (
      select p.profile_id, p.export_key, coalesce(d.cluster_attributes, d.attributes) as attrs, coalesce(d.cluster_tags, d.tags) as tags, d.updated_at, coalesce(jsonb_path_exists(coalesce(d.cluster_attributes, d.attributes), $2::jsonpath, $3::jsonb, true), false) as s0
      from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p
      left join (select p.* from profile_sections p where p.account_id = $1::bigint and p.section_id = $4::bigint) d on d.profile_id = p.profile_id
    ), selected as (
      select b.* from base b where b.s0
    ), wanted as (
      select * from selected k where exists (select 1 from profile_identifiers i where i.account_id = $1::bigint
    and i.profile_id = any(array(select k.profile_id union all select m.profile_id from profiles m where m.account_id = $1::bigint and m.canonical_id = k.profile_id))
    and i.keyspace_id = any($5::bigint[]))
    ), chosen as (select * from wanted )
    select c.export_key, case jsonb_typeof(c.attrs -> $6::text) when 'string' then (c.attrs -> $6::text) #>> '{}' when 'null' then null else (c.attrs -> $6::text)::text end, case when c.tags -> $7::text = 'true'::jsonb then '1' else '0' end from chosen c order by c.profile_id

-- $1 = "7"
-- $2 = "strict $.\"3301\" ? (@ > $c)"
-- $3 = "{\"c\":100}"
-- $4 = "10"
-- $5 = ["1","3"]
-- $6 = "3301"
-- $7 = "41"

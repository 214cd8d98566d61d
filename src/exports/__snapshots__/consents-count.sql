-- consents-count
with base as (
      select p.profile_id, p.export_key, coalesce(d.cluster_attributes, d.attributes) as attrs, coalesce(d.cluster_tags, d.tags) as tags, d.updated_at, coalesce(jsonb_path_exists(coalesce(d.cluster_attributes, d.attributes), $2::jsonpath, $3::jsonb, true), false) as s0, case when jsonb_typeof(coalesce(d.cluster_attributes, d.attributes) -> $9::text) = 'string' then coalesce(d.cluster_attributes, d.attributes) ->> $9::text end as a0
      from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p
      left join (select p.* from profile_sections p where p.account_id = $1::bigint and p.section_id = $8::bigint) d on d.profile_id = p.profile_id
      -- A fence: the filter below reads the segment columns rather than judging the segments again.
      offset 0
    ), selected as (
      select b.*, (k0.profile_id is not null and (coalesce(b.a0, '') <> '' and not exists (select 1 from suppressions s where s.account_id = $1::bigint and s.channel_id = $4::bigint
      and s.address = lower(btrim(b.a0, $10::text))))) as c0 from base b left join (select shown.profile_id from (
        select distinct on (coalesce(m.canonical_id, c.profile_id), c.topic_id) coalesce(m.canonical_id, c.profile_id) as profile_id, c.type
        from consents c left join (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) m on m.profile_id = c.profile_id
        where c.account_id = $1::bigint and c.section_id = $5::bigint and c.channel_id = $4::bigint
          and c.topic_id = any($6::bigint[])
        order by coalesce(m.canonical_id, c.profile_id), c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any($7::text[]) group by shown.profile_id order by shown.profile_id) k0 on k0.profile_id = b.profile_id where (b.s0)
    ), kept as (
      select k.* from selected k 
    ), unique_addresses as (
      select * from kept
    ), chosen as (select * from unique_addresses ) select count(*)::int as total, count(*) filter (where c.c0)::int as c0 from chosen c

-- $1 = "7"
-- $2 = "strict $.\"3301\" ? (@ > $c)"
-- $3 = "{\"c\":100}"
-- $4 = "21"
-- $5 = "10"
-- $6 = ["61"]
-- $7 = ["opt-in","confirmed-opt-in"]
-- $8 = "10"
-- $9 = "3101"
-- $10 = "\t\n\u000b\f\r                  　﻿"

-- consents
with base as (
      select p.profile_id, p.export_key, coalesce(d.cluster_attributes, d.attributes) as attrs, coalesce(d.cluster_tags, d.tags) as tags, d.updated_at, coalesce(jsonb_path_exists(coalesce(d.cluster_attributes, d.attributes), $2::jsonpath, $3::jsonb, true), false) as s0, case when jsonb_typeof(coalesce(d.cluster_attributes, d.attributes) -> $13::text) = 'string' then coalesce(d.cluster_attributes, d.attributes) ->> $13::text end as a0, case when jsonb_typeof(coalesce(d.cluster_attributes, d.attributes) -> $14::text) = 'string' then coalesce(d.cluster_attributes, d.attributes) ->> $14::text end as a1
      from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p
      left join (select p.* from profile_sections p where p.account_id = $1::bigint and p.section_id = $12::bigint) d on d.profile_id = p.profile_id
      -- A fence: the filter below reads the segment columns rather than judging the segments again.
      offset 0
    ), selected as (
      select b.*, (k0.profile_id is not null and (coalesce(b.a0, '') <> '' and not exists (select 1 from suppressions s where s.account_id = $1::bigint and s.channel_id = $4::bigint
      and s.address = lower(btrim(b.a0, $15::text))))) as c0, (k1.profile_id is not null and (coalesce(b.a1, '') <> '' and not exists (select 1 from suppressions s where s.account_id = $1::bigint and s.channel_id = $8::bigint
      and s.address = b.a1))) as c1 from base b left join (select shown.profile_id from (
        select distinct on (coalesce(m.canonical_id, c.profile_id), c.topic_id) coalesce(m.canonical_id, c.profile_id) as profile_id, c.type
        from consents c left join (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) m on m.profile_id = c.profile_id
        where c.account_id = $1::bigint and c.section_id = $5::bigint and c.channel_id = $4::bigint
          and c.topic_id = any($6::bigint[])
        order by coalesce(m.canonical_id, c.profile_id), c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any($7::text[]) group by shown.profile_id order by shown.profile_id) k0 on k0.profile_id = b.profile_id left join (select shown.profile_id from (
        select distinct on (coalesce(m.canonical_id, c.profile_id), c.topic_id) coalesce(m.canonical_id, c.profile_id) as profile_id, c.type
        from consents c left join (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) m on m.profile_id = c.profile_id
        where c.account_id = $1::bigint and c.section_id = $9::bigint and c.channel_id = $8::bigint
          and c.topic_id = any($10::bigint[])
        order by coalesce(m.canonical_id, c.profile_id), c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any($11::text[]) group by shown.profile_id order by shown.profile_id) k1 on k1.profile_id = b.profile_id where b.s0
    ), kept as (
      select k.* from selected k where k.c0 or k.c1
    ), unique_addresses as (
      select * from (
        select k.*, row_number() over (partition by lower(k.a0) order by k.updated_at asc, k.profile_id) as nth from kept k
      ) u where u.nth = 1 or coalesce(u.a0, '') = ''
    ), chosen as (select * from unique_addresses order by random() limit $16::bigint) select c.export_key, case jsonb_typeof(c.attrs -> $17::text) when 'string' then (c.attrs -> $17::text) #>> '{}' when 'null' then null else (c.attrs -> $17::text)::text end, case when c.tags -> $18::text = 'true'::jsonb then '1' else '0' end, case when c.s0 then '1' else '0' end, case when c.c0 then c.a0 end, case when c.c1 then c.a1 end, '1' from chosen c order by c.profile_id

-- $1 = "7"
-- $2 = "strict $.\"3301\" ? (@ > $c)"
-- $3 = "{\"c\":100}"
-- $4 = "21"
-- $5 = "10"
-- $6 = ["61"]
-- $7 = ["opt-in","confirmed-opt-in"]
-- $8 = "22"
-- $9 = "10"
-- $10 = ["61"]
-- $11 = ["opt-in","confirmed-opt-in"]
-- $12 = "10"
-- $13 = "3101"
-- $14 = "3201"
-- $15 = "\t\n\u000b\f\r                  　﻿"
-- $16 = 10
-- $17 = "3301"
-- $18 = "41"

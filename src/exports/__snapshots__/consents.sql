-- consents
with base as (
      select p.profile_id, p.export_key, d.attrs, d.tags, d.updated_at, exists (select 1 from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id
        and ps.section_id = $2::bigint
        and jsonb_path_exists(coalesce(ps.cluster_attributes, ps.attributes), $3::jsonpath, $4::jsonb, true)) as s0, case when jsonb_typeof(d.attrs -> $14::text) = 'string' then d.attrs ->> $14::text end as a0, case when jsonb_typeof(d.attrs -> $15::text) = 'string' then d.attrs ->> $15::text end as a1
      from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p
      left join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id and ps.section_id = $13::bigint) d on true
      -- A fence: the filter below reads the segment columns rather than judging the segments again.
      offset 0
    ), selected as (
      select b.*, (k0.profile_id is not null and (coalesce(b.a0, '') <> '' and not exists (select 1 from suppressions s where s.account_id = $1::bigint and s.channel_id = $5::bigint
      and s.address = lower(btrim(b.a0, $16::text))))) as c0, (k1.profile_id is not null and (coalesce(b.a1, '') <> '' and not exists (select 1 from suppressions s where s.account_id = $1::bigint and s.channel_id = $9::bigint
      and s.address = b.a1))) as c1 from base b left join (select shown.profile_id from (
        select distinct on (coalesce(m.canonical_id, c.profile_id), c.topic_id) coalesce(m.canonical_id, c.profile_id) as profile_id, c.type
        from consents c left join (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) m on m.profile_id = c.profile_id
        where c.account_id = $1::bigint and c.section_id = $6::bigint and c.channel_id = $5::bigint
          and c.topic_id = any($7::bigint[])
        order by coalesce(m.canonical_id, c.profile_id), c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any($8::text[]) group by shown.profile_id order by shown.profile_id) k0 on k0.profile_id = b.profile_id left join (select shown.profile_id from (
        select distinct on (coalesce(m.canonical_id, c.profile_id), c.topic_id) coalesce(m.canonical_id, c.profile_id) as profile_id, c.type
        from consents c left join (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) m on m.profile_id = c.profile_id
        where c.account_id = $1::bigint and c.section_id = $10::bigint and c.channel_id = $9::bigint
          and c.topic_id = any($11::bigint[])
        order by coalesce(m.canonical_id, c.profile_id), c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any($12::text[]) group by shown.profile_id order by shown.profile_id) k1 on k1.profile_id = b.profile_id where b.s0
    ), kept as (
      select k.* from selected k where k.c0 or k.c1
    ), unique_addresses as (
      select * from (
        select k.*, row_number() over (partition by lower(k.a0) order by k.updated_at asc, k.profile_id) as nth from kept k
      ) u where u.nth = 1 or coalesce(u.a0, '') = ''
    ), chosen as (select * from unique_addresses order by random() limit $17::bigint) select c.export_key, case jsonb_typeof(c.attrs -> $18::text) when 'string' then (c.attrs -> $18::text) #>> '{}' when 'null' then null else (c.attrs -> $18::text)::text end, case when c.tags -> $19::text = 'true'::jsonb then '1' else '0' end, case when c.s0 then '1' else '0' end, case when c.c0 then c.a0 end, case when c.c1 then c.a1 end, '1' from chosen c order by c.profile_id

-- $1 = "7"
-- $2 = "10"
-- $3 = "strict $.\"3301\" ? (@ > $c)"
-- $4 = "{\"c\":100}"
-- $5 = "21"
-- $6 = "10"
-- $7 = ["61"]
-- $8 = ["opt-in","confirmed-opt-in"]
-- $9 = "22"
-- $10 = "10"
-- $11 = ["61"]
-- $12 = ["opt-in","confirmed-opt-in"]
-- $13 = "10"
-- $14 = "3101"
-- $15 = "3201"
-- $16 = "\t\n\u000b\f\r                  　﻿"
-- $17 = 10
-- $18 = "3301"
-- $19 = "41"

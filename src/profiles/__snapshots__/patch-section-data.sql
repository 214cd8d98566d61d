-- patch-section-data
with old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and profile_id = $2::bigint and section_id = $3::bigint
     ), written as (
       update profile_sections ps set
         attributes = case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || $4::jsonb) else ps.attributes || $4::jsonb end,
         attribute_set_at = (select coalesce(jsonb_object_agg(n.key,
    case when ps.attributes -> n.key = n.value and ps.attribute_set_at ? n.key then ps.attribute_set_at -> n.key else ((extract(epoch from ($6::timestamptz) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb) end), '{}'::jsonb)
  from jsonb_each(case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || $4::jsonb) else ps.attributes || $4::jsonb end) n),
         cluster_attributes = case when ps.cluster_attributes is not null then jsonb_strip_nulls(ps.cluster_attributes || $4::jsonb) end,
         tags = case when ps.cluster_tags is null then profile_true_tags(ps.tags || $5::jsonb) else ps.tags || $5::jsonb end,
         cluster_tags = profile_true_tags(ps.cluster_tags || $5::jsonb),
         updated_at = now()
       from old o
       where ps.account_id = $1::bigint and ps.profile_id = o.profile_id and ps.section_id = o.section_id and ps.attributes = o.attributes and ps.attribute_set_at = o.attribute_set_at
       returning ps.account_id, ps.profile_id, ps.section_id, ps.attributes as new_values, $6::timestamptz as replaced_at
     ), inserted as (
       -- From the profile's row: it exists (the caller located it).
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select p.account_id, p.profile_id, $3::bigint, jsonb_strip_nulls($4::jsonb), profile_true_tags($5::jsonb), (select coalesce(jsonb_object_agg(n.key,
    case when null::jsonb -> n.key = n.value and null::jsonb ? n.key then null::jsonb -> n.key else ((extract(epoch from ($6::timestamptz) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb) end), '{}'::jsonb)
  from jsonb_each(jsonb_strip_nulls($4::jsonb)) n)
       from profiles p where p.account_id = $1::bigint and p.profile_id = $2::bigint and not exists (select 1 from old)
       on conflict do nothing
       returning 1
     ), history as (
       insert into attribute_history (account_id, profile_id, section_id, version_id, value, set_at, replaced_at)
     select w.account_id, w.profile_id, w.section_id, r.version_id, r.value, r.set_at, w.replaced_at
     from written w join old o on o.profile_id = w.profile_id and o.section_id = w.section_id
     cross join lateral profile_replaced_values(o.attribute_set_at, o.attributes, w.new_values) r
     )
     select (select case when (select count(*) from written) + (select count(*) from inserted) < 1 then profile_write_raced() else true end)

-- $1 = "7"
-- $2 = "1001"
-- $3 = "10"
-- $4 = "{\"3201\":null,\"3301\":120}"
-- $5 = "{\"41\":true}"
-- $6 = "2026-01-15T12:00:00.000Z"

-- import-batch
insert into profiles (account_id, export_key, created_at) select $1::bigint, k, $3 from jsonb_array_elements_text($2::jsonb) as k
     returning profile_id, export_key

-- $1 = "7"
-- $2 = "[\"e-1\",\"e-2\"]"
-- $3 = "2026-01-15T12:00:00.000Z"

-- then
insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
     select $1::bigint, k, pk, p from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[])) as x(k, pk, p)

-- $1 = "7"
-- $2 = "{1,1}"
-- $3 = "[\"ann@example.com\",\"bob@example.com\"]"
-- $4 = "{1001,1002}"

-- then
insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
     select $1::bigint, p, $2::bigint, a, t, s
     from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb), jsonb_array_elements($6::jsonb)) as x(p, a, t, s)

-- $1 = "7"
-- $2 = "10"
-- $3 = "{1001,1002}"
-- $4 = "[{\"3301\":7},{}]"
-- $5 = "[{\"41\":true},{}]"
-- $6 = "[{\"3301\":1768478400000000},{}]"

-- then
with patch as (select * from rows from (unnest($3::bigint[]), jsonb_array_elements($4::jsonb), jsonb_array_elements($5::jsonb)) as x(p, a, t)),
     old as (
       select profile_id, section_id, attributes, attribute_set_at from profile_sections
       where account_id = $1::bigint and section_id = $2::bigint and profile_id = any($3::bigint[])
     ),
     written as (
       update profile_sections ps set
         attributes = case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || patch.a) else ps.attributes || patch.a end,
         attribute_set_at = (select coalesce(jsonb_object_agg(n.key,
    case when ps.attributes -> n.key = n.value and ps.attribute_set_at ? n.key then ps.attribute_set_at -> n.key else ((extract(epoch from ($6::timestamptz) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb) end), '{}'::jsonb)
  from jsonb_each(case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || patch.a) else ps.attributes || patch.a end) n),
         cluster_attributes = case when ps.cluster_attributes is not null then jsonb_strip_nulls(ps.cluster_attributes || patch.a) end,
         tags = case when ps.cluster_tags is null then profile_true_tags(ps.tags || patch.t) else ps.tags || patch.t end,
         cluster_tags = profile_true_tags(ps.cluster_tags || patch.t),
         updated_at = now()
       from patch join old o on o.profile_id = patch.p
       where ps.account_id = $1::bigint and ps.section_id = $2::bigint and ps.profile_id = patch.p and ps.attributes = o.attributes and ps.attribute_set_at = o.attribute_set_at
       returning ps.account_id, ps.profile_id, ps.section_id, ps.attributes as new_values, $6::timestamptz as replaced_at
     ), history as (
       insert into attribute_history (account_id, profile_id, section_id, version_id, value, set_at, replaced_at)
     select w.account_id, w.profile_id, w.section_id, r.version_id, r.value, r.set_at, w.replaced_at
     from written w join old o on o.profile_id = w.profile_id and o.section_id = w.section_id
     cross join lateral profile_replaced_values(o.attribute_set_at, o.attributes, w.new_values) r
     ), inserted as (
       insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
       select $1::bigint, p, $2::bigint, jsonb_strip_nulls(a), profile_true_tags(t), (select coalesce(jsonb_object_agg(n.key,
    case when null::jsonb -> n.key = n.value and null::jsonb ? n.key then null::jsonb -> n.key else ((extract(epoch from ($6::timestamptz) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb) end), '{}'::jsonb)
  from jsonb_each(jsonb_strip_nulls(a)) n) from patch
       where p not in (select profile_id from old)
       on conflict do nothing
       returning 1
     )
     select (select case when (select count(*) from written) + (select count(*) from inserted) < (select count(*) from patch) then profile_write_raced() else true end)

-- $1 = "7"
-- $2 = "10"
-- $3 = "{1003}"
-- $4 = "[{\"3301\":9}]"
-- $5 = "[{\"41\":false}]"
-- $6 = "2026-01-15T12:00:00.000Z"

-- then
insert into profile_events (account_id, profile_id, section_id, version_id, event_time, created_at, correlation_id, data)
     select $1::bigint, e.p, $2::bigint, e.v, e.t, $4, e.c, e.d
     from json_to_recordset($3::json) as e(p bigint, v bigint, t timestamptz, c text, d jsonb)

-- $1 = "7"
-- $2 = "10"
-- $3 = "[{\"p\":\"1001\",\"v\":\"5101\",\"t\":\"2026-01-14T08:00:00.000Z\",\"c\":\"c-1\",\"d\":{\"total\":12}}]"
-- $4 = "2026-01-15T12:00:00.000Z"

-- then
insert into profile_event_summaries (account_id, profile_id, section_id, version_id, event_count, first_time, last_time)
     select $1::bigint, e.p, $2::bigint, e.v, count(*), min(e.t), max(e.t)
     from unnest($3::bigint[], $4::bigint[], $5::timestamptz[]) as e(p, v, t) group by e.p, e.v order by e.p, e.v
     on conflict (account_id, profile_id, section_id, version_id) do update set
  event_count = profile_event_summaries.event_count + excluded.event_count,
  first_time = least(profile_event_summaries.first_time, excluded.first_time),
  last_time = greatest(profile_event_summaries.last_time, excluded.last_time)

-- $1 = "7"
-- $2 = "10"
-- $3 = ["1001"]
-- $4 = ["5101"]
-- $5 = ["2026-01-14T08:00:00.000Z"]

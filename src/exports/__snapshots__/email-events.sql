-- email-events
with selected as materialized (
      select p.profile_id from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p where exists (select 1 from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = p.profile_id
        and ps.section_id = $5::bigint
        and jsonb_path_exists(coalesce(ps.cluster_attributes, ps.attributes), $6::jsonpath, $7::jsonb, true))
    )
    select case when strpos(c.line, '"') = 0 and strpos(c.line, chr(10)) = 0 and strpos(c.line, chr(13)) = 0
      and octet_length(c.line) - octet_length(replace(c.line, ',', '')) = 21 then c.line else coalesce(case when c.c0 ~ '[",
]' then '"' || replace(c.c0, '"', '""') || '"' else c.c0 end, '') || ',' || coalesce(case when c.c1 ~ '[",
]' then '"' || replace(c.c1, '"', '""') || '"' else c.c1 end, '') || ',' || coalesce(case when c.c2 ~ '[",
]' then '"' || replace(c.c2, '"', '""') || '"' else c.c2 end, '') || ',' || coalesce(case when c.c3 ~ '[",
]' then '"' || replace(c.c3, '"', '""') || '"' else c.c3 end, '') || ',' || coalesce(case when c.c4 ~ '[",
]' then '"' || replace(c.c4, '"', '""') || '"' else c.c4 end, '') || ',' || coalesce(case when c.c5 ~ '[",
]' then '"' || replace(c.c5, '"', '""') || '"' else c.c5 end, '') || ',' || coalesce(case when c.c6 ~ '[",
]' then '"' || replace(c.c6, '"', '""') || '"' else c.c6 end, '') || ',' || coalesce(case when c.c7 ~ '[",
]' then '"' || replace(c.c7, '"', '""') || '"' else c.c7 end, '') || ',' || coalesce(case when c.c8 ~ '[",
]' then '"' || replace(c.c8, '"', '""') || '"' else c.c8 end, '') || ',' || coalesce(case when c.c9 ~ '[",
]' then '"' || replace(c.c9, '"', '""') || '"' else c.c9 end, '') || ',' || coalesce(case when c.c10 ~ '[",
]' then '"' || replace(c.c10, '"', '""') || '"' else c.c10 end, '') || ',' || coalesce(case when c.c11 ~ '[",
]' then '"' || replace(c.c11, '"', '""') || '"' else c.c11 end, '') || ',' || coalesce(case when c.c12 ~ '[",
]' then '"' || replace(c.c12, '"', '""') || '"' else c.c12 end, '') || ',' || coalesce(case when c.c13 ~ '[",
]' then '"' || replace(c.c13, '"', '""') || '"' else c.c13 end, '') || ',' || coalesce(case when c.c14 ~ '[",
]' then '"' || replace(c.c14, '"', '""') || '"' else c.c14 end, '') || ',' || coalesce(case when c.c15 ~ '[",
]' then '"' || replace(c.c15, '"', '""') || '"' else c.c15 end, '') || ',' || coalesce(case when c.c16 ~ '[",
]' then '"' || replace(c.c16, '"', '""') || '"' else c.c16 end, '') || ',' || coalesce(case when c.c17 ~ '[",
]' then '"' || replace(c.c17, '"', '""') || '"' else c.c17 end, '') || ',' || coalesce(case when c.c18 ~ '[",
]' then '"' || replace(c.c18, '"', '""') || '"' else c.c18 end, '') || ',' || coalesce(case when c.c19 ~ '[",
]' then '"' || replace(c.c19, '"', '""') || '"' else c.c19 end, '') || ',' || coalesce(case when c.c20 ~ '[",
]' then '"' || replace(c.c20, '"', '""') || '"' else c.c20 end, '') || ',' || coalesce(case when c.c21 ~ '[",
]' then '"' || replace(c.c21, '"', '""') || '"' else c.c21 end, '') end from (select c.*, coalesce(c.c0, '') || ',' || coalesce(c.c1, '') || ',' || coalesce(c.c2, '') || ',' || coalesce(c.c3, '') || ',' || coalesce(c.c4, '') || ',' || coalesce(c.c5, '') || ',' || coalesce(c.c6, '') || ',' || coalesce(c.c7, '') || ',' || coalesce(c.c8, '') || ',' || coalesce(c.c9, '') || ',' || coalesce(c.c10, '') || ',' || coalesce(c.c11, '') || ',' || coalesce(c.c12, '') || ',' || coalesce(c.c13, '') || ',' || coalesce(c.c14, '') || ',' || coalesce(c.c15, '') || ',' || coalesce(c.c16, '') || ',' || coalesce(c.c17, '') || ',' || coalesce(c.c18, '') || ',' || coalesce(c.c19, '') || ',' || coalesce(c.c20, '') || ',' || coalesce(c.c21, '') as line from (
    select e.activity_id as c0, coalesce(e.split_id, e.activity_id) as c1, e.activity_name as c2, coalesce(e.split_name, e.activity_name) as c3, coalesce(e.split_sender_name, e.sender_name) as c4, coalesce(e.split_email_subject, e.email_subject) as c5, coalesce(case when jsonb_typeof(d.attrs -> ($9::text[])[array_position($8::bigint[], e.section_id)]) = 'string' then d.attrs -> ($9::text[])[array_position($8::bigint[], e.section_id)] #>> '{}' end, (
      select x.attrs ->> s.version from unnest($8::bigint[], $10::text[]) s(section_id, version)
      cross join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = ep.canonical_id and ps.section_id = s.section_id) x
      where jsonb_typeof(x.attrs -> s.version) = 'string' order by s.section_id limit 1)) as c6, e.variation as c7, e.type as c8, e.correlation_id as c9, case when e.source_time is null or e.source_time < $14::timestamptz then '0' else (floor(extract(epoch from e.source_time) * 1000))::bigint::text end as c10, (floor(extract(epoch from e.server_time) * 1000))::bigint::text as c11, case when e.type in ('OPENED', 'CLICKED') then e.device end as c12, case when e.type in ('OPENED', 'CLICKED') then e.location end as c13, case when e.type in ('CLICKED') then e.link_id end as c14, case when e.type in ('CLICKED') then e.link_url end as c15, case when e.type in ('CLICKED') then e.link_title end as c16, case when e.type in ('BOUNCED') then e.bounce_code::text end as c17, case when e.type in ('UNSUBSCRIBED') then e.unsubscribe_topic end as c18, case when e.type in ('ABUSE') then ($15::text[])[array_position($8::bigint[], e.section_id)] end as c19, case jsonb_typeof(m0.attrs -> $12::text) when 'string' then (m0.attrs -> $12::text) #>> '{}' when 'null' then null else (m0.attrs -> $12::text)::text end as c20, case when m0.tags -> $13::text = 'true'::jsonb then 'TAG' end as c21
    from (select e.section_id, e.event_time, e.event_id, e.profile_id, e.activity_id, e.split_id, e.variation, e.type, e.correlation_id,
      e.source_time, e.server_time, e.device, e.location, e.link_id, e.link_url, e.link_title, e.bounce_code, e.unsubscribe_topic,
      a.name as activity_name, a.details ->> 'sender_name' as sender_name, a.details ->> 'email_subject' as email_subject,
      sa.name as split_name, sa.details ->> 'sender_name' as split_sender_name, sa.details ->> 'email_subject' as split_email_subject
    from activity_events e
    join activities a on a.account_id = e.account_id and a.activity_id = e.activity_id
    left join activities sa on sa.account_id = e.account_id and sa.activity_id = e.split_id and sa.kind = 'email'
    where e.account_id = $1::bigint and a.kind = 'email'
      and e.section_id = any($2::bigint[])
      and e.event_time >= $3::timestamptz and e.event_time < $4::timestamptz) e
    join (select m.profile_id, coalesce(m.canonical_id, m.profile_id) as canonical_id from profiles m where m.account_id = $1::bigint) ep on ep.profile_id = e.profile_id
    left join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = ep.canonical_id and ps.section_id = e.section_id) d on true
    left join lateral (select coalesce(ps.cluster_attributes, ps.attributes) as attrs, coalesce(ps.cluster_tags, ps.tags) as tags, ps.updated_at
        from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = ep.canonical_id and ps.section_id = $11::bigint) m0 on true
    where ep.canonical_id in (select profile_id from selected)
    order by e.section_id, e.event_time, e.event_id
    -- offset 0 keeps the subqueries whole: each cell and each line computed once.
    offset 0) c offset 0) c

-- $1 = "7"
-- $2 = ["10"]
-- $3 = "2026-01-01T00:00:00.000Z"
-- $4 = "2026-02-01T00:00:00.000Z"
-- $5 = "10"
-- $6 = "strict $.\"3301\" ? (@ > $c)"
-- $7 = "{\"c\":100}"
-- $8 = ["10"]
-- $9 = ["3101"]
-- $10 = ["3101"]
-- $11 = "10"
-- $12 = "3301"
-- $13 = "41"
-- $14 = "2020-01-01T00:00:00.000Z"
-- $15 = ["shop"]

-- trend
set local enable_sort = off; set local jit = off;
with clustered as (select exists (select m.profile_id, m.canonical_id from profiles m where m.account_id = $1::bigint and m.canonical_id is not null) as yes)
       select * from (select x.mask, x.known, count(*) as n from (
       select coalesce(bit_or(t.mask) filter (where t.term = 1), 0) & coalesce(bit_or(t.mask) filter (where t.term = 0), 0) as mask, bool_or(t.term = -1) as known
       from (select * from ((select coalesce(m.canonical_id, h.profile_id) as profile_id, 1 as term,
          ((-1::bigint << width_bucket(h.set_at - interval '1 microsecond', $2::timestamptz[])) & ~(-1::bigint << width_bucket(h.replaced_at - interval '1 microsecond', $2::timestamptz[]))) as mask
        from attribute_history h left join profiles m on m.account_id = $1::bigint and m.profile_id = h.profile_id and m.canonical_id is not null
        where h.account_id = $1::bigint and h.section_id = $3::bigint and h.version_id = $4::bigint
          and h.replaced_at > $5::timestamptz and h.set_at <= $6::timestamptz and jsonb_path_exists(h.value, $10::jsonpath, $11::jsonb, true)) union all (select coalesce(m.canonical_id, ps.profile_id) as profile_id, 1 as term,
          ((-1::bigint << width_bucket((ps.attribute_set_at ->> $9::text)::bigint - 1, $7::bigint[])) & ~(-1::bigint << cardinality($7::bigint[]))) as mask
        from profile_sections ps left join profiles m on m.account_id = $1::bigint and m.profile_id = ps.profile_id and m.canonical_id is not null
        where ps.account_id = $1::bigint and ps.section_id = $3::bigint and (ps.attribute_set_at ->> $9::text)::bigint <= $8::bigint
          and jsonb_path_exists(ps.attributes, $12::jsonpath, $13::jsonb, true)) union all (select p.profile_id, 0 as term, (1::bigint << cardinality($2::timestamptz[])) - (1::bigint << width_bucket(p.created_at - interval '1 microsecond', $2::timestamptz[])) as mask
       from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p) union all (select k.profile_id, -1 as term, 0::bigint as mask from (select coalesce(m.canonical_id, i.profile_id) as profile_id from profile_identifiers i
       left join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id and m.canonical_id is not null
       where i.account_id = $1::bigint and i.keyspace_id = any($25::bigint[])) k)) u order by u.profile_id) t
       group by t.profile_id
     ) x
     where x.mask <> 0
     group by x.mask, x.known) general where (select yes from clustered)
       union all
       select * from (select x.mask, x.known, count(*) as n from (
       select coalesce(bit_or(t.mask) filter (where t.term = 1), 0) & coalesce(bit_or(t.mask) filter (where t.term = 0), 0) as mask, bool_or(t.term = -1) as known
       from (select * from ((select h.profile_id as profile_id, 1 as term,
          ((-1::bigint << width_bucket(h.set_at - interval '1 microsecond', $2::timestamptz[])) & ~(-1::bigint << width_bucket(h.replaced_at - interval '1 microsecond', $2::timestamptz[]))) as mask
        from attribute_history h 
        where h.account_id = $1::bigint and h.section_id = $14::bigint and h.version_id = $15::bigint
          and h.replaced_at > $16::timestamptz and h.set_at <= $17::timestamptz and jsonb_path_exists(h.value, $21::jsonpath, $22::jsonb, true)) union all (select ps.profile_id as profile_id, 1 as term,
          ((-1::bigint << width_bucket((ps.attribute_set_at ->> $20::text)::bigint - 1, $18::bigint[])) & ~(-1::bigint << cardinality($18::bigint[]))) as mask
        from profile_sections ps 
        where ps.account_id = $1::bigint and ps.section_id = $14::bigint and (ps.attribute_set_at ->> $20::text)::bigint <= $19::bigint
          and jsonb_path_exists(ps.attributes, $23::jsonpath, $24::jsonb, true)) union all (select p.profile_id, 0 as term, (1::bigint << cardinality($2::timestamptz[])) - (1::bigint << width_bucket(p.created_at - interval '1 microsecond', $2::timestamptz[])) as mask
       from (select p.* from profiles p where p.account_id = $1::bigint and p.canonical_id is null) p) union all (select k.profile_id, -1 as term, 0::bigint as mask from (select i.profile_id from profile_identifiers i where i.account_id = $1::bigint and i.keyspace_id = any($25::bigint[])) k)) u order by u.profile_id) t
       group by t.profile_id
     ) x
     where x.mask <> 0
     group by x.mask, x.known) simple where not (select yes from clustered)

-- $1 = "7"
-- $2 = ["2026-01-01T00:00:00.000Z","2026-01-10T00:00:00.000Z"]
-- $3 = "10"
-- $4 = "3301"
-- $5 = "2026-01-01T00:00:00.000Z"
-- $6 = "2026-01-10T00:00:00.000Z"
-- $7 = ["1767225600000000","1768003200000000"]
-- $8 = "1768003200000000"
-- $9 = "3301"
-- $10 = "strict $ ? (@ > $c)"
-- $11 = "{\"c\":100}"
-- $12 = "strict $.\"3301\" ? (@ > $c)"
-- $13 = "{\"c\":100}"
-- $14 = "10"
-- $15 = "3301"
-- $16 = "2026-01-01T00:00:00.000Z"
-- $17 = "2026-01-10T00:00:00.000Z"
-- $18 = ["1767225600000000","1768003200000000"]
-- $19 = "1768003200000000"
-- $20 = "3301"
-- $21 = "strict $ ? (@ > $c)"
-- $22 = "{\"c\":100}"
-- $23 = "strict $.\"3301\" ? (@ > $c)"
-- $24 = "{\"c\":100}"
-- $25 = ["1","3"]

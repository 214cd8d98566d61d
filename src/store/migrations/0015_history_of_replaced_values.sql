-- Attribute history holds replaced values only (issue #17, docs/profiles.md "History"): a row is
-- a past value with the time it was set and the time it was replaced, written when it is
-- replaced. The time each current value was set is kept beside the values, in
-- `profile_sections.attribute_set_at`. A profile's first values thus write no history row (an
-- import of a new profile wrote six), and a trend reads each value's span from its row instead
-- of finding its end with a window function, which kept PostgreSQL from any parallel plan.

-- Attribute version id → when the entry of `attributes` with that key was set, in microseconds
-- since 1970 (a JSON integer: exact, and compared with the sampling points of a trend as bigint).
alter table profile_sections add column attribute_set_at jsonb not null default '{}';

alter table attribute_history rename column changed_at to set_at;
alter table attribute_history add column replaced_at timestamptz;

-- When each row's value stopped being the value: the next change of the same attribute of the
-- same profile (a null row, a clear, ends a value as any other change does).
create temporary table history_order on commit drop as
  select ctid as row_id, account_id, profile_id, section_id, version_id, value, set_at,
    lead(set_at) over (partition by account_id, profile_id, section_id, version_id order by set_at, ctid) as next_at
  from attribute_history;

-- The last change of each attribute is its current entry: its time becomes the entry's set time
-- when the profile's own entry still holds that value (null for a value cleared on the canonical
-- profile of a merge cluster); an entry written without history (taken over from the cluster on
-- an unmerge) is taken as set when its section row was last written.
update profile_sections ps set attribute_set_at = t.times
from (
  select s.account_id, s.profile_id, s.section_id,
    jsonb_object_agg(e.key, (extract(epoch from coalesce(h.set_at, s.updated_at)) * 1000000)::bigint) as times
  from profile_sections s
  cross join jsonb_each(s.attributes) e
  left join history_order h on h.next_at is null and h.account_id = s.account_id and h.profile_id = s.profile_id
    and h.section_id = s.section_id and h.version_id = e.key::bigint and coalesce(h.value, 'null'::jsonb) = e.value
  group by s.account_id, s.profile_id, s.section_id
) t
where ps.account_id = t.account_id and ps.profile_id = t.profile_id and ps.section_id = t.section_id;

update attribute_history a set replaced_at = h.next_at from history_order h where a.ctid = h.row_id and h.next_at is not null;
-- A last change whose value is not the own entry any more was replaced without history: closed
-- when its section row was last written.
update attribute_history a set replaced_at = greatest(a.set_at, ps.updated_at)
from profile_sections ps
where a.replaced_at is null and a.value is not null
  and ps.account_id = a.account_id and ps.profile_id = a.profile_id and ps.section_id = a.section_id
  and (ps.attributes -> a.version_id::text) is distinct from a.value;
-- What is left open is a current value, now in attribute_set_at, or a clear, which is the end of
-- the value before it.
delete from attribute_history where replaced_at is null or value is null;

alter table attribute_history alter column replaced_at set not null, alter column value set not null;

-- The spans of one attribute version, profile by profile: a trend reads them index-only.
drop index attribute_history_by_attribute;
create index attribute_history_by_attribute on attribute_history (account_id, section_id, version_id, profile_id, set_at) include (replaced_at, value);

-- The values of `old_values` that a write replaced (the entry now holds another value, null, or
-- is gone), each with its set time from `old_times`: the history rows of the write.
create function profile_replaced_values(old_times jsonb, old_values jsonb, new_values jsonb)
  returns table (version_id bigint, value jsonb, set_at timestamptz) language sql stable as $$
  select o.key::bigint, o.value, to_timestamp(0) + (old_times ->> o.key)::bigint * interval '1 microsecond'
  from jsonb_each(old_values) o
  where o.value <> 'null'::jsonb and (new_values -> o.key) is distinct from o.value and old_times ? o.key
$$;

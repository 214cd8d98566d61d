-- The common profile write, attribute values of profiles given by key (PATCH of attributes), as one
-- function call (src/profiles/queries/section-writes.ts). On Citus a call that names the account in
-- its first argument runs whole on the worker that holds the account (src/store/distribute.ts
-- distributes it by account_id), and inside it every statement reads or writes one row of one table
-- by its key: Citus routes such a statement to the local shard with a plan it keeps, as PostgreSQL
-- does for a prepared statement. The same write as one statement with data-modifying parts was
-- planned there as ten steps, each routed from the coordinator, with a two-phase commit on every
-- worker (docs/benchmarks.md "Citus cluster against one PostgreSQL").
--
-- It follows the rules of the section-data statements (src/profiles/queries/section-rules.ts): the
-- patches of one section row (a key given twice, two keys of a cluster) are one write, applied in
-- order, at the time of the last; a standalone profile drops cleared entries, a cluster's leader keeps
-- them in its own values and updates the cluster's; a value that keeps its value keeps its set time;
-- replaced values go to the history. Rows are written in the order of their keys, so that two calls
-- cannot deadlock. A row that another writer changed since it was read, or created meanwhile, fails
-- the whole call with serialization_failure (profile_write_raced), and its caller writes it again.
-- Answers the positions (from 1) of the patches whose key names a profile; the others write nothing.
create function profile_write_attributes(
  account_id bigint, keyspace_ids bigint[], profile_keys jsonb, section_ids bigint[], patches jsonb, changed_at jsonb
) returns setof int language plpgsql as $$
#variable_conflict use_column
declare
  found_profile bigint;
  profile_ids bigint[] := '{}';
  found_sections bigint[] := '{}';
  positions int[] := '{}';
  target record;
  old record;
  patch jsonb;
  written_at timestamptz;
  micros jsonb;
  next_values jsonb;
  next_set_at jsonb;
  replaced record;
  k int;
begin
  for k in 1 .. coalesce(array_length($2, 1), 0) loop
    select ids.profile_id into found_profile from profile_identifiers ids
    where ids.account_id = $1 and ids.keyspace_id = $2[k] and ids.profile_key = $3 ->> (k - 1);
    continue when not found;
    select coalesce(p.canonical_id, p.profile_id) into found_profile from profiles p
    where p.account_id = $1 and p.profile_id = found_profile;
    continue when not found;
    profile_ids := profile_ids || found_profile;
    found_sections := found_sections || $4[k];
    positions := positions || k;
  end loop;

  for target in
    select u.profile_id, u.section_id, array_agg(u.n order by u.n) as ns
    from unnest(profile_ids, found_sections, positions) as u(profile_id, section_id, n)
    group by u.profile_id, u.section_id
    order by u.profile_id, u.section_id
  loop
    patch := '{}'::jsonb;
    written_at := null;
    foreach k in array target.ns loop
      patch := patch || ($5 -> (k - 1));
      written_at := greatest(written_at, ($6 ->> (k - 1))::timestamptz);
    end loop;
    micros := (extract(epoch from written_at - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb;

    select ps.attributes, ps.attribute_set_at, ps.cluster_attributes into old from profile_sections ps
    where ps.account_id = $1 and ps.profile_id = target.profile_id and ps.section_id = target.section_id;
    if not found then
      -- The profile's first values in the section: a new row, unless another writer made it meanwhile.
      next_values := jsonb_strip_nulls(patch);
      next_set_at := (select coalesce(jsonb_object_agg(e.key, micros), '{}'::jsonb) from jsonb_each(next_values) e);
      insert into profile_sections (account_id, profile_id, section_id, attributes, tags, attribute_set_at)
      values ($1, target.profile_id, target.section_id, next_values, '{}'::jsonb, next_set_at)
      on conflict do nothing;
      if not found then
        perform profile_write_raced();
      end if;
    else
      next_values := case when old.cluster_attributes is null then jsonb_strip_nulls(old.attributes || patch)
        else old.attributes || patch end;
      next_set_at := (select coalesce(jsonb_object_agg(e.key,
          case when old.attributes -> e.key = e.value and old.attribute_set_at ? e.key then old.attribute_set_at -> e.key
          else micros end), '{}'::jsonb)
        from jsonb_each(next_values) e);
      -- Only a row that still holds what was read (checked again on its latest version).
      update profile_sections ps set attributes = next_values, attribute_set_at = next_set_at,
        cluster_attributes = case when ps.cluster_attributes is not null then jsonb_strip_nulls(ps.cluster_attributes || patch) end,
        updated_at = now()
      where ps.account_id = $1 and ps.profile_id = target.profile_id and ps.section_id = target.section_id
        and ps.attributes = old.attributes and ps.attribute_set_at = old.attribute_set_at;
      if not found then
        perform profile_write_raced();
      end if;
      for replaced in select * from profile_replaced_values(old.attribute_set_at, old.attributes, next_values) loop
        insert into attribute_history (account_id, profile_id, section_id, version_id, value, set_at, replaced_at)
        values ($1, target.profile_id, target.section_id, replaced.version_id, replaced.value, replaced.set_at, written_at);
      end loop;
    end if;
    return query select unnest(target.ns);
  end loop;
end
$$;

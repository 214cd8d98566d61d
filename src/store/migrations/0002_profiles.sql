-- Profiles (SPEC §2.2, §2.12, §3.2, §4.3, §4.4): identity, data per section, history, events,
-- merge clusters and locked identities.

create table profiles (
  account_id bigint not null references accounts on delete cascade,
  profile_id bigint generated always as identity,
  -- The service-assigned key of the export keyspace ([a-zA-Z0-9-]*).
  export_key text not null,
  -- The canonical profile of this profile's merge cluster; null when this profile is canonical or standalone.
  canonical_id bigint,
  created_at timestamptz not null default now(),
  primary key (account_id, profile_id),
  unique (account_id, export_key)
);
create index profiles_by_canonical on profiles (account_id, canonical_id) where canonical_id is not null;

-- Unique identifiers: a key in a keyspace locates the member profile that owns it; its cluster's
-- canonical profile holds the data. Merging never moves identifiers, so unmerging can give them back.
create table profile_identifiers (
  account_id bigint not null,
  keyspace_id bigint not null,
  profile_key text not null,
  profile_id bigint not null,
  primary key (account_id, keyspace_id, profile_key),
  foreign key (account_id, profile_id) references profiles on delete cascade
);
create index profile_identifiers_by_profile on profile_identifiers (account_id, profile_id);

-- A profile's data in one section. `attributes` maps attribute version id → value and `tags` tag
-- id → true, both the profile's own. On the canonical profile of a merge cluster, `cluster_*` hold
-- what the cluster shows (docs/profiles.md "Merge"), and a null or false in the own maps records a
-- value cleared after the merge.
create table profile_sections (
  account_id bigint not null,
  profile_id bigint not null,
  section_id bigint not null,
  attributes jsonb not null default '{}',
  tags jsonb not null default '{}',
  cluster_attributes jsonb,
  cluster_tags jsonb,
  updated_at timestamptz not null default now(),
  primary key (account_id, profile_id, section_id),
  foreign key (account_id, profile_id) references profiles on delete cascade
);

-- Every attribute change, for attribute history in exports and counts over time.
create table attribute_history (
  account_id bigint not null,
  profile_id bigint not null,
  section_id bigint not null,
  version_id bigint not null,
  -- null: the value was cleared.
  value jsonb,
  changed_at timestamptz not null,
  foreign key (account_id, profile_id) references profiles on delete cascade
);
create index attribute_history_by_profile on attribute_history (account_id, profile_id, section_id, version_id, changed_at);
create index attribute_history_by_version on attribute_history (account_id, version_id, changed_at);

-- Events are appended and never rewritten; merges leave them on the profile that received them.
create table profile_events (
  account_id bigint not null,
  profile_id bigint not null,
  event_id bigint generated always as identity,
  section_id bigint not null,
  version_id bigint not null,
  event_time timestamptz not null,
  created_at timestamptz not null,
  correlation_id text not null,
  data jsonb not null,
  primary key (account_id, profile_id, event_id),
  foreign key (account_id, profile_id) references profiles on delete cascade
);
create index profile_events_by_time on profile_events (account_id, profile_id, section_id, event_time desc);

-- What remains of a locked profile: a keyed hash (HMAC with the server secret) of each of its
-- normalised identifiers. No plaintext is kept.
create table locked_identities (
  account_id bigint not null references accounts on delete cascade,
  identity_hash bytea not null,
  locked_at timestamptz not null default now(),
  primary key (account_id, identity_hash)
);

-- The tags of a tag map that are set (true); null for null.
create function profile_true_tags(tags jsonb) returns jsonb language sql immutable strict as $$
  select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(tags) where value = 'true'::jsonb
$$;

-- Consents and suppressions (SPEC §2.10, §2.11, §3.1, §4.5).

-- A profile's consent per topic and channel. Kept on the profile that received it; a merge cluster
-- shows, per topic and channel, the most recently modified consent of its members.
create table consents (
  account_id bigint not null,
  profile_id bigint not null,
  topic_id bigint not null,
  channel_id bigint not null,
  section_id bigint not null,
  type text not null,
  reason text not null,
  source text not null,
  -- The profile's address on the channel when the consent was given; it follows address changes.
  address text,
  modified_at timestamptz not null,
  primary key (account_id, profile_id, topic_id, channel_id),
  foreign key (account_id, profile_id) references profiles on delete cascade
);
create index consents_by_section on consents (account_id, section_id, topic_id, channel_id);

-- Every consent change, with its time, reason and source.
create table consent_history (
  account_id bigint not null,
  profile_id bigint not null,
  topic_id bigint not null,
  channel_id bigint not null,
  section_id bigint not null,
  type text not null,
  reason text not null,
  source text not null,
  address text,
  changed_at timestamptz not null,
  foreign key (account_id, profile_id) references profiles on delete cascade
);
create index consent_history_by_profile on consent_history (account_id, profile_id, changed_at);

-- Addresses that receive no marketing on a channel, whatever their consents (SPEC §2.11).
create table suppressions (
  account_id bigint not null references accounts on delete cascade,
  channel_id bigint not null,
  address text not null,
  reason text not null,
  created_at timestamptz not null default now(),
  primary key (account_id, channel_id, address)
);

-- Live segments (docs/aql.md "Live segments"): a stored segment whose members are kept up to date
-- by the writes and by time, with each entry and exit recorded.

-- Set when the segment is live: the time zone its membership is evaluated in. The definitions
-- snapshot carries it, so a write knows without a read whether its account keeps live segments.
alter table segments add column live_time_zone text;

-- Profiles written since the live segments last looked at them: a row per profile, written in the
-- transaction of the write (only when the account has a live segment), taken by the job that
-- brings the memberships up to date.
create table profile_changes (
  account_id bigint not null,
  profile_id bigint not null,
  changed_at timestamptz not null default now(),
  primary key (account_id, profile_id)
);

-- The state of each live segment's membership: the version and time zone it was computed from
-- (another one, or none, means it is computed again whole), and when it was last brought up to date.
create table live_segments (
  account_id bigint not null,
  segment_id bigint not null,
  version_id bigint,
  time_zone text not null,
  live_since timestamptz not null,
  -- The last pass (writes applied) and the last whole evaluation (time's moves applied); null: none yet.
  refreshed_at timestamptz,
  evaluated_at timestamptz,
  primary key (account_id, segment_id),
  foreign key (account_id, segment_id) references segments on delete cascade
);

-- The members of a live segment (canonical profiles), with when they entered.
create table segment_members (
  account_id bigint not null,
  segment_id bigint not null,
  profile_id bigint not null,
  -- Kept so that an exit can name a profile deleted meanwhile.
  export_key text not null,
  entered_at timestamptz not null,
  primary key (account_id, segment_id, profile_id),
  foreign key (account_id, segment_id) references live_segments on delete cascade
);

-- Every entry and exit of a live segment, in order: what its trend is counted from.
create table segment_member_changes (
  account_id bigint not null,
  segment_id bigint not null,
  change_seq bigint generated always as identity,
  profile_id bigint not null,
  entered boolean not null,
  at timestamptz not null,
  primary key (account_id, segment_id, change_seq),
  foreign key (account_id, segment_id) references live_segments on delete cascade
);
create index segment_member_changes_at on segment_member_changes (account_id, segment_id, at);

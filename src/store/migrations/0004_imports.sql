-- Jobs for the worker, and profile imports (SPEC §2.13, §4.6).

-- A job runs in one worker at a time: a worker leases it (locked_until) and renews the lease while
-- it works, so the job of a worker that died is taken up again as soon as its lease runs out.
create table jobs (
  account_id bigint not null references accounts on delete cascade,
  job_id bigint generated always as identity,
  kind text not null,
  payload jsonb not null,
  run_at timestamptz not null default now(),
  locked_until timestamptz,
  attempts integer not null default 0,
  last_error text,
  created_at timestamptz not null default now(),
  primary key (account_id, job_id)
);
create index jobs_ready on jobs (run_at);

create table imports (
  account_id bigint not null references accounts on delete cascade,
  import_id uuid not null,
  section_id bigint not null,
  -- 1: keyspace_mappings (deprecated); 2: keyspace_mapping.
  version integer not null,
  request jsonb not null,
  -- waiting_for_file, queued, in_progress, completed or error.
  status text not null,
  file_key text not null,
  upload_expires_at timestamptz not null,
  -- Data rows read so far; the worker resumes after them.
  rows_done integer not null default 0,
  profiles_found integer not null default 0,
  profiles_processed integer not null default 0,
  profiles_failed integer not null default 0,
  profiles_new integer not null default 0,
  profiles_updated integer not null default 0,
  profiles_not_changed integer not null default 0,
  message text,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  primary key (account_id, import_id)
);
create index imports_pending on imports (account_id) where status in ('waiting_for_file', 'queued', 'in_progress');

-- The rows an import could not take, with their line in the file and the reason.
create table import_failures (
  account_id bigint not null,
  import_id uuid not null,
  line integer not null,
  reason text not null,
  primary key (account_id, import_id, line),
  foreign key (account_id, import_id) references imports on delete cascade
);

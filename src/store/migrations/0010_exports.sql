-- Exports and counts (SPEC §2.16, §3.3, §4.7): each request is a row, answered at its poll URL
-- once the worker has written its file (or its result, for a count).

create table exports (
  account_id bigint not null references accounts on delete cascade,
  export_id uuid not null,
  -- consents, consents-count, duplicates or segments (docs/exports.md).
  kind text not null,
  -- The request body as it was checked when the export was created; the worker checks it again.
  -- json, not jsonb: the order of the keys of name maps (segments) is the order of the file's columns.
  request json not null,
  -- queued, in_progress, ready, failed or expired.
  status text not null,
  -- The gzip-compressed file of a ready file export, until it expires.
  file_key text,
  -- The answer of a ready count.
  result jsonb,
  -- Why a failed export failed.
  message text,
  created_at timestamptz not null,
  ready_at timestamptz,
  -- When a ready export stops being served (SPEC §8: poll URLs are valid for 1 day).
  expires_at timestamptz,
  primary key (account_id, export_id)
);
create index exports_pending on exports (account_id) where status in ('queued', 'in_progress');

-- A job that fails its last attempt is kept, marked failed, for the operator to see
-- (GET /admin/jobs?state=failed, the metric audience_jobs{state="failed"}); workers skip it.
alter table jobs add column failed_at timestamptz;
drop index jobs_ready;
create index jobs_ready on jobs (run_at) where failed_at is null;

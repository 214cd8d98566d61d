-- Transactional send jobs (docs/benchmarks.md "Transactional mail").
--
-- A transactional send's job carries the send (src/transactional/transactional.ts): its activity,
-- section, keyspace, profile key and what the message is made of, so the worker does not read the
-- send's row, and the job exists exactly while the send is queued (docs/benchmarks.md
-- "Transactional mail"). The jobs of sends queued before this migration held the transaction id
-- only: they get the send's fields; those whose send is no longer queued had nothing left to do.
update jobs j set payload = j.payload || jsonb_build_object(
    'activity_id', s.activity_id, 'section_id', s.section_id::text, 'keyspace_id', s.keyspace_id::text,
    'profile_key', s.profile_key, 'request', s.request)
  from transactional_sends s
  where j.kind = 'transactional-send' and not j.payload ? 'request'
    and s.account_id = j.account_id and s.transaction_id = (j.payload ->> 'transaction_id')::uuid
    and s.status = 'queued' and s.request is not null;
delete from jobs where kind = 'transactional-send' and not payload ? 'request';
-- What a send is made of is kept in its job from now on (the sends no longer queued had dropped it).
alter table transactional_sends drop column request;

-- A worker's loop claims several jobs in one statement (transactional sends: docs/benchmarks.md
-- "Transactional mail"); as claim_job (0014), without waiting for the WAL flush.
create function claim_jobs(kinds text[], lease_seconds integer, max_jobs integer)
returns table (account_id bigint, job_id bigint, kind text, payload jsonb, attempts integer)
language plpgsql as $$
begin
  perform set_config('synchronous_commit', 'off', true);
  return query
    update jobs j set locked_until = now() + make_interval(secs => lease_seconds), attempts = j.attempts + 1
    where (j.account_id, j.job_id) in (
      select c.account_id, c.job_id from jobs c
      where c.kind = any(kinds) and c.failed_at is null and c.run_at <= now() and (c.locked_until is null or c.locked_until < now())
      order by c.run_at, c.job_id for update skip locked limit max_jobs)
    returning j.account_id, j.job_id, j.kind, j.payload, j.attempts;
end
$$;
drop function claim_job(text[], integer);

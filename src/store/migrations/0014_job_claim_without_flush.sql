-- A worker's claim of a job (src/jobs/queue.ts) commits without waiting for its WAL flush
-- (docs/benchmarks.md "Transactional mail": with a dozen send lanes, claims waited on WAL flushes
-- more than on anything else). A claim that a crash loses only sets a lease and counts an attempt:
-- the job is claimable again at once, as after any crash when its lease runs out; the job's own
-- writes commit as they did.
create function claim_job(kinds text[], lease_seconds integer)
returns table (account_id bigint, job_id bigint, kind text, payload jsonb, attempts integer)
language plpgsql as $$
begin
  -- Local to the transaction the claim's statement is (autocommitted): its commit does not wait.
  perform set_config('synchronous_commit', 'off', true);
  return query
    update jobs j set locked_until = now() + make_interval(secs => lease_seconds), attempts = j.attempts + 1
    where (j.account_id, j.job_id) = (
      select c.account_id, c.job_id from jobs c
      where c.kind = any(kinds) and c.failed_at is null and c.run_at <= now() and (c.locked_until is null or c.locked_until < now())
      order by c.run_at, c.job_id for update skip locked limit 1)
    returning j.account_id, j.job_id, j.kind, j.payload, j.attempts;
end
$$;

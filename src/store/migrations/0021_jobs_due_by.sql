-- A worker may say until when jobs are due (the emulator's clock, moved ahead of the database's:
-- docs/emulator.md "Clock"): jobs due by that time or by the database's, whichever is later (jobs
-- enqueued to run at once are due at the database's time, which a stopped clock falls behind).
-- Without it, the database's own time decides, as before.
drop function claim_jobs(text[], integer, integer);
create function claim_jobs(kinds text[], lease_seconds integer, max_jobs integer, due_by timestamptz default null)
returns table (account_id bigint, job_id bigint, kind text, payload jsonb, attempts integer)
language plpgsql as $$
begin
  perform set_config('synchronous_commit', 'off', true);
  return query
    update jobs j set locked_until = now() + make_interval(secs => lease_seconds), attempts = j.attempts + 1
    where (j.account_id, j.job_id) in (
      select c.account_id, c.job_id from jobs c
      where c.kind = any(kinds) and c.failed_at is null and c.run_at <= greatest(due_by, now())
        and (c.locked_until is null or c.locked_until < now())
      order by c.run_at, c.job_id for update skip locked limit max_jobs)
    returning j.account_id, j.job_id, j.kind, j.payload, j.attempts;
end
$$;

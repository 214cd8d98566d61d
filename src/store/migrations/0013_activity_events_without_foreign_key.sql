-- activity_events loses its foreign key to profiles (docs/benchmarks.md "Activities"): each check
-- is a query of its own per event row, a seventh of the database's work in an ingestion batch.
--
-- What the key guaranteed still holds:
-- - No event outlives its profile: deleting profiles (directly, or with their account) deletes
--   their events in the trigger below, in the same statement.
-- - No event is written for a profile being deleted: every activity event is written with its
--   profile event in the same transaction, and profile_events keeps its foreign key, which locks
--   the profile until the batch commits (a delete waits for it, then its trigger sees the events).

alter table activity_events drop constraint activity_events_account_id_profile_id_fkey;

create function forget_profile_activity_events() returns trigger language plpgsql as $$
begin
  delete from activity_events e using deleted_profiles d where e.account_id = d.account_id and e.profile_id = d.profile_id;
  return null;
end
$$;

create trigger profiles_forget_activity_events after delete on profiles
  referencing old table as deleted_profiles
  for each statement execute function forget_profile_activity_events();

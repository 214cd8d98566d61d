-- profile_events loses its foreign key to profiles (docs/benchmarks.md "Activities"): each check is
-- a query of its own per event row, the largest single cost left in an ingestion batch of activity
-- events after migration 0013.
--
-- What the key guaranteed still holds:
-- - No event outlives its profile: deleting profiles (directly, or with their account) deletes
--   their events in the trigger below, in the same statement.
-- - No event is written for a profile being deleted: every writer of profile events locks the
--   profiles it writes to (`for key share`, what the key's check took, but once per profile in one
--   statement, in profile id order) before it writes, and skips those already gone
--   (src/profiles/events.ts). A delete waits for the writer to commit, then its trigger sees the events.

alter table profile_events drop constraint profile_events_account_id_profile_id_fkey;

create function forget_profile_events() returns trigger language plpgsql as $$
begin
  delete from profile_events e using deleted_profiles d where e.account_id = d.account_id and e.profile_id = d.profile_id;
  return null;
end
$$;

create trigger profiles_forget_events after delete on profiles
  referencing old table as deleted_profiles
  for each statement execute function forget_profile_events();

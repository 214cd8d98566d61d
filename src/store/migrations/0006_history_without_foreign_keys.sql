-- The append-only history tables lose their foreign keys to profiles (docs/benchmarks.md
-- "Imports"): a new profile writes about eight history rows, and each foreign-key check is a query
-- of its own, which made up a third of the database's work in a bulk import.
--
-- What the keys guaranteed still holds:
-- - No history outlives its profile: deleting profiles (directly, or with their account) deletes
--   their history in the trigger below, in the same statement.
-- - No history is written for a profile being deleted: an attribute change is written with the
--   profile's section data, and a consent change with the consent, in the same transaction, and
--   those two tables keep their foreign keys, which lock the profile until the change commits.

alter table attribute_history drop constraint attribute_history_account_id_profile_id_fkey;
alter table consent_history drop constraint consent_history_account_id_profile_id_fkey;

create function forget_profile_history() returns trigger language plpgsql as $$
begin
  delete from attribute_history h using deleted_profiles d where h.account_id = d.account_id and h.profile_id = d.profile_id;
  delete from consent_history h using deleted_profiles d where h.account_id = d.account_id and h.profile_id = d.profile_id;
  return null;
end
$$;

create trigger profiles_forget_history after delete on profiles
  referencing old table as deleted_profiles
  for each statement execute function forget_profile_history();

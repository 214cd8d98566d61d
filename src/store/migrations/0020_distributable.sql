-- The schema takes the form Citus can distribute by account (docs/scaling.md), on every deployment.
--
-- Citus refuses triggers on distributed tables: the three statement triggers that forgot a deleted
-- profile's history and events go, and the deletion of profiles deletes those rows itself, in the
-- same transaction (src/profiles/queries.ts deleteProfiles, and the follower of consents and
-- activities, ProfileFollower.profilesDeleted).
drop trigger profiles_forget_history on profiles;
drop trigger profiles_forget_activity_events on profiles;
drop trigger profiles_forget_events on profiles;
drop function forget_profile_history();
drop function forget_profile_activity_events();
drop function forget_profile_events();

-- The job queue stays on the coordinator, where a foreign key to the accounts, a reference table,
-- would make Citus manage it as a table of its own; the queue's rows are short-lived, and an
-- account's jobs that outlive it fail once their handler finds no account.
alter table jobs drop constraint jobs_account_id_fkey;

-- Citus moves a shard to another node (a rebalance) by logical replication while it takes writes;
-- a table without a primary key then needs its whole old row in the WAL to replicate a delete.
-- Only under wal_level = logical does this cost anything.
alter table attribute_history replica identity full;
alter table consent_history replica identity full;

-- A profile's export key is its `profiles.export_key` (unique per account) and is found there; the
-- identifier rows that repeated it in the export keyspace go (docs/profiles.md "Keys"): a profile
-- is created with one identifier row and one index entry fewer, and profile_identifiers, which
-- counts and trends scan for known profiles, holds half the rows. Only rows equal to their
-- profile's export key are removed; the service never wrote any other key in that keyspace.
delete from profile_identifiers i
using keyspaces k, profiles p
where k.account_id = i.account_id and k.keyspace_id = i.keyspace_id and k.kind = 'export'
  and p.account_id = i.account_id and p.profile_id = i.profile_id and p.export_key = i.profile_key;

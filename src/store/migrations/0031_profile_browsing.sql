-- The console's list of a section's profiles (src/profiles/browse.ts): most recently updated
-- first, a page at a time from a cursor (updated_at, profile_id), read in this index's order
-- rather than by sorting every row of the section.
create index profile_sections_by_update on profile_sections (account_id, section_id, updated_at desc, profile_id desc);

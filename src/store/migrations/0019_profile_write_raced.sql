-- Raised by a write of profile section rows (src/profiles/queries.ts) that finds a row changed or
-- created by another writer since the statement read it, so that nothing of the statement
-- commits and its caller writes it again (issue 23). The write reads the values it replaces
-- before it writes, since PostgreSQL before 18 has no RETURNING old, and writes only rows that
-- still hold them; serialization_failure (40001) is the error a client retries.
create function profile_write_raced() returns boolean language plpgsql as $$
begin
  raise exception 'a profile section row was written by another transaction during this write'
    using errcode = 'serialization_failure';
end
$$;

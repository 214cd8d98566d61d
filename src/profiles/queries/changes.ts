/**
 * The profiles written since the live segments last looked at them (profile_changes, migration
 * 0028): marked in the transaction of each write that can change what a segment tests, taken by
 * the live segments job (src/segments/live.ts).
 */
import { idArray } from '../../store/arrays.ts';
import type { Queryable } from '../../store/pool.ts';

/**
 * Marks profiles as written (once each until they are taken), with what the write changed of them
 * (`kinds`, bits: migration 0033; a profile marked again gets the bits it lacked), and leaves the
 * transaction's marks for the count projections (projection_marks, migration 0032), in one
 * statement.
 */
export async function insertProfileChanges(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  kinds: number,
): Promise<void> {
  await db.query(
    `with projected as (
       insert into projection_marks (account_id, profile_id)
       select $1::bigint, id from unnest($2::bigint[]) as id on conflict do nothing
     )
     insert into profile_changes as c (account_id, profile_id, kinds)
     select $1::bigint, id, $3::smallint from unnest($2::bigint[]) as id
     on conflict (account_id, profile_id) do update set kinds = c.kinds | excluded.kinds
       where c.kinds | excluded.kinds <> c.kinds`,
    [accountId, idArray(profileIds), kinds],
  );
}

/**
 * Prunes the account's projection marks (projection_prunes, migration 0032): when the horizon
 * recorded by the last pruning is at least `after` old at `now`, deletes the marks of transactions
 * before it and records the xmin of the caller's snapshot as the next one; the first time, only
 * records. Answers how many marks were deleted (null: not yet due) and whether any are left.
 */
export async function pruneProjectionMarks(
  db: Queryable,
  accountId: string,
  now: Date,
  afterMs: number,
): Promise<{ deleted: number | null; left: boolean }> {
  // The due time as a parameter: Citus refuses a function that is not immutable (timestamptz
  // arithmetic) in the condition of an ON CONFLICT.
  const dueBefore = new Date(now.getTime() - afterMs);
  const { rows } = await db.query<{ horizon: string | null }>(
    `with prior as (
       select next_below from projection_prunes
       where account_id = $1::bigint and recorded_at <= $3::timestamptz
     ), recorded as (
       insert into projection_prunes as p (account_id, pruned_below, next_below, recorded_at)
       values ($1::bigint, '0'::xid8, pg_snapshot_xmin(pg_current_snapshot()), $2::timestamptz)
       on conflict (account_id) do update set pruned_below = p.next_below,
         next_below = excluded.next_below, recorded_at = excluded.recorded_at
         where p.recorded_at <= $3::timestamptz
     )
     select (select next_below::text from prior) as horizon`,
    [accountId, now, dueBefore],
  );
  const horizon = rows[0].horizon;
  let deleted: number | null = null;
  if (horizon !== null)
    deleted =
      (
        await db.query('delete from projection_marks where account_id = $1::bigint and xid < $2::xid8', [
          accountId,
          horizon,
        ])
      ).rowCount ?? 0;
  const left = await db.query<{ left: boolean }>(
    'select exists (select 1 from projection_marks where account_id = $1::bigint) as left',
    [accountId],
  );
  return { deleted, left: left.rows[0].left };
}

/** A marked profile as takeProfileChanges answers it. */
export interface ProfileChange {
  profile_id: string;
  /** The canonical profile of its cluster now; null for a profile deleted since. */
  canonical_id: string | null;
  /** The bits of what its writes changed (insertProfileChanges). */
  kinds: number;
}

/**
 * Takes up to `limit` marked profiles of the account (their marks deleted in the caller's
 * transaction), each with the canonical profile of its cluster now and what its writes changed.
 */
export async function takeProfileChanges(db: Queryable, accountId: string, limit: number): Promise<ProfileChange[]> {
  const { rows } = await db.query<ProfileChange>(
    `with taken as (
       delete from profile_changes where account_id = $1::bigint and profile_id in (
         select profile_id from profile_changes where account_id = $1::bigint order by profile_id limit $2)
       returning profile_id, kinds
     )
     select t.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id, t.kinds
     from taken t left join profiles p on p.account_id = $1::bigint and p.profile_id = t.profile_id`,
    [accountId, limit],
  );
  return rows;
}

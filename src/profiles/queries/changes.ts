/**
 * The profiles written since the live segments last looked at them (profile_changes, migration
 * 0028): marked in the transaction of each write that can change what a segment tests, taken by
 * the live segments job (src/segments/live.ts).
 */
import { idArray } from '../../store/arrays.ts';
import type { Queryable } from '../../store/pool.ts';

/**
 * Marks profiles as written (once each until they are taken), and leaves the transaction's marks
 * for the count projections (projection_marks, migration 0032), in one statement.
 */
export async function insertProfileChanges(db: Queryable, accountId: string, profileIds: string[]): Promise<void> {
  await db.query(
    `with projected as (
       insert into projection_marks (account_id, profile_id)
       select $1::bigint, id from unnest($2::bigint[]) as id on conflict do nothing
     )
     insert into profile_changes (account_id, profile_id)
     select $1::bigint, id from unnest($2::bigint[]) as id on conflict do nothing`,
    [accountId, idArray(profileIds)],
  );
}

/**
 * Takes up to `limit` marked profiles of the account (their marks deleted in the caller's
 * transaction), each with the canonical profile of its cluster now (null for a profile deleted
 * since).
 */
export async function takeProfileChanges(
  db: Queryable,
  accountId: string,
  limit: number,
): Promise<{ profile_id: string; canonical_id: string | null }[]> {
  const { rows } = await db.query<{ profile_id: string; canonical_id: string | null }>(
    `with taken as (
       delete from profile_changes where account_id = $1::bigint and profile_id in (
         select profile_id from profile_changes where account_id = $1::bigint order by profile_id limit $2)
       returning profile_id
     )
     select t.profile_id, coalesce(p.canonical_id, p.profile_id) as canonical_id
     from taken t left join profiles p on p.account_id = $1::bigint and p.profile_id = t.profile_id`,
    [accountId, limit],
  );
  return rows;
}

/**
 * Statements of the console's browsing: a page of a section's profiles, most recently updated
 * first, and the section's profiles by the day they were created.
 */
import type { Queryable } from '../../store/pool.ts';
import { SHOWN } from './section-rules.ts';

export interface BrowsedRow {
  profile_id: string;
  /** Microseconds since the epoch: the cursor's time, exact (a JavaScript date keeps milliseconds). */
  updated_us: string;
  updated_at: Date;
  export_key: string;
  /** Attribute version id → value, as the profile shows them (its cluster's, on a canonical profile). */
  attrs: Record<string, unknown>;
  /** [keyspace id, key] of every identifier of the profile's merge cluster. */
  keys: [string, string][];
}

export interface BrowseFilter {
  /** Rows updated before this one: (updated_at in microseconds, profile_id). */
  after?: { updatedUs: string; profileId: string };
  /** Profiles with a key in `keyspaceId` that starts with `prefix`. */
  key?: { keyspaceId: string; prefix: string };
  /** Profiles whose value of the attribute version `versionId` equals `value` (JSON). */
  attribute?: { versionId: string; value: string };
  limit: number;
}

/**
 * A page of the canonical profiles with data in a section, most recently updated first (index
 * profile_sections_by_update), with what they show and their keys. A key prefix is matched in
 * its keyspace (the identifiers' primary key) and joined to the rows, never probed per row.
 */
export async function listSectionPage(
  db: Queryable,
  accountId: string,
  sectionId: string,
  filter: BrowseFilter,
): Promise<BrowsedRow[]> {
  const values: unknown[] = [accountId, sectionId, filter.limit];
  const where: string[] = [];
  if (filter.after) {
    values.push(filter.after.updatedUs, filter.after.profileId);
    where.push(
      `(ps.updated_at, ps.profile_id) < (timestamptz 'epoch' + $${values.length - 1}::bigint * interval '1 microsecond', $${values.length}::bigint)`,
    );
  }
  if (filter.key) {
    values.push(filter.key.keyspaceId, filter.key.prefix);
    where.push(`ps.profile_id in (
      select coalesce(m.canonical_id, m.profile_id) from profile_identifiers i
      join profiles m on m.account_id = i.account_id and m.profile_id = i.profile_id
      where i.account_id = $1::bigint and i.keyspace_id = $${values.length - 1}::bigint and starts_with(i.profile_key, $${values.length}))`);
  }
  if (filter.attribute) {
    values.push(filter.attribute.versionId, filter.attribute.value);
    where.push(`${SHOWN.attributes('ps')} -> $${values.length - 1}::text = $${values.length}::jsonb`);
  }
  const { rows } = await db.query<BrowsedRow>(
    `select ps.profile_id, (extract(epoch from ps.updated_at) * 1000000)::bigint::text as updated_us, ps.updated_at,
       p.export_key, ${SHOWN.attributes('ps')} as attrs,
       coalesce((select jsonb_agg(jsonb_build_array(i.keyspace_id::text, i.profile_key) order by i.keyspace_id, i.profile_key)
         from profile_identifiers i
         where i.account_id = $1::bigint and i.profile_id in (
           select m.profile_id from profiles m
           where m.account_id = $1::bigint and (m.profile_id = ps.profile_id or m.canonical_id = ps.profile_id))), '[]') as keys
     from profile_sections ps
     join profiles p on p.account_id = ps.account_id and p.profile_id = ps.profile_id and p.canonical_id is null
     where ps.account_id = $1::bigint and ps.section_id = $2::bigint ${where.map((w) => `and ${w}`).join(' ')}
     order by ps.updated_at desc, ps.profile_id desc
     limit $3::int`,
    values,
  );
  return rows;
}

/**
 * The canonical profiles with data in a section, counted by the UTC day they were created from
 * `since` on (`day`, 'YYYY-MM-DD'), and those created before it (`day` null).
 */
export async function countCreatedByDay(
  db: Queryable,
  accountId: string,
  sectionId: string,
  since: Date,
): Promise<{ day: string | null; n: number }[]> {
  const { rows } = await db.query<{ day: string | null; n: number }>(
    `select case when p.created_at >= $3::timestamptz then to_char(p.created_at at time zone 'UTC', 'YYYY-MM-DD') end as day,
       count(*)::int as n
     from profile_sections ps
     join profiles p on p.account_id = ps.account_id and p.profile_id = ps.profile_id and p.canonical_id is null
     where ps.account_id = $1::bigint and ps.section_id = $2::bigint
     group by 1`,
    [accountId, sectionId, since],
  );
  return rows;
}

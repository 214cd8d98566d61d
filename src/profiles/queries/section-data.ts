/**
 * Reads of section data: what profiles show in their sections, with the facts segments evaluate.
 */
import { queryForAccount } from '../../store/account-statements.ts';
import { idArray } from '../../store/arrays.ts';
import { coalescePerPool } from '../../store/coalesce.ts';
import type { Queryable } from '../../store/pool.ts';
import { isExport, MEMBER_BY_KEY, type KeyspaceOfKey, type LocatedRow } from './identifiers.ts';
import { SHOWN, trueTags, type SectionDataRow, type ValueMap } from './section-rules.ts';

interface KeyInSection {
  keyspace: KeyspaceOfKey;
  key: string;
  sectionId: string;
}
type FoundInSection = LocatedRow & SectionDataRow;

/** Profiles found by key with what each shows in a section, in one statement: one answer per key, in order (undefined where none). */
async function findSectionDataByKeys(
  db: Queryable,
  accountId: string,
  keys: KeyInSection[],
): Promise<(FoundInSection | undefined)[]> {
  // With the account in its text, on the account's node (queryForAccount): Citus keeps its plan there.
  const { rows } = await queryForAccount<
    LocatedRow & { n: number; attributes: ValueMap | null; tags: Record<string, boolean> | null }
  >(db, accountId, {
    name: 'profiles.find-section-data-by-keys',
    // One primary-key lookup per key, as in findProfilesByKeys.
    text: `select x.n::int as n, f.profile_id, f.canonical_id,
       ${SHOWN.attributes('ps')} as attributes, ${SHOWN.tags('ps')} as tags
     from rows from (unnest($2::bigint[]), jsonb_array_elements_text($3::jsonb), unnest($4::bigint[]), unnest($5::boolean[]))
       with ordinality as x(keyspace_id, profile_key, section_id, by_export_key, n)
     cross join lateral ${MEMBER_BY_KEY('$1::bigint', 'x.keyspace_id', 'x.profile_key', 'x.by_export_key')} f
     left join lateral (
       -- Lateral with a limit, so that the generic plan of this named statement (which assumes 100
       -- keys) looks the row up by primary key instead of hash-joining a scan of the whole table,
       -- which it chose for accounts of under about 100,000 profiles (docs/scaling.md).
       select ps.attributes, ps.tags, ps.cluster_attributes, ps.cluster_tags from profile_sections ps
       where ps.account_id = $1::bigint and ps.profile_id = f.canonical_id and ps.section_id = x.section_id
       limit 1
     ) ps on true`,
    values: [
      accountId,
      idArray(keys.map((k) => k.keyspace.keyspace_id)),
      JSON.stringify(keys.map((k) => k.key)),
      idArray(keys.map((k) => k.sectionId)),
      `{${keys.map((k) => (isExport(k.keyspace) ? 't' : 'f')).join(',')}}`,
    ],
  });
  const found: (FoundInSection | undefined)[] = new Array(keys.length);
  for (const row of rows) {
    found[row.n - 1] = {
      profile_id: row.profile_id,
      canonical_id: row.canonical_id,
      attributes: row.attributes ?? {},
      tags: trueTags(row.tags ?? {}),
    };
  }
  return found;
}

/** The batched reads of each pool (or client), by account: the reads of one turn of the event loop go as one statement. */
const sectionReads = coalescePerPool(findSectionDataByKeys);

/** A profile found by key together with what it shows in one section, in one round trip shared with the other reads of the same turn. */
export function findSectionDataByKey(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  key: string,
  sectionId: string,
): Promise<FoundInSection | undefined> {
  return sectionReads(db, accountId, { keyspace, key, sectionId });
}

/** What segment evaluations read of a canonical profile (locateWithFacts of locate.ts), events as [section, version, ms, data]. */
export interface FactsRow {
  sections: Record<string, ValueMap>;
  events: [string, string, number, Record<string, unknown>][];
}

/**
 * The SQL of FactsRow for the canonical profile `canonical`: the values it shows in every section,
 * and the events of the versions `$versions` (bigint[]) that any member of its cluster received.
 * Event times travel as milliseconds since 1970 (floor, as a Date keeps them). Without versions
 * (segments without event terms) the events are not read at all: a one-time filter.
 */
const FACTS = (account: string, canonical: string, versions: string) => `select
    (select coalesce(jsonb_object_agg(ps.section_id::text, ${SHOWN.attributes('ps')}), '{}')
     from profile_sections ps where ps.account_id = ${account} and ps.profile_id = ${canonical}) as sections,
    (select coalesce(jsonb_agg(jsonb_build_array(e.section_id::text, e.version_id::text, floor(extract(epoch from e.event_time) * 1000), e.data)), '[]')
     from profile_events e where cardinality(${versions}) > 0 and e.account_id = ${account} and e.version_id = any(${versions})
       and e.profile_id in (select m.profile_id from profiles m where m.account_id = ${account} and (m.profile_id = ${canonical} or m.canonical_id = ${canonical}))) as events`;

/**
 * A profile found by key with what segment evaluations read of its cluster (FACTS), in one round
 * trip: an evaluation is one statement instead of four.
 */
export async function findFactsByKey(
  db: Queryable,
  accountId: string,
  keyspace: KeyspaceOfKey,
  key: string,
  versionIds: string[],
): Promise<(LocatedRow & FactsRow) | undefined> {
  const { rows } = await db.query<LocatedRow & FactsRow>(factsByKeyStatement(accountId, keyspace, key, versionIds));
  return rows[0];
}

/** The statement of findFactsByKey, whole: what a segment evaluation reads. */
export function factsByKeyStatement(accountId: string, keyspace: KeyspaceOfKey, key: string, versionIds: string[]) {
  return {
    name: 'profiles.find-facts-by-key',
    text: `select found.profile_id, found.canonical_id, f.sections, f.events
     from ${MEMBER_BY_KEY('$1::bigint', '$2::bigint', '$3', '$5::boolean')} found
     cross join lateral (${FACTS('$1::bigint', 'found.canonical_id', '$4::bigint[]')}) f`,
    values: [accountId, keyspace.keyspace_id, key, idArray(versionIds), isExport(keyspace)] as unknown[],
  };
}

/** FACTS of many canonical profiles by id (for checks over a whole population). */
export async function listFacts(
  db: Queryable,
  accountId: string,
  canonicalIds: string[],
  versionIds: string[],
): Promise<Map<string, FactsRow>> {
  const { rows } = await db.query<FactsRow & { profile_id: string }>(
    `select c.id::text as profile_id, f.sections, f.events from unnest($2::bigint[]) as c(id)
     cross join lateral (${FACTS('$1::bigint', 'c.id', '$3::bigint[]')}) f`,
    [accountId, idArray(canonicalIds), idArray(versionIds)],
  );
  return new Map(rows.map((r) => [r.profile_id, { sections: r.sections, events: r.events }]));
}

/** What a profile (a canonical one) shows in a section: the cluster's values, or its own. */
export async function findSectionData(
  db: Queryable,
  accountId: string,
  profileId: string,
  sectionId: string,
): Promise<SectionDataRow> {
  const { rows } = await db.query<SectionDataRow>(
    `select ${SHOWN.attributes('ps')} as attributes, ${SHOWN.tags('ps')} as tags
     from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = $2::bigint and ps.section_id = $3::bigint`,
    [accountId, profileId, sectionId],
  );
  const row = rows[0] ?? { attributes: {}, tags: {} };
  return { attributes: row.attributes, tags: trueTags(row.tags) };
}

/** What a profile shows in every section that has data: section id → values. */
export async function listSectionDataByProfile(
  db: Queryable,
  accountId: string,
  profileId: string,
): Promise<Map<string, SectionDataRow>> {
  const { rows } = await db.query<SectionDataRow & { section_id: string }>(
    `select ps.section_id, ${SHOWN.attributes('ps')} as attributes, ${SHOWN.tags('ps')} as tags
     from profile_sections ps where ps.account_id = $1::bigint and ps.profile_id = $2::bigint`,
    [accountId, profileId],
  );
  return new Map(rows.map((r) => [r.section_id, { attributes: r.attributes, tags: trueTags(r.tags) }]));
}

/**
 * What profiles hold themselves in every section, not what their clusters show: profile id →
 * section id → values (a canonical profile's own maps keep entries cleared after a merge as null
 * and false, which are left out).
 */
export async function listOwnSectionData(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<Map<string, Map<string, SectionDataRow>>> {
  const { rows } = await db.query<SectionDataRow & { profile_id: string; section_id: string }>(
    `select profile_id, section_id, jsonb_strip_nulls(attributes) as attributes, profile_true_tags(tags) as tags
     from profile_sections where account_id = $1::bigint and profile_id = any($2::bigint[])`,
    [accountId, profileIds],
  );
  const byProfile = new Map<string, Map<string, SectionDataRow>>();
  for (const r of rows) {
    const sections = byProfile.get(r.profile_id) ?? new Map<string, SectionDataRow>();
    sections.set(r.section_id, { attributes: r.attributes, tags: r.tags });
    byProfile.set(r.profile_id, sections);
  }
  return byProfile;
}

export interface AttributeChangeRow {
  profile_id: string;
  section_id: string;
  version_id: string;
  value: unknown;
  changed_at: Date;
}

/**
 * The attribute changes of some profiles, oldest first; a null value is a value cleared. Each
 * value, past (attribute_history) or current (with its set time), is a change at its set time; a
 * past value that nothing was set in place of when it was replaced was cleared then. A clear of a
 * value that the profile did not hold is no change.
 */
export async function listAttributeChangesByProfiles(
  db: Queryable,
  accountId: string,
  profileIds: string[],
): Promise<AttributeChangeRow[]> {
  const { rows } = await db.query<AttributeChangeRow>(
    `with spans as (
       select h.profile_id, h.section_id, h.version_id, h.value, h.set_at, h.replaced_at from attribute_history h
       where h.account_id = $1::bigint and h.profile_id = any($2::bigint[])
       union all
       select ps.profile_id, ps.section_id, t.key::bigint, nullif(ps.attributes -> t.key, 'null'::jsonb),
         to_timestamp(0) + (t.value)::bigint * interval '1 microsecond', null
       from profile_sections ps cross join jsonb_each(ps.attribute_set_at) t
       where ps.account_id = $1::bigint and ps.profile_id = any($2::bigint[])
     )
     select profile_id, section_id, version_id::text, value, set_at as changed_at from spans
     union all
     select s.profile_id, s.section_id, s.version_id::text, null, s.replaced_at from spans s
     where s.replaced_at is not null and not exists (select 1 from spans n
       where n.profile_id = s.profile_id and n.section_id = s.section_id and n.version_id = s.version_id and n.set_at = s.replaced_at)
     order by changed_at, profile_id`,
    [accountId, profileIds],
  );
  return rows;
}

export interface ReplacedValueRow {
  version_id: string;
  value: unknown;
  set_at: Date;
  replaced_at: Date;
  /** How many replaced values the attribute version has in all. */
  total: number;
}

/**
 * The replaced values of some attribute versions of some profiles in a section, newest first,
 * at most `limit` per version.
 */
export async function listReplacedValues(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  sectionId: string,
  versionIds: string[],
  limit: number,
): Promise<ReplacedValueRow[]> {
  const { rows } = await db.query<ReplacedValueRow>(
    `select version_id::text, value, set_at, replaced_at, total::int from (
       select h.version_id, h.value, h.set_at, h.replaced_at,
         row_number() over (partition by h.version_id order by h.set_at desc, h.replaced_at desc) as n,
         count(*) over (partition by h.version_id) as total
       from attribute_history h
       where h.account_id = $1::bigint and h.section_id = $3::bigint and h.version_id = any($4::bigint[])
         and h.profile_id = any($2::bigint[])
     ) r where n <= $5::int
     order by version_id, set_at desc, replaced_at desc`,
    [accountId, profileIds, sectionId, versionIds, limit],
  );
  return rows;
}

/** The own entries of some profiles in a section with the time each was set (microseconds since 1970), in profile order. */
export async function listOwnSetTimes(
  db: Queryable,
  accountId: string,
  profileIds: string[],
  sectionId: string,
): Promise<{ profile_id: string; attributes: ValueMap; attribute_set_at: Record<string, number> }[]> {
  const { rows } = await db.query<{
    profile_id: string;
    attributes: ValueMap;
    attribute_set_at: Record<string, number>;
  }>(
    `select profile_id, attributes, attribute_set_at from profile_sections
     where account_id = $1::bigint and profile_id = any($2::bigint[]) and section_id = $3::bigint
     order by profile_id`,
    [accountId, profileIds, sectionId],
  );
  return rows;
}

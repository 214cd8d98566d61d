import type {
  AttributeRow,
  ChannelRow,
  EventRow,
  FolderRow,
  KeyspaceRow,
  Permissions,
  SectionRow,
  TagRow,
  TopicRow,
} from '../core/definitions.ts';
import type { Queryable } from '../store/pool.ts';

export interface VersionRow {
  version_id: string;
  owner_id: string;
  ordinal: number;
  type: unknown[];
  deprecated_at: Date | null;
  valid_from: Date;
}
export interface SegmentRow {
  segment_id: string;
  discriminator: string;
  name: string;
  description: string;
  live_time_zone: string | null;
}
export interface SegmentVersionRow {
  version_id: string;
  segment_id: string;
  ordinal: number;
  query: string;
}

const byAccount = async <T extends object>(db: Queryable, sql: string, accountId: string): Promise<T[]> =>
  (await db.query<T>(sql, [accountId])).rows;

export const listKeyspacesByAccount = (db: Queryable, accountId: string) =>
  byAccount<KeyspaceRow>(db, 'select * from keyspaces where account_id = $1::bigint order by keyspace_id', accountId);
export const listChannelsByAccount = (db: Queryable, accountId: string) =>
  byAccount<ChannelRow>(db, 'select * from channels where account_id = $1::bigint order by channel_id', accountId);
export const listSectionsByAccount = (db: Queryable, accountId: string) =>
  byAccount<SectionRow>(db, 'select * from sections where account_id = $1::bigint order by section_id', accountId);
export const listAttributesByAccount = (db: Queryable, accountId: string) =>
  byAccount<AttributeRow>(
    db,
    'select * from attributes where account_id = $1::bigint order by attribute_id',
    accountId,
  );
export const listAttributeVersionsByAccount = (db: Queryable, accountId: string) =>
  byAccount<VersionRow>(
    db,
    'select version_id, attribute_id as owner_id, ordinal, type, deprecated_at, valid_from from attribute_versions where account_id = $1::bigint order by ordinal',
    accountId,
  );
export const listTagsByAccount = (db: Queryable, accountId: string) =>
  byAccount<TagRow>(db, 'select * from tags where account_id = $1::bigint order by tag_id', accountId);
export const listEventsByAccount = (db: Queryable, accountId: string) =>
  byAccount<EventRow>(db, 'select * from events where account_id = $1::bigint order by event_id', accountId);
export const listEventVersionsByAccount = (db: Queryable, accountId: string) =>
  byAccount<VersionRow>(
    db,
    'select version_id, event_id as owner_id, ordinal, type, deprecated_at, valid_from from event_versions where account_id = $1::bigint order by ordinal',
    accountId,
  );
export const listFoldersByAccount = (db: Queryable, accountId: string) =>
  byAccount<FolderRow>(db, 'select * from topic_folders where account_id = $1::bigint order by folder_id', accountId);
export const listTopicsByAccount = (db: Queryable, accountId: string) =>
  byAccount<TopicRow>(db, 'select * from topics where account_id = $1::bigint order by topic_id', accountId);
export const listSegmentsByAccount = (db: Queryable, accountId: string) =>
  byAccount<SegmentRow>(db, 'select * from segments where account_id = $1::bigint order by segment_id', accountId);
export const listSegmentVersionsByAccount = (db: Queryable, accountId: string) =>
  byAccount<SegmentVersionRow>(
    db,
    'select version_id, segment_id, ordinal, query from segment_versions where account_id = $1::bigint order by ordinal',
    accountId,
  );

export async function upsertKeyspace(
  db: Queryable,
  accountId: string,
  k: Omit<KeyspaceRow, 'keyspace_id'>,
): Promise<void> {
  await db.query(
    `insert into keyspaces (account_id, discriminator, name, description, manage_subscriptions, api_access, kind, mapped_attribute)
     values ($1::bigint, $2, $3, $4, $5, $6, $7, $8)
     on conflict (account_id, discriminator) do update set name = excluded.name, description = excluded.description,
       manage_subscriptions = excluded.manage_subscriptions, api_access = excluded.api_access,
       kind = excluded.kind, mapped_attribute = excluded.mapped_attribute`,
    [
      accountId,
      k.discriminator,
      k.name,
      k.description,
      k.manage_subscriptions,
      k.api_access,
      k.kind,
      k.mapped_attribute,
    ],
  );
}

/** Locks the account's keyspaces, so that two transactions connecting one integration cannot both find its keyspace missing. */
export async function lockKeyspacesByAccount(db: Queryable, accountId: string): Promise<void> {
  // `no key update`: profile keys referencing keyspaces stay insertable meanwhile.
  await db.query('select 1 from keyspaces where account_id = $1::bigint for no key update', [accountId]);
}

/** Gives the account's attributes, tags and events whose keyspace permissions are `from` the permissions `to`. */
export async function updatePermissionsByValue(
  db: Queryable,
  accountId: string,
  from: Permissions,
  to: Permissions,
): Promise<void> {
  await db.query(
    `with a as (update attributes set keyspace_permissions = $3::jsonb where account_id = $1::bigint and keyspace_permissions = $2::jsonb),
          t as (update tags set keyspace_permissions = $3::jsonb where account_id = $1::bigint and keyspace_permissions = $2::jsonb)
     update events set keyspace_permissions = $3::jsonb where account_id = $1::bigint and keyspace_permissions = $2::jsonb`,
    [accountId, JSON.stringify(from), JSON.stringify(to)],
  );
}

export async function upsertChannel(
  db: Queryable,
  accountId: string,
  c: Omit<ChannelRow, 'channel_id'>,
): Promise<void> {
  await db.query(
    `insert into channels (account_id, discriminator, name, description, address_attribute) values ($1::bigint, $2, $3, $4, $5)
     on conflict (account_id, discriminator) do update set name = excluded.name, description = excluded.description,
       address_attribute = excluded.address_attribute`,
    [accountId, c.discriminator, c.name, c.description, c.address_attribute],
  );
}

/** Inserts or updates a section; `created` tells whether it is new. */
export async function upsertSection(
  db: Queryable,
  accountId: string,
  s: Omit<SectionRow, 'section_id'>,
): Promise<{ section_id: string; created: boolean }> {
  const { rows } = await db.query<{ section_id: string; created: boolean }>(
    `insert into sections (account_id, discriminator, name, description, ecommerce_connected) values ($1::bigint, $2, $3, $4, $5)
     on conflict (account_id, discriminator) do update set name = excluded.name, description = excluded.description,
       ecommerce_connected = excluded.ecommerce_connected
     returning section_id, (xmax = 0) as created`,
    [accountId, s.discriminator, s.name, s.description, s.ecommerce_connected],
  );
  return rows[0];
}

export async function upsertAttribute(
  db: Queryable,
  accountId: string,
  a: Omit<AttributeRow, 'attribute_id'>,
): Promise<string> {
  const { rows } = await db.query<{ attribute_id: string }>(
    `insert into attributes (account_id, section_id, discriminator, name, description, hidden, ecommerce, keyspace_permissions)
     values ($1::bigint, $2::bigint, $3, $4, $5, $6, $7, $8)
     on conflict (account_id, section_id, discriminator) do update set name = excluded.name, description = excluded.description,
       hidden = excluded.hidden, ecommerce = excluded.ecommerce, keyspace_permissions = excluded.keyspace_permissions
     returning attribute_id`,
    [accountId, a.section_id, a.discriminator, a.name, a.description, a.hidden, a.ecommerce, a.keyspace_permissions],
  );
  return rows[0].attribute_id;
}

export async function upsertEvent(db: Queryable, accountId: string, e: Omit<EventRow, 'event_id'>): Promise<string> {
  const { rows } = await db.query<{ event_id: string }>(
    `insert into events (account_id, section_id, discriminator, name, description, hidden, keyspace_permissions)
     values ($1::bigint, $2::bigint, $3, $4, $5, $6, $7)
     on conflict (account_id, section_id, discriminator) do update set name = excluded.name, description = excluded.description,
       hidden = excluded.hidden, keyspace_permissions = excluded.keyspace_permissions
     returning event_id`,
    [accountId, e.section_id, e.discriminator, e.name, e.description, e.hidden, e.keyspace_permissions],
  );
  return rows[0].event_id;
}

const VERSION_TABLES = {
  attribute: { table: 'attribute_versions', owner: 'attribute_id' },
  event: { table: 'event_versions', owner: 'event_id' },
} as const;

export async function findTypeVersionByOrdinal(
  db: Queryable,
  kind: 'attribute' | 'event',
  accountId: string,
  ownerId: string,
  ordinal: number,
): Promise<VersionRow | undefined> {
  const t = VERSION_TABLES[kind];
  const { rows } = await db.query<VersionRow>(
    `select version_id, ${t.owner} as owner_id, ordinal, type, deprecated_at, valid_from from ${t.table}
     where account_id = $1::bigint and ${t.owner} = $2::bigint and ordinal = $3`,
    [accountId, ownerId, ordinal],
  );
  return rows[0];
}

export async function insertTypeVersion(
  db: Queryable,
  kind: 'attribute' | 'event',
  accountId: string,
  v: { ownerId: string; ordinal: number; type: unknown[]; deprecatedAt: string | null; validFrom: string | null },
): Promise<void> {
  const t = VERSION_TABLES[kind];
  await db.query(
    `insert into ${t.table} (account_id, ${t.owner}, ordinal, type, deprecated_at, valid_from)
     values ($1::bigint, $2::bigint, $3, $4::jsonb, $5::timestamptz, coalesce($6::timestamptz, now()))`,
    [accountId, v.ownerId, v.ordinal, JSON.stringify(v.type), v.deprecatedAt, v.validFrom],
  );
}

export async function updateTypeVersionDeprecation(
  db: Queryable,
  kind: 'attribute' | 'event',
  accountId: string,
  versionId: string,
  deprecatedAt: string | null,
): Promise<void> {
  const t = VERSION_TABLES[kind];
  await db.query(
    `update ${t.table} set deprecated_at = $3::timestamptz where account_id = $1::bigint and version_id = $2::bigint`,
    [accountId, versionId, deprecatedAt],
  );
}

export async function upsertTag(db: Queryable, accountId: string, t: Omit<TagRow, 'tag_id'>): Promise<void> {
  await db.query(
    `insert into tags (account_id, section_id, discriminator, name, hidden, keyspace_permissions) values ($1::bigint, $2::bigint, $3, $4, $5, $6)
     on conflict (account_id, section_id, discriminator) do update set name = excluded.name, hidden = excluded.hidden,
       keyspace_permissions = excluded.keyspace_permissions`,
    [accountId, t.section_id, t.discriminator, t.name, t.hidden, t.keyspace_permissions],
  );
}

/** Locks the section row so that concurrent tag creations count tags one at a time. */
export async function lockSection(db: Queryable, accountId: string, sectionId: string): Promise<void> {
  await db.query('select 1 from sections where account_id = $1::bigint and section_id = $2::bigint for update', [
    accountId,
    sectionId,
  ]);
}

export async function countTagsBySection(db: Queryable, accountId: string, sectionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select count(*)::int as n from tags where account_id = $1::bigint and section_id = $2::bigint',
    [accountId, sectionId],
  );
  return rows[0].n;
}

export async function listTagDiscriminatorsLike(
  db: Queryable,
  accountId: string,
  sectionId: string,
  prefix: string,
): Promise<string[]> {
  const { rows } = await db.query<{ discriminator: string }>(
    `select discriminator from tags where account_id = $1::bigint and section_id = $2::bigint and starts_with(discriminator, $3)`,
    [accountId, sectionId, prefix],
  );
  return rows.map((r) => r.discriminator);
}

export async function insertTag(
  db: Queryable,
  accountId: string,
  t: { sectionId: string; discriminator: string; name: string; permissions: Permissions },
): Promise<TagRow> {
  const { rows } = await db.query<TagRow>(
    `insert into tags (account_id, section_id, discriminator, name, keyspace_permissions) values ($1::bigint, $2::bigint, $3, $4, $5) returning *`,
    [accountId, t.sectionId, t.discriminator, t.name, t.permissions],
  );
  return rows[0];
}

export async function updateTagName(db: Queryable, accountId: string, tagId: string, name: string): Promise<TagRow> {
  const { rows } = await db.query<TagRow>(
    'update tags set name = $3 where account_id = $1::bigint and tag_id = $2::bigint returning *',
    [accountId, tagId, name],
  );
  return rows[0];
}

export async function upsertFolder(
  db: Queryable,
  accountId: string,
  f: { sectionId: string; discriminator: string; name: string },
): Promise<string> {
  const { rows } = await db.query<{ folder_id: string }>(
    `insert into topic_folders (account_id, section_id, discriminator, name) values ($1::bigint, $2::bigint, $3, $4)
     on conflict (account_id, section_id, discriminator) do update set name = excluded.name returning folder_id`,
    [accountId, f.sectionId, f.discriminator, f.name],
  );
  return rows[0].folder_id;
}

export async function updateFolderParent(
  db: Queryable,
  accountId: string,
  folderId: string,
  parentId: string | null,
): Promise<void> {
  await db.query(
    'update topic_folders set parent_folder_id = $3::bigint where account_id = $1::bigint and folder_id = $2::bigint',
    [accountId, folderId, parentId],
  );
}

export async function upsertTopic(db: Queryable, accountId: string, t: Omit<TopicRow, 'topic_id'>): Promise<void> {
  await db.query(
    `insert into topics (account_id, section_id, discriminator, name, description, folder_id, channel_id)
     values ($1::bigint, $2::bigint, $3, $4, $5, $6::bigint, $7::bigint)
     on conflict (account_id, section_id, discriminator) do update set name = excluded.name, description = excluded.description,
       folder_id = excluded.folder_id, channel_id = excluded.channel_id`,
    [accountId, t.section_id, t.discriminator, t.name, t.description, t.folder_id, t.channel_id],
  );
}

/** The accounts with a live segment (a statement across accounts: what a process reads ahead at its start). */
export async function listAccountsWithLiveSegments(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ account_id: string }>(
    'select distinct account_id from segments where live_time_zone is not null order by account_id desc limit $1',
    [limit],
  );
  return rows.map((r) => r.account_id);
}

/** Makes a segment live in a time zone, or not live (null). */
export async function setSegmentLiveTimeZone(
  db: Queryable,
  accountId: string,
  segmentId: string,
  timeZone: string | null,
): Promise<void> {
  await db.query('update segments set live_time_zone = $3 where account_id = $1::bigint and segment_id = $2::bigint', [
    accountId,
    segmentId,
    timeZone,
  ]);
}

export async function upsertSegment(
  db: Queryable,
  accountId: string,
  s: Omit<SegmentRow, 'segment_id' | 'live_time_zone'>,
): Promise<string> {
  const { rows } = await db.query<{ segment_id: string }>(
    `insert into segments (account_id, discriminator, name, description) values ($1::bigint, $2, $3, $4)
     on conflict (account_id, discriminator) do update set name = excluded.name, description = excluded.description
     returning segment_id`,
    [accountId, s.discriminator, s.name, s.description],
  );
  return rows[0].segment_id;
}

/**
 * Inserts a new segment under the first free one of `base`, `base-2`, `base-3`…; answers its id and
 * discriminator. A discriminator taken meanwhile (two at once) is skipped as a stored one is.
 */
export async function insertNewSegment(
  db: Queryable,
  accountId: string,
  s: { base: string; name: string; description: string },
): Promise<{ segment_id: string; discriminator: string }> {
  for (let n = 1; ; n++) {
    const discriminator = n === 1 ? s.base : `${s.base}-${n}`;
    const { rows } = await db.query<{ segment_id: string }>(
      `insert into segments (account_id, discriminator, name, description) values ($1::bigint, $2, $3, $4)
       on conflict (account_id, discriminator) do nothing
       returning segment_id`,
      [accountId, discriminator, s.name, s.description],
    );
    if (rows[0]) return { segment_id: rows[0].segment_id, discriminator };
  }
}

export async function findSegmentVersionByOrdinal(
  db: Queryable,
  accountId: string,
  segmentId: string,
  ordinal: number,
): Promise<SegmentVersionRow | undefined> {
  const { rows } = await db.query<SegmentVersionRow>(
    'select version_id, segment_id, ordinal, query from segment_versions where account_id = $1::bigint and segment_id = $2::bigint and ordinal = $3',
    [accountId, segmentId, ordinal],
  );
  return rows[0];
}

export async function insertSegmentVersion(
  db: Queryable,
  accountId: string,
  v: { segmentId: string; ordinal: number; query: string },
): Promise<void> {
  await db.query(
    'insert into segment_versions (account_id, segment_id, ordinal, query) values ($1::bigint, $2::bigint, $3, $4)',
    [accountId, v.segmentId, v.ordinal, v.query],
  );
}

/**
 * Adds a version after a segment's last one (the segment locked, so that two at once take two
 * ordinals); answers its id.
 */
export async function insertNextSegmentVersion(
  db: Queryable,
  accountId: string,
  segmentId: string,
  query: string,
): Promise<string> {
  await db.query('select 1 from segments where account_id = $1::bigint and segment_id = $2::bigint for update', [
    accountId,
    segmentId,
  ]);
  // The last ordinal read, then the insert (the segment's lock keeps them together): as one
  // INSERT … SELECT with max() the statement failed on a Citus cluster, which does not route it
  // to the account's shard.
  const { rows: last } = await db.query<{ ordinal: number }>(
    'select coalesce(max(ordinal), 0)::int as ordinal from segment_versions where account_id = $1::bigint and segment_id = $2::bigint',
    [accountId, segmentId],
  );
  const { rows } = await db.query<{ version_id: string }>(
    `insert into segment_versions (account_id, segment_id, ordinal, query)
     values ($1::bigint, $2::bigint, $3, $4)
     returning version_id::text`,
    [accountId, segmentId, last[0].ordinal + 1, query],
  );
  return rows[0].version_id;
}

/** Erases the definitions of a deleted account, the dependent ones first. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from segment_versions where account_id = $1::bigint', [accountId]);
  await db.query('delete from segments where account_id = $1::bigint', [accountId]);
  await db.query('delete from topics where account_id = $1::bigint', [accountId]);
  await db.query('delete from topic_folders where account_id = $1::bigint', [accountId]);
  await db.query('delete from event_versions where account_id = $1::bigint', [accountId]);
  await db.query('delete from events where account_id = $1::bigint', [accountId]);
  await db.query('delete from tags where account_id = $1::bigint', [accountId]);
  await db.query('delete from attribute_versions where account_id = $1::bigint', [accountId]);
  await db.query('delete from attributes where account_id = $1::bigint', [accountId]);
  await db.query('delete from sections where account_id = $1::bigint', [accountId]);
  await db.query('delete from channels where account_id = $1::bigint', [accountId]);
  await db.query('delete from keyspaces where account_id = $1::bigint', [accountId]);
}

import type { Static } from 'typebox';
import { check } from '../aql/check.ts';
import { parse } from '../aql/parser.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { RecordCache } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { enqueueUnlessWaiting } from '../jobs/queue.ts';
import {
  activityEventTypes,
  builtinChannels,
  builtinKeyspaces,
  rootFolderDiscriminator,
  userCreatedDiscriminator,
} from './builtins.ts';
import type { Definitions, KeyspaceRow, Permissions, SectionDefs, TagRow, TypeVersion } from '../core/definitions.ts';
import type { AccountScope, Caller } from '../core/scope.ts';
import * as q from './queries.ts';
import type { AttributeDefinition, EventDefinition, FolderNode, Segment, Tag, Topic } from './schemas.ts';

const TOPIC = 'definitions';

/**
 * The job that brings an account's live segments up to date (src/segments/live.ts): the
 * profiles written since its last run, a segment made live or given a new version, and, with
 * `sweep`, time's moves (a whole evaluation of each segment with a moving window). Declared here,
 * beside the segments' `live_time_zone`, since the areas below segments enqueue it.
 */
export const LIVE_SEGMENTS_JOB = 'live-segments';
declare module '../jobs/queue.ts' {
  interface JobPayloads {
    [LIVE_SEGMENTS_JOB]: { sweep?: boolean };
  }
}

/** Whether the account keeps a live segment: its writes then mark the profiles they change. */
export function hasLiveSegments(defs: Definitions): boolean {
  return defs.segments.some((s) => s.live_time_zone !== null);
}

/** Which keyspaces make a profile known: every one but the web and export keyspaces (docs/aql.md "Known profiles"). */
export function knownKeyspaceIds(defs: Definitions): string[] {
  return defs.keyspaces.filter((k) => k.kind !== 'web' && k.kind !== 'export').map((k) => k.keyspace_id);
}

/** Runs the live segments job of the account (once: a waiting run serves every write before it). */
export async function refreshLiveSegments(db: Queryable, accountId: string): Promise<void> {
  await enqueueUnlessWaiting(db, accountId, LIVE_SEGMENTS_JOB, {});
}

/** Reads all definitions of an account from the database. */
export async function loadDefinitions(db: Queryable, accountId: string): Promise<Definitions> {
  // One statement at a time: `db` may be a transaction's single connection.
  const keyspaces = await q.listKeyspacesByAccount(db, accountId);
  const channels = await q.listChannelsByAccount(db, accountId);
  const sections = await q.listSectionsByAccount(db, accountId);
  const attributes = await q.listAttributesByAccount(db, accountId);
  const attributeVersions = await q.listAttributeVersionsByAccount(db, accountId);
  const tags = await q.listTagsByAccount(db, accountId);
  const events = await q.listEventsByAccount(db, accountId);
  const eventVersions = await q.listEventVersionsByAccount(db, accountId);
  const folders = await q.listFoldersByAccount(db, accountId);
  const topics = await q.listTopicsByAccount(db, accountId);
  const segments = await q.listSegmentsByAccount(db, accountId);
  const segmentVersions = await q.listSegmentVersionsByAccount(db, accountId);
  const versionsOf = (rows: q.VersionRow[]) => {
    const map = new Map<string, TypeVersion[]>();
    for (const v of rows) {
      const list = map.get(v.owner_id) ?? [];
      list.push({
        id: v.version_id,
        type: v.type,
        deprecated_at: v.deprecated_at?.toISOString() ?? null,
        valid_from: v.valid_from.toISOString(),
      });
      map.set(v.owner_id, list);
    }
    return map;
  };
  const av = versionsOf(attributeVersions);
  const ev = versionsOf(eventVersions);
  const inSection = <T extends { section_id: string }>(rows: T[], id: string) =>
    rows.filter((r) => r.section_id === id);
  return {
    accountId,
    keyspaces,
    channels,
    sections: sections.map((s) => ({
      id: s.section_id,
      discriminator: s.discriminator,
      name: s.name,
      description: s.description,
      ecommerce_connected: s.ecommerce_connected,
      attributes: inSection(attributes, s.section_id).map(({ attribute_id, ...a }) => ({
        ...a,
        id: attribute_id,
        versions: av.get(attribute_id) ?? [],
      })),
      tags: inSection(tags, s.section_id),
      events: inSection(events, s.section_id).map(({ event_id, ...e }) => ({
        ...e,
        id: event_id,
        versions: ev.get(event_id) ?? [],
      })),
      folders: inSection(folders, s.section_id),
      topics: inSection(topics, s.section_id),
    })),
    segments: segments.map((s) => ({
      id: s.segment_id,
      discriminator: s.discriminator,
      name: s.name,
      description: s.description,
      live_time_zone: s.live_time_zone,
      versions: segmentVersions
        .filter((v) => v.segment_id === s.segment_id)
        .map((v) => ({ id: v.version_id, query: v.query })),
    })),
  };
}

/**
 * The definitions of every account, cached in memory: definitions change rarely (operator API,
 * manifests, tag creation) and are read on nearly every request.
 */
export class DefinitionsCache {
  private readonly cache: RecordCache<Definitions>;
  constructor(db: Queryable, feed: ChangeFeed) {
    this.cache = new RecordCache(feed, TOPIC, (accountId) => loadDefinitions(db, accountId));
  }
  get(accountId: string): Promise<Definitions> {
    return this.cache.get(accountId);
  }
}

/**
 * Calls `listener` with the id of each account whose definitions changed, once the change is
 * committed, and with '*' when any may have.
 */
export function onDefinitionsChanged(feed: ChangeFeed, listener: (accountId: string) => void): void {
  feed.on(TOPIC, listener, { committed: true });
}

/** The accounts that keep a live segment, at most `limit` of them, the newest first. */
export async function accountsWithLiveSegments(db: Queryable, limit: number): Promise<string[]> {
  return q.listAccountsWithLiveSegments(db, limit);
}

/** Tells every instance that an account's definitions changed, so that their caches reload them. */
export async function announce(feed: ChangeFeed, tx: Queryable, accountId: string): Promise<void> {
  await feed.publish(tx, TOPIC, accountId);
}

// ---- Lookups used by every area ----

/** What `sectionOf` can answer: no such section, or one the caller's API key is not granted. */
export const SECTION_PROBLEMS: readonly ProblemCode[] = ['AUD-1102', 'AUD-1107'];

/** The section named in a path, or 404; 403 when the caller's API key is not granted it (SPEC §5.7). */
export function sectionOf(scope: { defs: Definitions; caller?: Caller }, discriminator: string): SectionDefs {
  const { defs, caller } = scope;
  const section = defs.sections.find((s) => s.discriminator === discriminator);
  if (!section) throw new Problem('AUD-1102', `Section "${discriminator}" does not exist`);
  if (caller?.sectionIds && !caller.sectionIds.includes(section.id)) {
    throw new Problem('AUD-1107', `Access denied for the section "${discriminator}": the API key is not granted it`);
  }
  return section;
}

/** What `requireAllSections` can answer. */
export const ALL_SECTIONS_PROBLEMS: readonly ProblemCode[] = ['AUD-1107'];

/**
 * Refuses (403) an operation that reaches a profile's data in every section (delete, lock, merge,
 * unmerge, switch, opt-out-all) unless the caller's API key is granted every section: a key
 * restricted to sections would otherwise erase or move data it may not read (SPEC §5.7, §7.3).
 */
export function requireAllSections(scope: { defs: Definitions; caller?: Caller }, what: string): void {
  const granted = scope.caller?.sectionIds;
  const denied = granted ? scope.defs.sections.find((s) => !granted.includes(s.id)) : undefined;
  if (denied) {
    throw new Problem(
      'AUD-1107',
      `Access denied: ${what} reaches the profile's data in every section, and the API key is not granted the section "${denied.discriminator}"`,
    );
  }
}

/** What `keyspaceForProfileAccess` can answer: no such keyspace, or one closed to the API. */
export const PROFILE_KEYSPACE_PROBLEMS: readonly ProblemCode[] = ['AUD-1101', 'AUD-1106'];

/**
 * The keyspace of a profile route, or 404; 403 with the detail of SPEC §2.1 when the account
 * does not permit profile access through it.
 */
export function keyspaceForProfileAccess(defs: Definitions, discriminator: string): KeyspaceRow {
  const keyspace = defs.keyspaces.find((k) => k.discriminator === discriminator);
  if (!keyspace) throw new Problem('AUD-1101', `Keyspace "${discriminator}" does not exist`);
  if (!keyspace.api_access)
    throw new Problem('AUD-1106', `Access via the API is not allowed through the keyspace "${discriminator}"`);
  return keyspace;
}

// ---- Read views of SPEC §4.2 ----

export function listKeyspaces(defs: Definitions) {
  return defs.keyspaces.map((k) => ({
    discriminator: k.discriminator,
    name: k.name,
    description: k.description,
    manage_subscriptions: k.manage_subscriptions,
  }));
}

export function listChannels(defs: Definitions) {
  return defs.channels.map((c) => ({ discriminator: c.discriminator, name: c.name, description: c.description }));
}

export function listSections(defs: Definitions, caller: Caller) {
  return defs.sections
    .filter((s) => !caller.sectionIds || caller.sectionIds.includes(s.id))
    .map((s) => ({ discriminator: s.discriminator, name: s.name, description: s.description, id: s.id }));
}

/** How a definition is shown: with the permissions of each keyspace only when asked for (`include_keyspace_permissions`). */
export interface DefinitionRead {
  include_keyspace_permissions?: boolean;
}

/** Visible attributes: hidden ones never, e-commerce ones only while an integration is connected (SPEC §2.5). */
export function listAttributes(section: SectionDefs, read: DefinitionRead): Static<typeof AttributeDefinition>[] {
  return section.attributes
    .filter((a) => !a.hidden && (!a.ecommerce || section.ecommerce_connected))
    .map((a) => ({
      discriminator: a.discriminator,
      name: a.name,
      description: a.description,
      versions: a.versions.map((v) => ({ ...v, type: v.type as string[] })),
      ...(read.include_keyspace_permissions ? { keyspace_permissions: a.keyspace_permissions } : {}),
    }));
}

function tagView(t: TagRow, read: DefinitionRead): Static<typeof Tag> {
  return {
    discriminator: t.discriminator,
    name: t.name,
    id: t.tag_id,
    ...(read.include_keyspace_permissions ? { keyspace_permissions: t.keyspace_permissions } : {}),
  };
}

export function listTags(section: SectionDefs, read: DefinitionRead) {
  return section.tags.filter((t) => !t.hidden).map((t) => tagView(t, read));
}

export function getTag(section: SectionDefs, tagDiscriminator: string, read: DefinitionRead) {
  const tag = section.tags.find((t) => t.discriminator === tagDiscriminator);
  if (!tag)
    throw new Problem('AUD-1103', `Tag "${tagDiscriminator}" does not exist in section "${section.discriminator}"`);
  return tagView(tag, read);
}

export function listEvents(section: SectionDefs, read: DefinitionRead): Static<typeof EventDefinition>[] {
  return section.events
    .filter((e) => !e.hidden)
    .map((e) => ({
      discriminator: e.discriminator,
      name: e.name,
      description: e.description,
      versions: e.versions.map((v) => ({
        ...v,
        type: v.type as Static<typeof EventDefinition>['versions'][number]['type'],
      })),
      ...(read.include_keyspace_permissions ? { keyspace_permissions: e.keyspace_permissions } : {}),
    }));
}

export function listTopics(section: SectionDefs, vendor: string): Static<typeof Topic>[] {
  const root = rootFolderDiscriminator(vendor);
  return section.topics.map((t) => ({
    discriminator: t.discriminator,
    id: t.topic_id,
    name: t.name,
    description: t.description,
    folder_discriminator: section.folders.find((f) => f.folder_id === t.folder_id)?.discriminator ?? root,
  }));
}

export function topicFolderTree(
  section: SectionDefs,
  vendor: string,
): { discriminator: string; subfolders: FolderNode[] } {
  const childrenOf = (parent: string | null): FolderNode[] =>
    section.folders
      .filter((f) => f.parent_folder_id === parent)
      .map((f) => ({ discriminator: f.discriminator, name: f.name, subfolders: childrenOf(f.folder_id) }));
  return { discriminator: rootFolderDiscriminator(vendor), subfolders: childrenOf(null) };
}

export function listSegments(defs: Definitions): Static<typeof Segment>[] {
  return defs.segments.map((s) => ({
    discriminator: s.discriminator,
    name: s.name,
    description: s.description,
    versions: s.versions,
  }));
}

export function getSegment(defs: Definitions, discriminator: string): Static<typeof Segment> {
  const segment = defs.segments.find((s) => s.discriminator === discriminator);
  if (!segment) throw new Problem('AUD-1104', `Segment "${discriminator}" does not exist`);
  return {
    discriminator: segment.discriminator,
    name: segment.name,
    description: segment.description,
    versions: segment.versions,
  };
}

/**
 * Makes a stored segment live in a time zone, or not live (null), and runs the live segments job,
 * which computes its membership whole, or forgets it. The caller checks who may.
 */
export async function setSegmentLive(
  tx: Queryable,
  scope: AccountScope,
  feed: ChangeFeed,
  discriminator: string,
  timeZone: string | null,
): Promise<void> {
  const segment = scope.defs.segments.find((s) => s.discriminator === discriminator);
  if (!segment) throw new Problem('AUD-1104', `Segment "${discriminator}" does not exist`);
  if (segment.live_time_zone === timeZone) return;
  await q.setSegmentLiveTimeZone(tx, scope.accountId, segment.id, timeZone);
  await announce(feed, tx, scope.accountId);
  await refreshLiveSegments(tx, scope.accountId);
}

/** One version of a segment; a version of another segment is not found (CHECKLIST DEF-21). */
export function getSegmentVersion(defs: Definitions, discriminator: string, versionId: string) {
  const segment = getSegment(defs, discriminator);
  const version = segment.versions.find((v) => v.id === versionId);
  if (!version) throw new Problem('AUD-1105', `Segment "${discriminator}" has no version "${versionId}"`);
  return version;
}

// ---- Writes ----

/** What a type's values allow through each keyspace when a definition does not say: read and write, read only through the export keyspace. */
export function defaultPermissions(keyspaces: KeyspaceRow[]): Permissions {
  const permissions: Permissions = {};
  for (const k of keyspaces)
    if (k.api_access) permissions[k.discriminator] = k.kind === 'export' ? ['read'] : ['read', 'write'];
  return permissions;
}

/**
 * Keeps the attributes, tags and events that have the default keyspace permissions on the defaults
 * once keyspaces were added or changed (`before`: the keyspaces until then): a keyspace connected
 * later then reads and writes what the keyspaces there from the start do, as the defaults promise.
 */
export async function followDefaultPermissions(tx: Queryable, accountId: string, before: KeyspaceRow[]): Promise<void> {
  const from = defaultPermissions(before);
  const to = defaultPermissions(await q.listKeyspacesByAccount(tx, accountId));
  if (JSON.stringify(from) !== JSON.stringify(to)) await q.updatePermissionsByValue(tx, accountId, from, to);
}

/** Gives a new account the keyspaces and channels every account has. */
export async function installBuiltins(
  tx: Queryable,
  feed: ChangeFeed,
  vendor: string,
  accountId: string,
): Promise<void> {
  for (const k of builtinKeyspaces(vendor)) await q.upsertKeyspace(tx, accountId, { ...k, api_access: true });
  for (const c of builtinChannels(vendor)) await q.upsertChannel(tx, accountId, c);
  await announce(feed, tx, accountId);
}

/** The vendor word an account's built-in identifiers were made with (`com.<word>1.…`), read from its first keyspace, a built-in one. */
export async function vendorWordOf(db: Queryable, accountId: string): Promise<string | undefined> {
  const [first] = await q.listKeyspacesByAccount(db, accountId);
  return /^com\.([a-z][a-z0-9-]*)1\.keyspaces\./.exec(first?.discriminator ?? '')?.[1];
}

/** What writes definitions announces them on, and the vendor word of the discriminators it makes. */
export interface DefinitionsWriter {
  feed: ChangeFeed;
  vendor: string;
}

/** Creates a tag in a section (SPEC §4.2) within the account's tag limit. */
export async function createTag(
  tx: Queryable,
  scope: AccountScope,
  { feed, vendor }: DefinitionsWriter,
  { section_discriminator, name }: { section_discriminator: string; name: string },
) {
  const { accountId } = scope;
  const section = sectionOf(scope, section_discriminator);
  const tagLimit = scope.limits.tags_per_section;
  await q.lockSection(tx, accountId, section.id);
  if (tagLimit !== null && (await q.countTagsBySection(tx, accountId, section.id)) >= tagLimit) {
    throw new Problem('AUD-1108', `Section "${section.discriminator}" already has the most tags allowed (${tagLimit})`);
  }
  const base = userCreatedDiscriminator(vendor, 'tags', name);
  const taken = new Set(await q.listTagDiscriminatorsLike(tx, accountId, section.id, base));
  let discriminator = base;
  for (let n = 2; taken.has(discriminator); n++) discriminator = `${base}-${n}`;
  const keyspaces = await q.listKeyspacesByAccount(tx, accountId);
  const row = await q.insertTag(tx, accountId, {
    sectionId: section.id,
    discriminator,
    name,
    permissions: defaultPermissions(keyspaces),
  });
  await announce(feed, tx, accountId);
  return tagView(row, {});
}

/**
 * Saves an AQL query as a segment's new version (its last); the versions before stay, as stored
 * data depends on them. The query must parse and check (400 where it fails); it may name any
 * section, so only a key of every section may save one.
 */
export async function addSegmentVersion(
  tx: Queryable,
  scope: AccountScope,
  feed: ChangeFeed,
  discriminator: string,
  query: string,
): Promise<{ id: string; query: string }> {
  const segment = getSegment(scope.defs, discriminator);
  requireAllSections(scope, 'a segment query');
  check(parse(query), scope.defs, query);
  const id = await q.insertNextSegmentVersion(
    tx,
    scope.accountId,
    scope.defs.segments.find((s) => s.discriminator === segment.discriminator)!.id,
    query,
  );
  await announce(feed, tx, scope.accountId);
  if (scope.defs.segments.find((s) => s.discriminator === segment.discriminator)!.live_time_zone !== null)
    await refreshLiveSegments(tx, scope.accountId);
  return { id, query };
}

/**
 * Creates a segment with its first version: its discriminator is made from its name (with `-2`,
 * `-3`… when taken), and the query is checked as a new version's is (400 where it fails); only a
 * key of every section may create one.
 */
export async function createSegment(
  tx: Queryable,
  scope: AccountScope,
  { feed, vendor }: DefinitionsWriter,
  { name, description, query }: { name: string; description?: string; query: string },
): Promise<Static<typeof Segment>> {
  requireAllSections(scope, 'a segment query');
  check(parse(query), scope.defs, query);
  const { segment_id, discriminator } = await q.insertNewSegment(tx, scope.accountId, {
    base: userCreatedDiscriminator(vendor, 'segments', name),
    name,
    description: description ?? '',
  });
  const id = await q.insertNextSegmentVersion(tx, scope.accountId, segment_id, query);
  await announce(feed, tx, scope.accountId);
  return { discriminator, name, description: description ?? '', versions: [{ id, query }] };
}

/** Gives a tag a new name; its discriminator stays. */
export async function renameTag(
  tx: Queryable,
  scope: AccountScope,
  feed: ChangeFeed,
  ref: { section_discriminator: string; tag_discriminator: string },
  name: string,
) {
  const section = sectionOf(scope, ref.section_discriminator);
  const tag = section.tags.find((t) => t.discriminator === ref.tag_discriminator);
  if (!tag)
    throw new Problem(
      'AUD-1103',
      `Tag "${ref.tag_discriminator}" does not exist in section "${section.discriminator}"`,
    );
  const row = await q.updateTagName(tx, scope.accountId, tag.tag_id, name);
  await announce(feed, tx, scope.accountId);
  return tagView(row, {});
}

/**
 * Gives a section the built-in event types of activities (docs/activities.md) unless it has them:
 * readable through every keyspace with API access and writable through none, since only the
 * activities area records them (its counters would miss events written through the profile API).
 * Answers whether it added any.
 */
export async function installActivityEventTypes(
  tx: Queryable,
  feed: ChangeFeed,
  vendor: string,
  accountId: string,
  section: Pick<SectionDefs, 'id' | 'events'>,
): Promise<boolean> {
  const wanted = activityEventTypes(vendor).filter(
    (t) => !section.events.some((e) => e.discriminator === t.discriminator),
  );
  if (wanted.length === 0) return false;
  // The snapshot may predate an install earlier in this transaction (a manifest with several activities).
  const stored = (await q.listEventsByAccount(tx, accountId)).filter((e) => e.section_id === section.id);
  const missing = wanted.filter((t) => !stored.some((e) => e.discriminator === t.discriminator));
  if (missing.length === 0) return false;
  const keyspaces = await q.listKeyspacesByAccount(tx, accountId);
  const readOnly: Permissions = Object.fromEntries(
    keyspaces.filter((k) => k.api_access).map((k) => [k.discriminator, ['read'] as ('read' | 'write')[]]),
  );
  for (const t of missing) {
    const id = await q.upsertEvent(tx, accountId, {
      section_id: section.id,
      discriminator: t.discriminator,
      name: t.name,
      description: t.description,
      hidden: false,
      keyspace_permissions: readOnly,
    });
    await q.insertTypeVersion(tx, 'event', accountId, {
      ownerId: id,
      ordinal: 1,
      type: t.fields,
      deprecatedAt: null,
      validFrom: '2000-01-01T00:00:00Z',
    });
  }
  await announce(feed, tx, accountId);
  return true;
}

/** Erases every definition of an account being deleted (after the areas whose rows name them). */
export async function forgetAccountDefinitions(tx: Queryable, feed: ChangeFeed, accountId: string): Promise<void> {
  await q.deleteAccountRows(tx, accountId);
  await announce(feed, tx, accountId);
}

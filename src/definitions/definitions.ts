import type { Static } from 'typebox';
import { check } from '../aql/check.ts';
import { parse } from '../aql/parser.ts';
import { Problem } from '../core/problems.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { RecordCache } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { builtinChannels, builtinKeyspaces, defaultAttributes, rootFolderDiscriminator, userCreatedDiscriminator } from './builtins.ts';
import type { Definitions, KeyspaceRow, Permissions, SectionDefs, TagRow, TypeVersion } from '../core/definitions.ts';
import type { Caller } from '../core/scope.ts';
import * as q from './queries.ts';
import type { AttributeDefinition, EventDefinition, FolderNode, Manifest, Segment, Tag, Topic } from './schemas.ts';

const TOPIC = 'definitions';

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
      list.push({ id: v.version_id, type: v.type, deprecated_at: v.deprecated_at?.toISOString() ?? null, valid_from: v.valid_from.toISOString() });
      map.set(v.owner_id, list);
    }
    return map;
  };
  const av = versionsOf(attributeVersions);
  const ev = versionsOf(eventVersions);
  const inSection = <T extends { section_id: string }>(rows: T[], id: string) => rows.filter((r) => r.section_id === id);
  return {
    accountId,
    keyspaces,
    channels,
    sections: sections.map((s) => ({
      id: s.section_id, discriminator: s.discriminator, name: s.name, description: s.description, ecommerce_connected: s.ecommerce_connected,
      attributes: inSection(attributes, s.section_id).map(({ attribute_id, ...a }) => ({ ...a, id: attribute_id, versions: av.get(attribute_id) ?? [] })),
      tags: inSection(tags, s.section_id),
      events: inSection(events, s.section_id).map(({ event_id, ...e }) => ({ ...e, id: event_id, versions: ev.get(event_id) ?? [] })),
      folders: inSection(folders, s.section_id),
      topics: inSection(topics, s.section_id),
    })),
    segments: segments.map((s) => ({
      id: s.segment_id, discriminator: s.discriminator, name: s.name, description: s.description,
      versions: segmentVersions.filter((v) => v.segment_id === s.segment_id).map((v) => ({ id: v.version_id, query: v.query })),
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

async function announce(feed: ChangeFeed, tx: Queryable, accountId: string): Promise<void> {
  await feed.publish(tx, TOPIC, accountId);
}

// ---- Lookups used by every area ----

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

/**
 * The keyspace of a profile route, or 404; 403 with the detail of SPEC §2.1 when the account
 * does not permit profile access through it.
 */
export function keyspaceForProfileAccess(defs: Definitions, discriminator: string): KeyspaceRow {
  const keyspace = defs.keyspaces.find((k) => k.discriminator === discriminator);
  if (!keyspace) throw new Problem('AUD-1101', `Keyspace "${discriminator}" does not exist`);
  if (!keyspace.api_access) throw new Problem('AUD-1106', `Access via the API is not allowed through the keyspace "${discriminator}"`);
  return keyspace;
}

// ---- Read views of SPEC §4.2 ----

export function listKeyspaces(defs: Definitions) {
  return defs.keyspaces.map((k) => ({ discriminator: k.discriminator, name: k.name, description: k.description, manage_subscriptions: k.manage_subscriptions }));
}

export function listChannels(defs: Definitions) {
  return defs.channels.map((c) => ({ discriminator: c.discriminator, name: c.name, description: c.description }));
}

export function listSections(defs: Definitions, caller: Caller) {
  return defs.sections
    .filter((s) => !caller.sectionIds || caller.sectionIds.includes(s.id))
    .map((s) => ({ discriminator: s.discriminator, name: s.name, description: s.description, id: s.id }));
}

/** Visible attributes: hidden ones never, e-commerce ones only while an integration is connected (SPEC §2.5). */
export function listAttributes(section: SectionDefs, withPermissions: boolean): Static<typeof AttributeDefinition>[] {
  return section.attributes
    .filter((a) => !a.hidden && (!a.ecommerce || section.ecommerce_connected))
    .map((a) => ({
      discriminator: a.discriminator, name: a.name, description: a.description,
      versions: a.versions.map((v) => ({ ...v, type: v.type as string[] })),
      ...(withPermissions ? { keyspace_permissions: a.keyspace_permissions } : {}),
    }));
}

function tagView(t: TagRow, withPermissions: boolean): Static<typeof Tag> {
  return { discriminator: t.discriminator, name: t.name, id: t.tag_id, ...(withPermissions ? { keyspace_permissions: t.keyspace_permissions } : {}) };
}

export function listTags(section: SectionDefs, withPermissions: boolean) {
  return section.tags.filter((t) => !t.hidden).map((t) => tagView(t, withPermissions));
}

export function getTag(section: SectionDefs, tagDiscriminator: string, withPermissions: boolean) {
  const tag = section.tags.find((t) => t.discriminator === tagDiscriminator);
  if (!tag) throw new Problem('AUD-1103', `Tag "${tagDiscriminator}" does not exist in section "${section.discriminator}"`);
  return tagView(tag, withPermissions);
}

export function listEvents(section: SectionDefs, withPermissions: boolean): Static<typeof EventDefinition>[] {
  return section.events.filter((e) => !e.hidden).map((e) => ({
    discriminator: e.discriminator, name: e.name, description: e.description,
    versions: e.versions.map((v) => ({ ...v, type: v.type as Static<typeof EventDefinition>['versions'][number]['type'] })),
    ...(withPermissions ? { keyspace_permissions: e.keyspace_permissions } : {}),
  }));
}

export function listTopics(section: SectionDefs, vendor: string): Static<typeof Topic>[] {
  const root = rootFolderDiscriminator(vendor);
  return section.topics.map((t) => ({
    discriminator: t.discriminator, id: t.topic_id, name: t.name, description: t.description,
    folder_discriminator: section.folders.find((f) => f.folder_id === t.folder_id)?.discriminator ?? root,
  }));
}

export function topicFolderTree(section: SectionDefs, vendor: string): { discriminator: string; subfolders: FolderNode[] } {
  const childrenOf = (parent: string | null): FolderNode[] => section.folders
    .filter((f) => f.parent_folder_id === parent)
    .map((f) => ({ discriminator: f.discriminator, name: f.name, subfolders: childrenOf(f.folder_id) }));
  return { discriminator: rootFolderDiscriminator(vendor), subfolders: childrenOf(null) };
}

export function listSegments(defs: Definitions): Static<typeof Segment>[] {
  return defs.segments.map((s) => ({ discriminator: s.discriminator, name: s.name, description: s.description, versions: s.versions }));
}

export function getSegment(defs: Definitions, discriminator: string): Static<typeof Segment> {
  const segment = defs.segments.find((s) => s.discriminator === discriminator);
  if (!segment) throw new Problem('AUD-1104', `Segment "${discriminator}" does not exist`);
  return { discriminator: segment.discriminator, name: segment.name, description: segment.description, versions: segment.versions };
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
  for (const k of keyspaces) if (k.api_access) permissions[k.discriminator] = k.kind === 'export' ? ['read'] : ['read', 'write'];
  return permissions;
}

/** Gives a new account the keyspaces and channels every account has. */
export async function installBuiltins(tx: Queryable, feed: ChangeFeed, vendor: string, accountId: string): Promise<void> {
  for (const k of builtinKeyspaces(vendor)) await q.upsertKeyspace(tx, accountId, { ...k, api_access: true });
  for (const c of builtinChannels(vendor)) await q.upsertChannel(tx, accountId, c);
  await announce(feed, tx, accountId);
}

/** Creates a tag in a section (SPEC §4.2) within the account's tag limit. */
export async function createTag(tx: Queryable, feed: ChangeFeed, vendor: string, accountId: string, section: SectionDefs, name: string, tagLimit: number | null) {
  await q.lockSection(tx, accountId, section.id);
  if (tagLimit !== null && (await q.countTagsBySection(tx, accountId, section.id)) >= tagLimit) {
    throw new Problem('AUD-1108', `Section "${section.discriminator}" already has the most tags allowed (${tagLimit})`);
  }
  const base = userCreatedDiscriminator(vendor, 'tags', name);
  const taken = new Set(await q.listTagDiscriminatorsLike(tx, accountId, section.id, base));
  let discriminator = base;
  for (let n = 2; taken.has(discriminator); n++) discriminator = `${base}-${n}`;
  const keyspaces = await q.listKeyspacesByAccount(tx, accountId);
  const row = await q.insertTag(tx, accountId, { sectionId: section.id, discriminator, name, permissions: defaultPermissions(keyspaces) });
  await announce(feed, tx, accountId);
  return tagView(row, false);
}

/** Gives a tag a new name; its discriminator stays. */
export async function renameTag(tx: Queryable, feed: ChangeFeed, accountId: string, section: SectionDefs, tagDiscriminator: string, name: string) {
  const tag = section.tags.find((t) => t.discriminator === tagDiscriminator);
  if (!tag) throw new Problem('AUD-1103', `Tag "${tagDiscriminator}" does not exist in section "${section.discriminator}"`);
  const row = await q.updateTagName(tx, accountId, tag.tag_id, name);
  await announce(feed, tx, accountId);
  return tagView(row, false);
}

/**
 * Applies a manifest (docs/manifest.md) to an account, idempotently: items are matched by
 * discriminator and versions by position; nothing absent from the manifest is removed. A version
 * whose type or query differs from the stored one is refused, because stored data depends on it.
 */
export async function applyManifest(tx: Queryable, feed: ChangeFeed, vendor: string, accountId: string, input: Manifest): Promise<void> {
  const m = JSON.parse(JSON.stringify(input).replaceAll('{vendor}', vendor)) as Manifest;
  for (const k of m.keyspaces ?? []) {
    const builtin = builtinKeyspaces(vendor).find((b) => b.discriminator === k.discriminator);
    const current = (await q.listKeyspacesByAccount(tx, accountId)).find((c) => c.discriminator === k.discriminator);
    const base = current ?? builtin;
    await q.upsertKeyspace(tx, accountId, {
      discriminator: k.discriminator,
      name: k.name ?? base?.name ?? k.discriminator,
      description: k.description ?? base?.description ?? '',
      manage_subscriptions: k.manage_subscriptions ?? base?.manage_subscriptions ?? false,
      api_access: k.api_access ?? current?.api_access ?? true,
      kind: base?.kind ?? 'integration',
      mapped_attribute: k.mapped_attribute !== undefined ? k.mapped_attribute : base?.mapped_attribute ?? null,
    });
  }
  for (const c of m.channels ?? []) {
    await q.upsertChannel(tx, accountId, { discriminator: c.discriminator, name: c.name, description: c.description ?? '', address_attribute: c.address_attribute ?? null });
  }
  const keyspaces = await q.listKeyspacesByAccount(tx, accountId);
  const channels = await q.listChannelsByAccount(tx, accountId);
  const permissionsOf = (given: Permissions | undefined, where: string): Permissions => {
    if (!given) return defaultPermissions(keyspaces);
    for (const ks of Object.keys(given)) {
      if (!keyspaces.some((k) => k.discriminator === ks)) throw new Problem('AUD-1111', `${where}: keyspace_permissions names the unknown keyspace "${ks}"`);
    }
    return given;
  };
  const applyVersions = async (kind: 'attribute' | 'event', ownerId: string, discriminator: string, versions: { type: unknown[]; deprecated_at?: string | null; valid_from?: string }[]) => {
    for (const [i, v] of versions.entries()) {
      const stored = await q.findTypeVersionByOrdinal(tx, kind, accountId, ownerId, i + 1);
      if (!stored) {
        await q.insertTypeVersion(tx, kind, accountId, { ownerId, ordinal: i + 1, type: v.type, deprecatedAt: v.deprecated_at ?? null, validFrom: v.valid_from ?? null });
      } else if (JSON.stringify(canonicalJson(stored.type)) !== JSON.stringify(canonicalJson(v.type))) {
        throw new Problem('AUD-1109', `${kind} "${discriminator}" version ${i + 1} is stored with another type; add a new version instead of changing it`);
      } else if (v.deprecated_at !== undefined && (stored.deprecated_at?.toISOString() ?? null) !== (v.deprecated_at && new Date(v.deprecated_at).toISOString())) {
        await q.updateTypeVersionDeprecation(tx, kind, accountId, stored.version_id, v.deprecated_at);
      }
    }
  };

  for (const s of m.sections ?? []) {
    const discriminator = s.discriminator ?? userCreatedDiscriminator(vendor, 'sections', s.name);
    const { section_id: sectionId, created } = await q.upsertSection(tx, accountId, {
      discriminator, name: s.name, description: s.description ?? '', ecommerce_connected: s.ecommerce_connected ?? false,
    });
    const where = `section "${discriminator}"`;
    const attributes = [...(created ? defaultAttributes(vendor) : []), ...(s.attributes ?? [])];
    for (const a of attributes) {
      const ad = a.discriminator ?? userCreatedDiscriminator(vendor, 'attributes', a.name);
      const full = a as NonNullable<typeof s.attributes>[number];
      const id = await q.upsertAttribute(tx, accountId, {
        section_id: sectionId, discriminator: ad, name: a.name, description: a.description ?? '',
        hidden: full.hidden ?? false, ecommerce: full.ecommerce ?? false, keyspace_permissions: permissionsOf(full.keyspace_permissions, `${where}, attribute "${ad}"`),
      });
      await applyVersions('attribute', id, ad, a.versions);
    }
    for (const t of s.tags ?? []) {
      const td = t.discriminator ?? userCreatedDiscriminator(vendor, 'tags', t.name);
      await q.upsertTag(tx, accountId, { section_id: sectionId, discriminator: td, name: t.name, hidden: t.hidden ?? false, keyspace_permissions: permissionsOf(t.keyspace_permissions, `${where}, tag "${td}"`) });
    }
    for (const e of s.events ?? []) {
      const ed = e.discriminator ?? userCreatedDiscriminator(vendor, 'events', e.name);
      const id = await q.upsertEvent(tx, accountId, {
        section_id: sectionId, discriminator: ed, name: e.name, description: e.description ?? '',
        hidden: e.hidden ?? false, keyspace_permissions: permissionsOf(e.keyspace_permissions, `${where}, event "${ed}"`),
      });
      await applyVersions('event', id, ed, e.versions);
    }
    const folderIds = new Map((await q.listFoldersByAccount(tx, accountId)).filter((f) => f.section_id === sectionId).map((f) => [f.discriminator, f.folder_id]));
    const folders = (s.topic_folders ?? []).map((f) => ({ ...f, discriminator: f.discriminator ?? userCreatedDiscriminator(vendor, 'topic-folders', f.name) }));
    for (const f of folders) folderIds.set(f.discriminator, await q.upsertFolder(tx, accountId, { sectionId, discriminator: f.discriminator, name: f.name }));
    const root = rootFolderDiscriminator(vendor);
    const folderId = (ref: string | undefined, what: string): string | null => {
      if (ref === undefined || ref === root) return null;
      const id = folderIds.get(ref);
      if (!id) throw new Problem('AUD-1111', `${where}: ${what} names the unknown topic folder "${ref}"`);
      return id;
    };
    for (const f of folders) {
      const parent = folderId(f.parent, `folder "${f.discriminator}"`);
      if (parent === folderIds.get(f.discriminator)) throw new Problem('AUD-0', `${where}: folder "${f.discriminator}" cannot be its own parent`);
      await q.updateFolderParent(tx, accountId, folderIds.get(f.discriminator)!, parent);
    }
    // Every folder must hang from the root, or the tree (DEF-18) would leave it and its topics out.
    const stored = (await q.listFoldersByAccount(tx, accountId)).filter((f) => f.section_id === sectionId);
    const parentOf = new Map(stored.map((f) => [f.folder_id, f.parent_folder_id]));
    for (const f of stored) {
      const seen = new Set<string>();
      for (let at: string | null = f.folder_id; at !== null; at = parentOf.get(at) ?? null) {
        if (seen.has(at)) throw new Problem('AUD-0', `${where}: the parents of folder "${f.discriminator}" form a cycle`);
        seen.add(at);
      }
    }
    for (const t of s.topics ?? []) {
      const td = t.discriminator ?? userCreatedDiscriminator(vendor, 'topics', t.name);
      const channel = t.channel === undefined ? undefined : channels.find((c) => c.discriminator === t.channel);
      if (t.channel !== undefined && !channel) throw new Problem('AUD-1111', `${where}: topic "${td}" names the unknown channel "${t.channel}"`);
      await q.upsertTopic(tx, accountId, {
        section_id: sectionId, discriminator: td, name: t.name, description: t.description ?? '',
        folder_id: folderId(t.folder, `topic "${td}"`), channel_id: channel?.channel_id ?? null,
      });
    }
  }
  const defs = m.segments?.length ? await loadDefinitions(tx, accountId) : undefined;
  for (const g of m.segments ?? []) {
    const gd = g.discriminator ?? userCreatedDiscriminator(vendor, 'segments', g.name);
    const resolve = (query: string) => resolveManifestIds(defs!, g.section, query, `segment "${gd}"`);
    const segmentId = await q.upsertSegment(tx, accountId, { discriminator: gd, name: g.name, description: g.description ?? '' });
    for (const [i, v] of g.versions.entries()) {
      const stored = await q.findSegmentVersionByOrdinal(tx, accountId, segmentId, i + 1);
      const query = resolve(v.query);
      // Stored segments are valid AQL for this account (docs/aql.md).
      check(parse(query), defs!, query);
      if (!stored) await q.insertSegmentVersion(tx, accountId, { segmentId, ordinal: i + 1, query });
      else if (stored.query !== query) throw new Problem('AUD-1109', `segment "${gd}" version ${i + 1} is stored with another query; add a new version instead of changing it`);
    }
  }
  await announce(feed, tx, accountId);
}

/** A JSON value with the keys of its objects sorted: jsonb does not keep key order, so stored and given types compare this way. */
function canonicalJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalJson);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonicalJson((value as Record<string, unknown>)[k])]));
  }
  return value;
}

/**
 * Replaces the references a manifest can make in AQL, whose ids are only known once applied:
 * `{section}` or `{section:DISCRIMINATOR}` by a section id, `{attribute:DISCRIMINATOR@N}` and
 * `{event:DISCRIMINATOR@N}` by the id of version N (default 1) in the segment's section.
 */
function resolveManifestIds(defs: Definitions, sectionDiscriminator: string | undefined, query: string, where: string): string {
  const sectionNamed = (d: string | undefined) => {
    if (d === undefined) throw new Problem('AUD-0', `${where}: the query refers to ids, so the segment needs "section"`);
    const section = defs.sections.find((s) => s.discriminator === d);
    if (!section) throw new Problem('AUD-1111', `${where}: unknown section "${d}"`);
    return section;
  };
  return query.replace(/\{(section|attribute|event)(?::([^{}@]+?)(?:@(\d+))?)?\}/g, (_all, kind: string, ref?: string, n?: string) => {
    if (kind === 'section') return sectionNamed(ref ?? sectionDiscriminator).id;
    const section = sectionNamed(sectionDiscriminator);
    const owner = (kind === 'attribute' ? section.attributes : section.events).find((x) => x.discriminator === ref);
    const version = owner?.versions[Number(n ?? 1) - 1];
    if (!version) throw new Problem('AUD-1111', `${where}: no version ${n ?? 1} of ${kind} "${ref}" in section "${section.discriminator}"`);
    return version.id;
  });
}

import { check } from '../aql/check.ts';
import { parse } from '../aql/parser.ts';
import { checkTimeZone } from '../aql/time.ts';
import type { ChannelRow, Definitions, KeyspaceRow, Permissions, TypeVersion } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { ChangeFeed } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { builtinKeyspaces, defaultAttributes, rootFolderDiscriminator, userCreatedDiscriminator } from './builtins.ts';
import {
  announce,
  defaultPermissions,
  followDefaultPermissions,
  loadDefinitions,
  refreshLiveSegments,
} from './definitions.ts';
import { connectIntegration } from './integrations.ts';
import * as q from './queries.ts';
import type { Manifest, ManifestAttribute, ManifestSummary } from './schemas.ts';

type ManifestKeyspace = NonNullable<Manifest['keyspaces']>[number];
type ManifestChannel = NonNullable<Manifest['channels']>[number];
type ManifestSection = NonNullable<Manifest['sections']>[number];
type ManifestSegment = NonNullable<Manifest['segments']>[number];
interface ManifestVersion {
  type: unknown[];
  deprecated_at?: string | null;
  valid_from?: string;
}

/** What the steps after keyspaces and channels share: permissions and topics refer to the keyspaces and channels as applied. */
interface ManifestContext {
  tx: Queryable;
  accountId: string;
  vendor: string;
  keyspaces: KeyspaceRow[];
  channels: ChannelRow[];
}

/** A section being applied: its id, and how error details name it. */
interface SectionTarget {
  id: string;
  where: string;
}

/** A section's topic folders by discriminator; `root` stands for no folder. */
interface SectionFolders {
  root: string;
  ids: Map<string, string>;
}

/**
 * Applies a manifest (docs/manifest.md) to an account, idempotently: items are matched by
 * discriminator and versions by position; nothing absent from the manifest is removed. A version
 * whose type or query differs from the stored one is refused, because stored data depends on it.
 * What it created, changed and left alone is told by comparing `definitionItems` before and after.
 */
export async function writeManifest(
  tx: Queryable,
  feed: ChangeFeed,
  vendor: string,
  accountId: string,
  input: Manifest,
): Promise<void> {
  const m = withVendor(input, vendor);
  await applyKeyspaces({ tx, accountId, vendor }, m.keyspaces ?? []);
  for (const i of m.integrations ?? []) await connectIntegration(tx, vendor, accountId, i.system);
  await applyChannels({ tx, accountId }, m.channels ?? []);
  const ctx: ManifestContext = {
    tx,
    accountId,
    vendor,
    keyspaces: await q.listKeyspacesByAccount(tx, accountId),
    channels: await q.listChannelsByAccount(tx, accountId),
  };
  for (const s of m.sections ?? []) await applySection(ctx, s);
  await applySegments(ctx, m.segments ?? []);
  await announce(feed, tx, accountId);
}

/** Each item of a definitions snapshot, named by kind and discriminator, with its stored state as JSON. */
export function definitionItems(defs: Definitions): Map<string, string> {
  const items = new Map<string, string>();
  const add = (name: string, item: unknown) => items.set(name, JSON.stringify(item));
  for (const k of defs.keyspaces) add(`keyspace ${k.discriminator}`, k);
  for (const c of defs.channels) add(`channel ${c.discriminator}`, c);
  for (const { attributes, tags, events, folders, topics, ...section } of defs.sections) {
    add(`section ${section.discriminator}`, section);
    // Default attributes have the same discriminator in every section.
    const within = ` in section ${section.discriminator}`;
    for (const a of attributes) add(`attribute ${a.discriminator}${within}`, a);
    for (const t of tags) add(`tag ${t.discriminator}${within}`, t);
    for (const e of events) add(`event ${e.discriminator}${within}`, e);
    for (const f of folders) add(`topic folder ${f.discriminator}${within}`, f);
    for (const t of topics) add(`topic ${t.discriminator}${within}`, t);
  }
  for (const g of defs.segments) add(`segment ${g.discriminator}`, g);
  return items;
}

/** Compares named items before and after an apply; nothing is ever removed, so every item is in `after`. */
export function summarise(before: Map<string, string>, after: Map<string, string>): ManifestSummary {
  const summary: ManifestSummary = { created: [], changed: [], unchanged: [] };
  for (const [name, state] of after) {
    const was = before.get(name);
    (was === undefined ? summary.created : was === state ? summary.unchanged : summary.changed).push(name);
  }
  return summary;
}

/** The manifest with every `{vendor}` replaced by the configured vendor word. */
function withVendor(input: Manifest, vendor: string): Manifest {
  return JSON.parse(JSON.stringify(input).replaceAll('{vendor}', vendor)) as Manifest;
}

/**
 * Upserts keyspaces; what one leaves out comes from the stored keyspace, else from the built-in one.
 * Items with the default permissions keep them, new keyspaces included.
 */
async function applyKeyspaces(
  ctx: Pick<ManifestContext, 'tx' | 'accountId' | 'vendor'>,
  keyspaces: ManifestKeyspace[],
): Promise<void> {
  const { tx, accountId, vendor } = ctx;
  if (!keyspaces.length) return;
  const before = await q.listKeyspacesByAccount(tx, accountId);
  for (const k of keyspaces) {
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
      mapped_attribute: k.mapped_attribute !== undefined ? k.mapped_attribute : (base?.mapped_attribute ?? null),
    });
  }
  await followDefaultPermissions(tx, accountId, before);
}

/** Upserts channels. */
async function applyChannels(
  ctx: Pick<ManifestContext, 'tx' | 'accountId'>,
  channels: ManifestChannel[],
): Promise<void> {
  for (const c of channels) {
    await q.upsertChannel(ctx.tx, ctx.accountId, {
      discriminator: c.discriminator,
      name: c.name,
      description: c.description ?? '',
      address_attribute: c.address_attribute ?? null,
    });
  }
}

/** Upserts a section and then its items, in an order where each can refer to the ones before. */
async function applySection(ctx: ManifestContext, s: ManifestSection): Promise<void> {
  const discriminator = s.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'sections', s.name);
  const { section_id: sectionId, created } = await q.upsertSection(ctx.tx, ctx.accountId, {
    discriminator,
    name: s.name,
    description: s.description ?? '',
    ecommerce_connected: s.ecommerce_connected ?? false,
  });
  const section: SectionTarget = { id: sectionId, where: `section "${discriminator}"` };
  // A new section gets the default attributes every section has (SPEC §1 rule 6).
  await applyAttributes(ctx, section, [...(created ? defaultAttributes(ctx.vendor) : []), ...(s.attributes ?? [])]);
  await applyTags(ctx, section, s.tags ?? []);
  await applyEvents(ctx, section, s.events ?? []);
  const folders = await applyTopicFolders(ctx, section, s.topic_folders ?? []);
  await applyTopics(ctx, section, folders, s.topics ?? []);
}

/** Upserts a section's attributes and their versions. */
async function applyAttributes(
  ctx: ManifestContext,
  section: SectionTarget,
  attributes: ManifestAttribute[],
): Promise<void> {
  for (const a of attributes) {
    const ad = a.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'attributes', a.name);
    const id = await q.upsertAttribute(ctx.tx, ctx.accountId, {
      section_id: section.id,
      discriminator: ad,
      name: a.name,
      description: a.description ?? '',
      hidden: a.hidden ?? false,
      ecommerce: a.ecommerce ?? false,
      keyspace_permissions: permissionsOf(ctx.keyspaces, a.keyspace_permissions, `${section.where}, attribute "${ad}"`),
    });
    await applyVersions(ctx, { kind: 'attribute', id, discriminator: ad }, a.versions);
  }
}

/** Upserts a section's tags. */
async function applyTags(
  ctx: ManifestContext,
  section: SectionTarget,
  tags: NonNullable<ManifestSection['tags']>,
): Promise<void> {
  for (const t of tags) {
    const td = t.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'tags', t.name);
    await q.upsertTag(ctx.tx, ctx.accountId, {
      section_id: section.id,
      discriminator: td,
      name: t.name,
      hidden: t.hidden ?? false,
      keyspace_permissions: permissionsOf(ctx.keyspaces, t.keyspace_permissions, `${section.where}, tag "${td}"`),
    });
  }
}

/** Upserts a section's events and their versions. */
async function applyEvents(
  ctx: ManifestContext,
  section: SectionTarget,
  events: NonNullable<ManifestSection['events']>,
): Promise<void> {
  for (const e of events) {
    const ed = e.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'events', e.name);
    const id = await q.upsertEvent(ctx.tx, ctx.accountId, {
      section_id: section.id,
      discriminator: ed,
      name: e.name,
      description: e.description ?? '',
      hidden: e.hidden ?? false,
      keyspace_permissions: permissionsOf(ctx.keyspaces, e.keyspace_permissions, `${section.where}, event "${ed}"`),
    });
    await applyVersions(ctx, { kind: 'event', id, discriminator: ed }, e.versions);
  }
}

/**
 * Upserts a section's topic folders, then sets their parents: a parent may be a folder listed
 * later. Returns the section's folders, stored and new, for its topics to refer to.
 */
async function applyTopicFolders(
  ctx: ManifestContext,
  section: SectionTarget,
  topicFolders: NonNullable<ManifestSection['topic_folders']>,
): Promise<SectionFolders> {
  const { tx, accountId, vendor } = ctx;
  const ids = new Map(
    (await q.listFoldersByAccount(tx, accountId))
      .filter((f) => f.section_id === section.id)
      .map((f) => [f.discriminator, f.folder_id]),
  );
  const folders = topicFolders.map((f) => ({
    ...f,
    discriminator: f.discriminator ?? userCreatedDiscriminator(vendor, 'topic-folders', f.name),
  }));
  for (const f of folders)
    ids.set(
      f.discriminator,
      await q.upsertFolder(tx, accountId, { sectionId: section.id, discriminator: f.discriminator, name: f.name }),
    );
  const sectionFolders: SectionFolders = { root: rootFolderDiscriminator(vendor), ids };
  for (const f of folders) {
    const parent = folderIdOf(section, sectionFolders, f.parent, `folder "${f.discriminator}"`);
    if (parent === ids.get(f.discriminator))
      throw new Problem('AUD-1113', `${section.where}: folder "${f.discriminator}" cannot be its own parent`);
    await q.updateFolderParent(tx, accountId, ids.get(f.discriminator)!, parent);
  }
  await refuseFolderCycles(ctx, section);
  return sectionFolders;
}

/** Refuses folders whose parents form a cycle: every folder must hang from the root, or the tree (DEF-18) would leave it and its topics out. */
async function refuseFolderCycles(ctx: ManifestContext, section: SectionTarget): Promise<void> {
  const stored = (await q.listFoldersByAccount(ctx.tx, ctx.accountId)).filter((f) => f.section_id === section.id);
  const parentOf = new Map(stored.map((f) => [f.folder_id, f.parent_folder_id]));
  for (const f of stored) {
    const seen = new Set<string>();
    for (let at: string | null = f.folder_id; at !== null; at = parentOf.get(at) ?? null) {
      if (seen.has(at))
        throw new Problem('AUD-1114', `${section.where}: the parents of folder "${f.discriminator}" form a cycle`);
      seen.add(at);
    }
  }
}

/** The id of the folder a manifest item names; null for the root or when it names none. */
function folderIdOf(
  section: SectionTarget,
  folders: SectionFolders,
  ref: string | undefined,
  what: string,
): string | null {
  if (ref === undefined || ref === folders.root) return null;
  const id = folders.ids.get(ref);
  if (!id) throw new Problem('AUD-1111', `${section.where}: ${what} names the unknown topic folder "${ref}"`);
  return id;
}

/** Upserts a section's topics, each in its folder and, when it names one, for its channel. */
async function applyTopics(
  ctx: ManifestContext,
  section: SectionTarget,
  folders: SectionFolders,
  topics: NonNullable<ManifestSection['topics']>,
): Promise<void> {
  for (const t of topics) {
    const td = t.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'topics', t.name);
    const channel = t.channel === undefined ? undefined : ctx.channels.find((c) => c.discriminator === t.channel);
    if (t.channel !== undefined && !channel)
      throw new Problem('AUD-1111', `${section.where}: topic "${td}" names the unknown channel "${t.channel}"`);
    await q.upsertTopic(ctx.tx, ctx.accountId, {
      section_id: section.id,
      discriminator: td,
      name: t.name,
      description: t.description ?? '',
      folder_id: folderIdOf(section, folders, t.folder, `topic "${td}"`),
      channel_id: channel?.channel_id ?? null,
    });
  }
}

/** The keyspace permissions of an attribute, tag or event: the given ones, which must name known keyspaces, else the defaults. */
function permissionsOf(keyspaces: KeyspaceRow[], given: Permissions | undefined, where: string): Permissions {
  if (!given) return defaultPermissions(keyspaces);
  for (const ks of Object.keys(given)) {
    if (!keyspaces.some((k) => k.discriminator === ks))
      throw new Problem('AUD-1111', `${where}: keyspace_permissions names the unknown keyspace "${ks}"`);
  }
  return given;
}

/** Inserts the versions not stored yet and updates deprecations; a stored version whose type differs is refused. */
async function applyVersions(
  ctx: Pick<ManifestContext, 'tx' | 'accountId'>,
  owner: { kind: 'attribute' | 'event'; id: string; discriminator: string },
  versions: ManifestVersion[],
): Promise<void> {
  const { tx, accountId } = ctx;
  const { kind, id: ownerId, discriminator } = owner;
  for (const [i, v] of versions.entries()) {
    const stored = await q.findTypeVersionByOrdinal(tx, kind, accountId, ownerId, i + 1);
    if (!stored) {
      await q.insertTypeVersion(tx, kind, accountId, {
        ownerId,
        ordinal: i + 1,
        type: v.type,
        deprecatedAt: v.deprecated_at ?? null,
        validFrom: v.valid_from ?? null,
      });
    } else if (JSON.stringify(canonicalJson(stored.type)) !== JSON.stringify(canonicalJson(v.type))) {
      throw new Problem(
        'AUD-1109',
        `${kind} "${discriminator}" version ${i + 1} is stored with another type; add a new version instead of changing it`,
      );
    } else if (
      v.deprecated_at !== undefined &&
      (stored.deprecated_at?.toISOString() ?? null) !== (v.deprecated_at && new Date(v.deprecated_at).toISOString())
    ) {
      await q.updateTypeVersionDeprecation(tx, kind, accountId, stored.version_id, v.deprecated_at);
    }
  }
}

/** Upserts segments; their queries are checked against the definitions as applied so far. */
async function applySegments(ctx: ManifestContext, segments: ManifestSegment[]): Promise<void> {
  if (!segments.length) return;
  const defs = await loadDefinitions(ctx.tx, ctx.accountId);
  for (const g of segments) await applySegment(ctx, defs, g);
}

/** Upserts a segment and inserts the versions not stored yet; a stored version whose query differs is refused. */
async function applySegment(ctx: ManifestContext, defs: Definitions, g: ManifestSegment): Promise<void> {
  const { tx, accountId } = ctx;
  const gd = g.discriminator ?? userCreatedDiscriminator(ctx.vendor, 'segments', g.name);
  const segmentId = await q.upsertSegment(tx, accountId, {
    discriminator: gd,
    name: g.name,
    description: g.description ?? '',
  });
  for (const [i, v] of g.versions.entries()) {
    const stored = await q.findSegmentVersionByOrdinal(tx, accountId, segmentId, i + 1);
    const query = resolveManifestIds(defs, g.section, v.query, `segment "${gd}"`);
    // Stored segments are valid AQL for this account (docs/aql.md).
    check(parse(query), defs, query);
    if (!stored) await q.insertSegmentVersion(tx, accountId, { segmentId, ordinal: i + 1, query });
    else if (stored.query !== query)
      throw new Problem(
        'AUD-1109',
        `segment "${gd}" version ${i + 1} is stored with another query; add a new version instead of changing it`,
      );
  }
  const timeZone =
    g.live === undefined ? defs.segments.find((s) => s.discriminator === gd)?.live_time_zone : g.live?.time_zone;
  if (g.live !== undefined)
    await q.setSegmentLiveTimeZone(
      tx,
      accountId,
      segmentId,
      g.live && checkTimeZone(g.live.time_zone, `segment "${gd}" live.time_zone`),
    );
  // A live segment's membership is computed again for a new version or time zone.
  if (timeZone) await refreshLiveSegments(tx, accountId);
}

/** A JSON value with the keys of its objects sorted: jsonb does not keep key order, so stored and given types compare this way. */
function canonicalJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalJson);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonicalJson((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/**
 * Replaces the references a manifest can make in AQL, whose ids are only known once applied:
 * `{section}` or `{section:DISCRIMINATOR}` by a section id, `{attribute:DISCRIMINATOR@N}` and
 * `{event:DISCRIMINATOR@N}` by the id of version N (default 1) in the segment's section.
 */
function resolveManifestIds(
  defs: Definitions,
  sectionDiscriminator: string | undefined,
  query: string,
  where: string,
): string {
  const sectionNamed = (d: string | undefined) => {
    if (d === undefined)
      throw new Problem('AUD-1115', `${where}: the query refers to ids, so the segment needs "section"`);
    const section = defs.sections.find((s) => s.discriminator === d);
    if (!section) throw new Problem('AUD-1111', `${where}: unknown section "${d}"`);
    return section;
  };
  return query.replace(
    /\{(section|attribute|event)(?::([^{}@]+?)(?:@(\d+))?)?\}/g,
    (_all, kind: string, ref?: string, n?: string) => {
      if (kind === 'section') return sectionNamed(ref ?? sectionDiscriminator).id;
      const section = sectionNamed(sectionDiscriminator);
      const owner = (kind === 'attribute' ? section.attributes : section.events).find((x) => x.discriminator === ref);
      const version = owner?.versions[Number(n ?? 1) - 1];
      if (!version)
        throw new Problem(
          'AUD-1111',
          `${where}: no version ${n ?? 1} of ${kind} "${ref}" in section "${section.discriminator}"`,
        );
      return version.id;
    },
  );
}

/**
 * The manifest of what a definitions snapshot holds, every item with its discriminator and stored
 * state: applied to the account it came from, it creates and changes nothing (versions are listed
 * in order, segment queries as stored, with their numeric ids).
 */
export function manifestOf(defs: Definitions, vendor: string): Manifest {
  const root = rootFolderDiscriminator(vendor);
  const versions = (vs: TypeVersion[]) =>
    vs.map((v) => ({ type: v.type, deprecated_at: v.deprecated_at, valid_from: v.valid_from }));
  return {
    keyspaces: defs.keyspaces.map((k) => ({
      discriminator: k.discriminator,
      name: k.name,
      description: k.description,
      manage_subscriptions: k.manage_subscriptions,
      api_access: k.api_access,
      mapped_attribute: k.mapped_attribute,
    })),
    channels: defs.channels.map((c) => ({
      discriminator: c.discriminator,
      name: c.name,
      description: c.description,
      address_attribute: c.address_attribute,
    })),
    sections: defs.sections.map((s) => {
      const folderName = new Map(s.folders.map((f) => [f.folder_id, f.discriminator]));
      const channelName = new Map(defs.channels.map((c) => [c.channel_id, c.discriminator]));
      return {
        discriminator: s.discriminator,
        name: s.name,
        description: s.description,
        ecommerce_connected: s.ecommerce_connected,
        attributes: s.attributes.map((a) => ({
          discriminator: a.discriminator,
          name: a.name,
          description: a.description,
          hidden: a.hidden,
          ecommerce: a.ecommerce,
          keyspace_permissions: a.keyspace_permissions,
          versions: versions(a.versions) as ManifestAttribute['versions'],
        })),
        tags: s.tags.map((t) => ({
          discriminator: t.discriminator,
          name: t.name,
          hidden: t.hidden,
          keyspace_permissions: t.keyspace_permissions,
        })),
        events: s.events.map((e) => ({
          discriminator: e.discriminator,
          name: e.name,
          description: e.description,
          hidden: e.hidden,
          keyspace_permissions: e.keyspace_permissions,
          versions: versions(e.versions) as NonNullable<ManifestSection['events']>[number]['versions'],
        })),
        // The root folder every section has is not listed: a folder or topic without a parent is in it.
        topic_folders: s.folders
          .filter((f) => f.discriminator !== root)
          .map((f) => ({
            discriminator: f.discriminator,
            name: f.name,
            ...(f.parent_folder_id === null ? {} : { parent: folderName.get(f.parent_folder_id) }),
          })),
        topics: s.topics.map((t) => ({
          discriminator: t.discriminator,
          name: t.name,
          description: t.description,
          ...(t.folder_id === null ? {} : { folder: folderName.get(t.folder_id) }),
          ...(t.channel_id === null ? {} : { channel: channelName.get(t.channel_id) }),
        })),
      };
    }),
    segments: defs.segments.map((g) => ({
      discriminator: g.discriminator,
      name: g.name,
      description: g.description,
      versions: g.versions.map((v) => ({ query: v.query })),
      ...(g.live_time_zone === null ? {} : { live: { time_zone: g.live_time_zone } }),
    })),
  };
}

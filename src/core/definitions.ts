import { Problem, type ProblemCode } from './problems.ts';

/**
 * The shape of an account's definitions (SPEC §2.1–2.9) as every layer reads them: one immutable
 * snapshot per account, loaded and written by the definitions area and carried in the request scope.
 * Only types and the rules of attribute types live here, so that the query language, the request
 * scope and every area can read definitions without depending on the area that stores them.
 */

/** Keyspace discriminator → what a type's values allow through that keyspace. */
export type Permissions = Record<string, ('read' | 'write')[]>;

export interface KeyspaceRow {
  keyspace_id: string;
  discriminator: string;
  name: string;
  description: string;
  manage_subscriptions: boolean;
  api_access: boolean;
  kind: string;
  mapped_attribute: string | null;
}
export interface ChannelRow {
  channel_id: string;
  discriminator: string;
  name: string;
  description: string;
  address_attribute: string | null;
}
export interface SectionRow {
  section_id: string;
  discriminator: string;
  name: string;
  description: string;
  ecommerce_connected: boolean;
}
export interface AttributeRow {
  attribute_id: string;
  section_id: string;
  discriminator: string;
  name: string;
  description: string;
  hidden: boolean;
  ecommerce: boolean;
  keyspace_permissions: Permissions;
}
export interface TagRow {
  tag_id: string;
  section_id: string;
  discriminator: string;
  name: string;
  hidden: boolean;
  keyspace_permissions: Permissions;
}
export interface EventRow {
  event_id: string;
  section_id: string;
  discriminator: string;
  name: string;
  description: string;
  hidden: boolean;
  keyspace_permissions: Permissions;
}
export interface FolderRow {
  folder_id: string;
  section_id: string;
  discriminator: string;
  name: string;
  parent_folder_id: string | null;
}
export interface TopicRow {
  topic_id: string;
  section_id: string;
  discriminator: string;
  name: string;
  description: string;
  folder_id: string | null;
  channel_id: string | null;
}

/** One version of an attribute (`type` is `[typeName]`) or of an event (`type` lists its fields). */
export interface TypeVersion {
  id: string;
  type: unknown[];
  deprecated_at: string | null;
  valid_from: string;
}
export interface AttributeDef extends Omit<AttributeRow, 'attribute_id'> {
  id: string;
  versions: TypeVersion[];
}
export interface EventDef extends Omit<EventRow, 'event_id'> {
  id: string;
  versions: TypeVersion[];
}
/** A field of an event version. */
export interface EventField {
  name: string;
  type: string;
}
export interface SectionDefs {
  id: string;
  discriminator: string;
  name: string;
  description: string;
  ecommerce_connected: boolean;
  attributes: AttributeDef[];
  tags: TagRow[];
  events: EventDef[];
  folders: FolderRow[];
  topics: TopicRow[];
}
export interface SegmentDef {
  id: string;
  discriminator: string;
  name: string;
  description: string;
  versions: { id: string; query: string }[];
  /** Set when the segment is live (its members kept by the writes, docs/aql.md "Live segments"): the time zone it is evaluated in. */
  live_time_zone: string | null;
}

/** Everything an account defines, as one immutable snapshot. */
export interface Definitions {
  accountId: string;
  keyspaces: KeyspaceRow[];
  channels: ChannelRow[];
  sections: SectionDefs[];
  segments: SegmentDef[];
}

/** The attribute of a section that owns an attribute version id, with that version; undefined when none does. */
export function attributeOfVersion(
  section: Pick<SectionDefs, 'attributes'>,
  versionId: string,
): { attribute: AttributeDef; version: TypeVersion } | undefined {
  const found = ownerOfVersion(section.attributes, versionId);
  return found && { attribute: found.owner, version: found.version };
}

/** The event of a section that owns an event version id, with that version; undefined when none does. */
export function eventOfVersion(
  section: Pick<SectionDefs, 'events'>,
  versionId: string,
): { event: EventDef; version: TypeVersion } | undefined {
  const found = ownerOfVersion(section.events, versionId);
  return found && { event: found.owner, version: found.version };
}

function ownerOfVersion<T extends { versions: TypeVersion[] }>(
  owners: T[],
  versionId: string,
): { owner: T; version: TypeVersion } | undefined {
  for (const owner of owners) {
    const version = owner.versions.find((v) => v.id === versionId);
    if (version) return { owner, version };
  }
  return undefined;
}

// ---- Attribute types (SPEC §2.5) ----

/** Attribute value types of SPEC §2.5; event fields take the same types. */
export const ATTRIBUTE_TYPES = [
  'Text',
  'True/False',
  'Date',
  'Timestamp',
  'Number',
  'Number with decimal',
  'Struct',
] as const;
export type AttributeType = (typeof ATTRIBUTE_TYPES)[number];

/** The JSON kind of a type's values: what its values are and what AQL compares them with. */
export const JSON_KIND_OF: Record<AttributeType, 'string' | 'number' | 'boolean' | 'struct'> = {
  Text: 'string',
  Date: 'string',
  'True/False': 'boolean',
  Timestamp: 'number',
  Number: 'number',
  'Number with decimal': 'number',
  Struct: 'struct',
};

/** The type name of an attribute version. */
export function attributeTypeOf(version: TypeVersion): AttributeType {
  return version.type[0] as AttributeType;
}

/** The fields of an event version, by name. */
export function eventFieldsOf(version: TypeVersion): Map<string, string> {
  return new Map((version.type as EventField[]).map((f) => [f.name, f.type]));
}

/** A calendar date (`2026-02-28`), optionally with a time; impossible days such as Feb 30 are not dates. */
function isDate(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})([T ].*)?$/.exec(value);
  if (!m || Number.isNaN(Date.parse(value))) return false;
  const day = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return day.getUTCMonth() === Number(m[2]) - 1 && day.getUTCDate() === Number(m[3]);
}

/** Whether a value fits an attribute type (null always does: it clears). */
export function conforms(typeName: string, value: unknown): boolean {
  if (value === null) return true;
  switch (typeName as AttributeType) {
    case 'Text':
      return typeof value === 'string';
    case 'True/False':
      return typeof value === 'boolean';
    case 'Date':
      return typeof value === 'string' && isDate(value);
    case 'Timestamp':
      return Number.isSafeInteger(value);
    case 'Number':
    case 'Number with decimal':
      return typeof value === 'number' && Number.isFinite(value);
    case 'Struct':
      return typeof value === 'object' && !Array.isArray(value);
    default:
      return false;
  }
}

/**
 * The value an attribute of a type stores for a value written to it, or undefined when the value
 * does not fit the type (conforms). A Text attribute also takes a JSON number, stored as its
 * decimal text (web forms send phone numbers so), when that text is exact: an integer beyond
 * 2^53 has lost digits in JSON parsing, and a number printed with an exponent is not decimal text.
 */
export function storedValue(typeName: string, value: unknown): unknown {
  if (typeName === 'Text' && typeof value === 'number') {
    const text = String(value);
    const exact = !/e/i.test(text) && (!Number.isInteger(value) || Number.isSafeInteger(value));
    return Number.isFinite(value) && exact ? text : undefined;
  }
  return conforms(typeName, value) ? value : undefined;
}

/** Whether a type's values (an attribute, tag or event) may be read or written through a keyspace. */
export function grants(
  permissions: Permissions,
  keyspace: Pick<KeyspaceRow, 'discriminator'>,
  what: 'read' | 'write',
): boolean {
  return permissions[keyspace.discriminator]?.includes(what) ?? false;
}

/** What `requireWrite` and `writeRefusal` can answer. */
export const WRITE_GRANT_PROBLEMS: readonly ProblemCode[] = ['AUD-1208'];

/** Refuses (403 AUD-1208) a write of an attribute, tag or event that the keyspace is not granted; `field` prefixes the detail. */
export function requireWrite(
  kind: 'attribute' | 'tag' | 'event',
  item: { discriminator: string; keyspace_permissions: Permissions },
  keyspace: Pick<KeyspaceRow, 'discriminator'>,
  field?: string,
): void {
  const refusal = writeRefusal(kind, item, keyspace, field);
  if (refusal) throw refusal;
}

/** The refusal of requireWrite, or undefined when the keyspace is granted the write. */
export function writeRefusal(
  kind: 'attribute' | 'tag' | 'event',
  item: { discriminator: string; keyspace_permissions: Permissions },
  keyspace: Pick<KeyspaceRow, 'discriminator'>,
  field?: string,
): Problem | undefined {
  if (grants(item.keyspace_permissions, keyspace, 'write')) return undefined;
  return new Problem(
    'AUD-1208',
    `${field ? `${field}: ` : ''}The ${kind} "${item.discriminator}" is not writable through the keyspace "${keyspace.discriminator}"`,
  );
}

/** What `attributeRefusal` can answer of an attribute that is read: not defined, hidden. */
export const ATTRIBUTE_READ_PROBLEMS: readonly ProblemCode[] = ['AUD-1206', 'AUD-1211'];

/** What `attributeRefusal` can answer: not defined, hidden, deprecated, not writable through the keyspace. */
export const ATTRIBUTE_PROBLEMS: readonly ProblemCode[] = [
  ...ATTRIBUTE_READ_PROBLEMS,
  'AUD-1207',
  ...WRITE_GRANT_PROBLEMS,
];

/**
 * The refusal of an attribute that a request names (`named`: a version id or a discriminator), or
 * undefined when it may be used: 400 AUD-1206 when the section defines none (`found` undefined),
 * AUD-1211 when it is hidden, AUD-1207 when `found` carries the version to write and it is
 * deprecated, 403 AUD-1208 when one of `writeThrough` (the keyspaces of a write) is not granted
 * the write. `field` prefixes the detail.
 */
export function attributeRefusal(
  section: Pick<SectionDefs, 'discriminator'>,
  named: string,
  found: { attribute: AttributeDef; version?: TypeVersion } | undefined,
  use: { writeThrough?: readonly Pick<KeyspaceRow, 'discriminator'>[]; field?: string } = {},
): Problem | undefined {
  const lead = use.field ? `${use.field}: ` : '';
  if (!found)
    return new Problem('AUD-1206', `${lead}"${named}" names no attribute of section "${section.discriminator}"`);
  const { attribute, version } = found;
  if (attribute.hidden) return new Problem('AUD-1211', `${lead}the attribute "${attribute.discriminator}" is hidden`);
  if (version && version.deprecated_at !== null)
    return new Problem(
      'AUD-1207',
      `${lead}version ${version.id} of attribute "${attribute.discriminator}" is deprecated; write its current version`,
    );
  for (const keyspace of use.writeThrough ?? []) {
    const refusal = writeRefusal('attribute', attribute, keyspace, use.field);
    if (refusal) return refusal;
  }
  return undefined;
}

/** Throws the refusal of `attributeRefusal`, if any; answers what was found otherwise. */
export function requireAttribute<F extends { attribute: AttributeDef; version?: TypeVersion }>(
  section: Pick<SectionDefs, 'discriminator'>,
  named: string,
  found: F | undefined,
  use: { writeThrough?: readonly Pick<KeyspaceRow, 'discriminator'>[]; field?: string } = {},
): F {
  const refusal = attributeRefusal(section, named, found, use);
  if (refusal) throw refusal;
  return found!;
}

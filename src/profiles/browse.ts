/**
 * The console's browsing of a section's profiles (the service's own routes): a page of them, most
 * recently updated first, found by a key's beginning or an attribute's value, and how many there
 * were each day of the last days.
 */
import { attributeTypeOf, JSON_KIND_OF, type SectionDefs } from '../core/definitions.ts';
import { Problem } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
import { currentVersionId, exportKeyspace } from './locate.ts';
import * as q from './queries.ts';
import type { Growth, ProfileList, ProfileListQuery } from './schemas.ts';

/** What a list answers: the profiles and the cursor of the next page. */
export async function listProfiles(
  db: Queryable,
  scope: AccountScope,
  sectionDiscriminator: string,
  query: ProfileListQuery,
): Promise<ProfileList> {
  const section = sectionOf(scope, sectionDiscriminator);
  const filter: q.BrowseFilter = { limit: query.limit + 1 };
  if (query.cursor !== undefined) filter.after = readCursor(query.cursor);
  if (query.key_prefix !== undefined) {
    if (query.keyspace === undefined)
      throw new Problem('AUD-1003', 'The query field "keyspace" is required with "key_prefix"');
    const keyspace = scope.defs.keyspaces.find((k) => k.discriminator === query.keyspace);
    if (!keyspace || keyspace.kind === 'export')
      throw new Problem('AUD-0', `The query field "keyspace" names no keyspace whose keys can be searched`);
    filter.key = { keyspaceId: keyspace.keyspace_id, prefix: query.key_prefix };
  }
  if (query.attribute !== undefined) filter.attribute = attributeFilter(section, query.attribute, query.value);
  else if (query.value !== undefined) throw new Problem('AUD-0', 'The query field "value" needs "attribute"');
  const rows = await q.listSectionPage(db, scope.accountId, section.id, filter);
  const page = rows.slice(0, query.limit);
  const shown = shownAttributes(section);
  const keyspaces = new Map(scope.defs.keyspaces.map((k) => [k.keyspace_id, k.discriminator]));
  const exported = exportKeyspace(scope);
  return {
    items: page.map((row) => ({
      keys: [
        ...row.keys.map(([keyspaceId, key]) => ({
          keyspace_discriminator: keyspaces.get(keyspaceId)!,
          profile_key: key,
        })),
        ...(exported ? [{ keyspace_discriminator: exported.discriminator, profile_key: row.export_key }] : []),
      ],
      attributes: Object.fromEntries(
        [...shown].filter(([versionId]) => versionId in row.attrs).map(([versionId, d]) => [d, row.attrs[versionId]]),
      ),
      updated_at: row.updated_at.toISOString(),
    })),
    next_cursor: rows.length > query.limit ? writeCursor(page.at(-1)!.updated_us, page.at(-1)!.profile_id) : null,
  };
}

/** The section's attributes a list shows: the current version of each one not hidden, version id → discriminator. */
function shownAttributes(section: SectionDefs): Map<string, string> {
  const shown = new Map<string, string>();
  for (const a of section.attributes) {
    const versionId = a.hidden ? undefined : currentVersionId(section, a.discriminator);
    if (versionId) shown.set(versionId, a.discriminator);
  }
  return shown;
}

/** The filter of "the attribute equals the value": the value read as the attribute's type, as JSON. */
function attributeFilter(section: SectionDefs, discriminator: string, value: string | undefined) {
  const attribute = section.attributes.find((a) => a.discriminator === discriminator && !a.hidden);
  const versionId = attribute && currentVersionId(section, discriminator);
  if (!attribute || !versionId)
    throw new Problem('AUD-0', `The query field "attribute" names no attribute of the section that can be searched`);
  if (value === undefined) throw new Problem('AUD-1003', 'The query field "value" is required with "attribute"');
  const kind = JSON_KIND_OF[attributeTypeOf(attribute.versions.find((v) => v.id === versionId)!)];
  const refused = (what: string) => new Problem('AUD-0', `The query field "value" is not ${what}`);
  switch (kind) {
    case 'string':
      return { versionId, value: JSON.stringify(value) };
    case 'number': {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw refused('a number, as the attribute holds');
      return { versionId, value: JSON.stringify(n) };
    }
    case 'boolean':
      if (value !== 'true' && value !== 'false') throw refused('true or false, as the attribute holds');
      return { versionId, value };
    default:
      throw new Problem(
        'AUD-0',
        `The query field "attribute" names a Struct attribute, which cannot be searched by value`,
      );
  }
}

/** A page's cursor: where the next page starts, opaque to clients. */
function writeCursor(updatedUs: string, profileId: string): string {
  return Buffer.from(`${updatedUs}.${profileId}`).toString('base64url');
}

function readCursor(cursor: string): { updatedUs: string; profileId: string } {
  const m = /^(-?\d{1,18})\.(\d{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (!m) throw new Problem('AUD-0', 'The query field "cursor" is not a cursor a list answered');
  return { updatedUs: m[1], profileId: m[2] };
}

/**
 * The section's profiles on each of the last `days` UTC days, today last: those created that day
 * and all of them at its end. Profiles deleted since are not counted on any day, and a merge
 * cluster counts once, on the day its canonical profile was created.
 */
export async function profileGrowth(
  db: Queryable,
  scope: AccountScope,
  sectionDiscriminator: string,
  days: number,
): Promise<Growth> {
  const section = sectionOf(scope, sectionDiscriminator);
  const today = Date.UTC(scope.now.getUTCFullYear(), scope.now.getUTCMonth(), scope.now.getUTCDate());
  const first = new Date(today - (days - 1) * 86_400_000);
  const counts = await q.countCreatedByDay(db, scope.accountId, section.id, first);
  const byDay = new Map(counts.map((c) => [c.day, c.n]));
  let total = byDay.get(null) ?? 0;
  return {
    items: Array.from({ length: days }, (_, i) => {
      const day = new Date(first.getTime() + i * 86_400_000).toISOString().slice(0, 10);
      const created = byDay.get(day) ?? 0;
      total += created;
      return { day, new_profiles: created, total_profiles: total };
    }),
  };
}

import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { migrate } from '../store/migrate.ts';
import {
  A_EMAIL,
  A_FIRST,
  A_LAST,
  EMAIL,
  EXPORT,
  SHOP_S,
  VIP,
  WEB,
  addPageView,
  attrs,
  create,
  db,
  definitionsOf,
  events,
  expectNoContent,
  exportKeyOf,
  getSection,
  id,
  identifierRows,
  lock,
  mail,
  merge,
  patchTags,
  patchV1,
  patchV2,
  remove,
  sectionPath,
  server,
  switchId,
  tags,
  token,
  uid,
  unmerge,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * The export key of every profile, and migration 0016, through real HTTP (PROF-10..12).
 */

useProfileLifecycle();

describe('profiles: export key', () => {
  it('PROF-10 every profile has an export key [a-zA-Z0-9-]* that locates it in the export keyspace', async () => {
    const email = mail('p10');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(WEB, cookie)).status).toBe(201);
    const a = await exportKeyOf(EMAIL, email);
    const b = await exportKeyOf(WEB, cookie);
    for (const key of [a, b]) expect(key).toMatch(/^[a-zA-Z0-9-]+$/);
    expect(a).not.toBe(b);
    expect(await attrs(EXPORT, a)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EXPORT, b)).toEqual({});
    // The export key is no attribute.
    expect(Object.values(await attrs(EMAIL, email))).not.toContain(a);
    expectProblem(await getSection(EXPORT, crypto.randomUUID()), 404, 'AUD-1201');
  });

  /** A profile with an attribute, a tag and an event, and its export key. */
  async function readerProfile(label: string): Promise<{ email: string; ek: string }> {
    const email = mail(label);
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Reader' })).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'p11 page')).status).toBe(204);
    return { email, ek: await exportKeyOf(EMAIL, email) };
  }

  it('PROF-11 through the export keyspace attributes, tags and events read as through another key', async () => {
    const { email, ek } = await readerProfile('p11read');
    expect(await attrs(EXPORT, ek)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });
    expect(await tags(EXPORT, ek)).toEqual({ [VIP]: true });
    expect((await events(EXPORT, ek)).map((e) => e.data.title)).toEqual(['p11 page']);
  });

  it('PROF-11 through the export keyspace every write → 403 AUD-1203, and nothing changes', async () => {
    const { email, ek } = await readerProfile('p11');
    const { current } = await definitionsOf(SHOP_S);
    expectProblem(await patchV1(EXPORT, ek, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await patchV2(EXPORT, ek, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await patchTags(EXPORT, ek, { [VIP]: false }), 403, 'AUD-1203');
    expectProblem(await addPageView(EXPORT, ek, 'not added'), 403, 'AUD-1203');
    expectProblem(
      await server.request('DELETE', `${sectionPath(EXPORT, ek, SHOP_S)}/attributes/${current.get(A_FIRST)}`, {
        token,
      }),
      403,
      'AUD-1203',
    );
    expectProblem(
      await server.request('DELETE', `/v2${sectionPath(EXPORT, ek, SHOP_S)}/attributes/${A_FIRST}`, { token }),
      403,
      'AUD-1203',
    );
    // Neither creation, nor a version 1 write that would create, nor an export key as `to`.
    expectProblem(await create(EXPORT, crypto.randomUUID()), 403, 'AUD-1203');
    const unknown = crypto.randomUUID();
    expectProblem(await patchV1(EXPORT, unknown, { [A_FIRST]: 'Writer' }), 403, 'AUD-1203');
    expectProblem(await getSection(EXPORT, unknown), 404, 'AUD-1201');
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EMAIL, email), to: id(EXPORT, crypto.randomUUID()) }),
      403,
      'AUD-1203',
    );
    // Nor can the service-assigned export key be switched away (PROF-10: every profile keeps one).
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EXPORT, ek), to: id(WEB, uid('cookie')) }),
      403,
      'AUD-1203',
    );
    expect(await attrs(EXPORT, ek)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });

    // Nothing changed.
    expect(await attrs(EMAIL, email)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Reader' });
    expect(await tags(EMAIL, email)).toEqual({ [VIP]: true });
    expect(await events(EMAIL, email)).toHaveLength(1);
  });

  it('PROF-12 merge works through the export keyspace, and creates no unknown export key', async () => {
    const email = mail('p12');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    const ek = await exportKeyOf(EMAIL, email);
    expectNoContent(await merge(id(EXPORT, ek), id(WEB, cookie)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: email });
    expectProblem(await merge(id(EXPORT, crypto.randomUUID()), id(WEB, uid('cookie'))), 404, 'AUD-1201');
  });

  it('PROF-12 delete works through the export keyspace, for the whole cluster', async () => {
    const email = mail('p12delete');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    const ek = await exportKeyOf(EMAIL, email);
    expectNoContent(await merge(id(EXPORT, ek), id(WEB, cookie)));
    expectNoContent(await remove(EXPORT, ek));
    expectProblem(await getSection(EMAIL, email), 404, 'AUD-1201');
    expectProblem(await getSection(WEB, cookie), 404, 'AUD-1201');
  });

  it('PROF-12 lock works through the export keyspace', async () => {
    const locked = mail('p12lock');
    expect((await create(EMAIL, locked)).status).toBe(201);
    const lockedEk = await exportKeyOf(EMAIL, locked);
    expectNoContent(await lock(EXPORT, lockedEk));
    expectProblem(await getSection(EMAIL, locked), 410, 'AUD-1202');
    expectProblem(await getSection(EXPORT, lockedEk), 410, 'AUD-1202');
  });

  it('PROF-10 PROF-11 PROF-12 MRG-14 an export key has no identifier row and locates its own profile for read, write, merge, unmerge, lock and delete', async () => {
    const [email, cookie] = [mail('ek'), uid('cookie')];
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(WEB, cookie)).status).toBe(201);
    const [ekA, ekB] = [await exportKeyOf(EMAIL, email), await exportKeyOf(WEB, cookie)];
    // One identifier row per profile: its key; the export key is the profile's own column.
    expect(await identifierRows(ekA)).toEqual([{ kind: 'email', profile_key: email }]);
    expect(await identifierRows(ekB)).toEqual([{ kind: 'web', profile_key: cookie }]);

    // Read and write: written through a key, read through the export key; writes through it refused.
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Ann' })).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'ek page')).status).toBe(204);
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann' });
    expect(await tags(EXPORT, ekA)).toEqual({ [VIP]: true });
    expect((await events(EXPORT, ekA)).map((e) => e.data.title)).toEqual(['ek page']);
    expectProblem(await patchV2(EXPORT, ekA, { [A_FIRST]: 'Not' }), 403, 'AUD-1203');

    // Merge through an export key: either export key reads the cluster, and each member keeps its own.
    expectNoContent(await merge(id(EXPORT, ekB), id(EXPORT, ekA)));
    expect(await attrs(EXPORT, ekB)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann' });
    expect(await exportKeyOf(WEB, cookie)).toBe(ekB);
    expect(await exportKeyOf(EMAIL, email)).toBe(ekA);
    expect((await patchV2(WEB, cookie, { [A_LAST]: 'Both' })).status).toBe(204);
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann', [A_LAST]: 'Both' });
    // Unmerge through the export key of the later member: it stands alone, found by its export key.
    expectProblem(await unmerge(EXPORT, ekA), 400, 'AUD-1217');
    expectNoContent(await unmerge(EXPORT, ekB));
    expect(await attrs(EXPORT, ekB)).toEqual({});
    expect(await attrs(EXPORT, ekA)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Ann', [A_LAST]: 'Both' });

    // Lock through an export key, after a merge: every key of the cluster answers 410, export keys included.
    expectNoContent(await merge(id(EXPORT, ekA), id(WEB, cookie)));
    expectNoContent(await lock(EXPORT, ekB));
    for (const [ks, key] of [
      [EXPORT, ekA],
      [EXPORT, ekB],
      [EMAIL, email],
      [WEB, cookie],
    ]) {
      expectProblem(await getSection(ks, key), 410, 'AUD-1202');
    }
    // A merge naming a locked export key locks the other profile (MRG-11).
    const later = uid('cookie');
    expectNoContent(await merge(id(EXPORT, ekA), id(WEB, later)));
    expectProblem(await getSection(WEB, later), 410, 'AUD-1202');

    // Delete through an export key: the profile and its export key are gone, and the key can be used again.
    const other = mail('ekdel');
    expect((await create(EMAIL, other)).status).toBe(201);
    const ekC = await exportKeyOf(EMAIL, other);
    expectNoContent(await remove(EXPORT, ekC));
    expectProblem(await getSection(EXPORT, ekC), 404, 'AUD-1201');
    expectProblem(await remove(EXPORT, ekC), 404, 'AUD-1201');
    expect((await create(EMAIL, other)).status).toBe(201);
    expect(await exportKeyOf(EMAIL, other)).not.toBe(ekC);
  });
});

describe('profiles: migration 0016 (export keys without identifier rows)', () => {
  it("PROF-10 PROF-12 MRG-21 an old database keeps its profiles: the export keys' identifier rows go, every other row stays, and export keys locate as before", async () => {
    const [plain, member, canonical, lockedKey] = [mail('m16'), uid('cookie'), mail('m16c'), mail('m16l')];
    for (const [ks, key] of [
      [EMAIL, plain],
      [EMAIL, canonical],
      [WEB, member],
      [EMAIL, lockedKey],
    ])
      expect((await create(ks, key)).status).toBe(201);
    expect((await patchV2(EMAIL, plain, { [A_FIRST]: 'Old' })).status).toBe(204);
    expectNoContent(await merge(id(EMAIL, canonical), id(WEB, member)));
    const [ekPlain, ekMember, ekCanonical, ekLocked] = [
      await exportKeyOf(EMAIL, plain),
      await exportKeyOf(WEB, member),
      await exportKeyOf(EMAIL, canonical),
      await exportKeyOf(EMAIL, lockedKey),
    ];
    expectNoContent(await lock(EXPORT, ekLocked));

    // The database as before migration 0016: every profile also had its export key as an identifier row.
    const exportIdentifiers = `select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where k.kind = 'export'`;
    const otherIdentifiers = `select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where k.kind <> 'export'`;
    const { rowCount } = await db.query(
      `insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
       select p.account_id, k.keyspace_id, p.export_key, p.profile_id from profiles p join keyspaces k on k.account_id = p.account_id and k.kind = 'export'`,
    );
    expect(rowCount).toBeGreaterThanOrEqual(3);
    const others = (await db.query(otherIdentifiers)).rows[0].n;
    const counts = async () =>
      (
        await db.query(`select (select count(*) from profiles)::int as profiles, (select count(*) from profile_sections)::int as sections,
      (select count(*) from locked_identities)::int as locked, (select count(*) from attribute_history)::int as history`)
      ).rows[0];
    const before = await counts();
    await db.query(`delete from schema_migrations where name like '0016\\_%'`);
    expect(await migrate(server.services.pool)).toEqual(['0016_export_key_without_identifier.sql']);

    expect((await db.query(exportIdentifiers)).rows[0].n).toBe(0);
    expect((await db.query(otherIdentifiers)).rows[0].n).toBe(others);
    expect(await counts()).toEqual(before);
    // Read, merge, unmerge and delete by export key; the locked profile's export key still answers 410.
    expect(await attrs(EXPORT, ekPlain)).toEqual({ [A_EMAIL]: plain, [A_FIRST]: 'Old' });
    expect(await attrs(EXPORT, ekMember)).toEqual({ [A_EMAIL]: canonical });
    expectProblem(await unmerge(EXPORT, ekCanonical), 400, 'AUD-1217');
    expectNoContent(await unmerge(EXPORT, ekMember));
    expect(await attrs(EXPORT, ekMember)).toEqual({});
    expectProblem(await getSection(EXPORT, ekLocked), 410, 'AUD-1202');
    expectProblem(await lock(EXPORT, ekLocked), 410, 'AUD-1202');
    const cookie = uid('cookie');
    expectNoContent(await merge(id(EXPORT, ekPlain), id(WEB, cookie)));
    expect(await attrs(WEB, cookie)).toEqual({ [A_EMAIL]: plain, [A_FIRST]: 'Old' });
    expectNoContent(await remove(EXPORT, ekPlain));
    for (const [ks, key] of [
      [EXPORT, ekPlain],
      [WEB, cookie],
      [EMAIL, plain],
    ]) {
      expectProblem(await getSection(ks, key), 404, 'AUD-1201');
    }
  });
});

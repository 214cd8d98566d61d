import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_FIRST,
  A_LAST,
  CLUB_S,
  CRM,
  EMAIL,
  EXPORT,
  MOBILE,
  SHOP_S,
  VIP,
  WEB,
  addPageView,
  create,
  db,
  definitionsOf,
  events,
  expectNoContent,
  exportKeyOf,
  findPlaintext,
  getSection,
  id,
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
 * PUT …/locks through real HTTP (MRG-19..25).
 */

useProfileLifecycle();

// ---- MRG: lock ----

describe('profiles: lock', () => {
  it('MRG-19 PUT …/locks → 204 with an empty body, and the profile is locked account-wide', async () => {
    const email = mail('m19');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    for (const s of [SHOP_S, CLUB_S]) {
      expectProblem(await getSection(EMAIL, email, 'attributes', s), 410, 'AUD-1202');
    }
  });

  it('MRG-20 locking an unknown profile → 404', async () => {
    expectProblem(await lock(EMAIL, mail('m20')), 404, 'AUD-1201');
  });

  it('MRG-21 locking deletes the data; later reads of any of its identifiers → 410 AUD-1202', async () => {
    const email = mail('m21');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expect((await patchV2(WEB, cookie, { [A_FIRST]: 'Locked' }, CLUB_S)).status).toBe(204);
    const ek = await exportKeyOf(EMAIL, email);
    expectNoContent(await lock(WEB, cookie));
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [EXPORT, ek],
    ]) {
      for (const what of ['attributes', 'tags', 'events']) {
        expectProblem(await getSection(ks, key, what, CLUB_S), 410, 'AUD-1202');
      }
    }
  });

  it('MRG-22 attribute, tag and event updates of a locked profile → 410, and it stays locked', async () => {
    const email = mail('m22');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    const { current } = await definitionsOf(SHOP_S);
    expectProblem(await patchV2(EMAIL, email, { [A_FIRST]: 'x' }), 410, 'AUD-1202');
    expectProblem(await patchV1(EMAIL, email, { [A_FIRST]: 'x' }), 410, 'AUD-1202');
    expectProblem(await patchTags(EMAIL, email, { [VIP]: true }), 410, 'AUD-1202');
    expectProblem(await addPageView(EMAIL, email, 'x'), 410, 'AUD-1202');
    expectProblem(
      await server.request('DELETE', `${sectionPath(EMAIL, email, SHOP_S)}/attributes/${current.get(A_FIRST)}`, {
        token,
      }),
      410,
      'AUD-1202',
    );
    expectProblem(
      await server.request('DELETE', `/v2${sectionPath(EMAIL, email, SHOP_S)}/attributes/${A_FIRST}`, { token }),
      410,
      'AUD-1202',
    );
    expectProblem(await getSection(EMAIL, email), 410, 'AUD-1202');
  });

  it('MRG-23 creating a profile with any identifier the locked profile had → 410', async () => {
    const email = mail('m23');
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(CRM, crm)));
    expectNoContent(await merge(id(WEB, cookie), id(CRM, crm)));
    expectNoContent(await lock(CRM, crm));
    expectProblem(await create(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await create(EMAIL, ` ${email.toUpperCase()} `, CLUB_S), 410, 'AUD-1202');
    expectProblem(await create(CRM, crm, CLUB_S), 410, 'AUD-1202');
    expectProblem(await create(WEB, cookie), 410, 'AUD-1202');
    // Version 1 PATCH creates missing profiles, but not locked ones.
    expectProblem(await patchV1(WEB, cookie, { [A_FIRST]: 'back' }), 410, 'AUD-1202');
    // The same key in another keyspace is another identifier.
    expect((await create(WEB, email)).status).toBe(201);
  });

  it('MRG-24 a lock is irreversible: delete, unmerge, lock and merge leave the identifiers locked', async () => {
    const email = mail('m24');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await lock(EMAIL, email));
    expectProblem(await remove(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await unmerge(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await lock(EMAIL, email), 410, 'AUD-1202');
    expectProblem(
      await switchId(EMAIL, email, SHOP_S, { from: id(EMAIL, email), to: id(WEB, uid('cookie')) }),
      410,
      'AUD-1202',
    );
    expectProblem(await create(EMAIL, email), 410, 'AUD-1202');
    expectProblem(await getSection(EMAIL, email), 410, 'AUD-1202');
  });

  it('MRG-25 only an anonymous ID remains: no table holds the plaintext of a locked profile', async () => {
    const email = mail('m25-lock.me');
    const cookie = uid('m25cookie');
    const crm = uid('m25crm');
    const mobile = '+4741230025';
    const name = uid('m25name');
    const title = uid('m25title');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await create(MOBILE, mobile, CLUB_S)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expectNoContent(await merge(id(MOBILE, mobile), id(WEB, cookie)));
    expectNoContent(await merge(id(CRM, crm), id(WEB, cookie)));
    expect((await patchV2(EMAIL, email, { [A_FIRST]: name, [A_LAST]: name })).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: `${name}-club` }, CLUB_S)).status).toBe(204);
    expect((await addPageView(WEB, cookie, title)).status).toBe(204);
    const exportKeys = [
      await exportKeyOf(EMAIL, email),
      await exportKeyOf(WEB, cookie),
      await exportKeyOf(MOBILE, mobile),
      await exportKeyOf(CRM, crm),
    ];
    const needles = [email, cookie, crm, mobile, mobile.slice(3), name, title, ...exportKeys];
    const {
      rows: [before],
    } = await db.query<{ n: number }>('select count(*)::int as n from locked_identities');

    // The search finds the data while it exists…
    for (const needle of needles) expect(await findPlaintext(needle), needle).not.toEqual([]);
    expectNoContent(await lock(MOBILE, mobile));
    // …and nowhere once the profile is locked.
    for (const needle of needles) expect(await findPlaintext(needle), needle).toEqual([]);

    // What remains is one keyed hash per identifier (four keys and four export keys)…
    const {
      rows: [after],
    } = await db.query<{ n: number }>('select count(*)::int as n from locked_identities');
    expect(after.n - before.n).toBe(8);
    // …which still refuses every one of them.
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [CRM, crm],
      [MOBILE, mobile],
    ])
      expectProblem(await create(ks, key), 410, 'AUD-1202');
    for (const ek of exportKeys) expectProblem(await getSection(EXPORT, ek, 'tags'), 410, 'AUD-1202');
    // 22 searches of every table: on a cluster each reads every shard, which takes long on a busy machine.
  }, 180_000);
});

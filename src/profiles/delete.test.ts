import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_EMAIL,
  A_FIRST,
  CLUB_S,
  EMAIL,
  EXPORT,
  NS,
  SHOP_S,
  VIP,
  WEB,
  addPageView,
  attrs,
  create,
  events,
  expectNoContent,
  exportKeyOf,
  findPlaintext,
  getSection,
  id,
  mail,
  merge,
  patchTags,
  patchV2,
  remove,
  tags,
  uid,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * DELETE …/profiles/{pk} through real HTTP (PROF-13..16).
 */

useProfileLifecycle();

describe('profiles: delete', () => {
  it('PROF-13 DELETE …/profiles/{pk} → 204 with an empty body', async () => {
    const email = mail('p13');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await remove(EMAIL, email));
  });

  it('PROF-14 after delete the data and events are gone in every section and no identifier locates it', async () => {
    const email = mail('p14');
    const cookie = uid('cookie');
    const name = uid('gone');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(WEB, cookie)));
    expect((await patchV2(EMAIL, email, { [A_FIRST]: name }, CLUB_S)).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: uid('later') }, CLUB_S)).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(WEB, cookie, 'gone page')).status).toBe(204);
    const ek = await exportKeyOf(EMAIL, email);
    // The attribute history holds the replaced value (deleted with the profile, not by a foreign key: migration 0020).
    expect(await findPlaintext(name)).toContain('attribute_history.value');

    expectNoContent(await remove(WEB, cookie));
    for (const [ks, key] of [
      [EMAIL, email],
      [WEB, cookie],
      [EXPORT, ek],
    ]) {
      for (const s of [SHOP_S, CLUB_S]) {
        for (const what of ['attributes', 'tags', 'events']) {
          expectProblem(await getSection(ks, key, what, s), 404, 'AUD-1201');
        }
      }
    }
    // Nothing of it remains in the database either.
    expect(await findPlaintext(email)).toEqual([]);
    expect(await findPlaintext(cookie)).toEqual([]);
    expect(await findPlaintext('gone page')).toEqual([]);
    expect(await findPlaintext(name)).toEqual([]);
  });

  it('PROF-15 a deleted profile can be created again with the same key and starts empty', async () => {
    const email = mail('p15');
    expect((await create(EMAIL, email)).status).toBe(201);
    const oldEk = await exportKeyOf(EMAIL, email);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Before' }, CLUB_S)).status).toBe(204);
    expect((await patchTags(EMAIL, email, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(EMAIL, email, 'before')).status).toBe(204);
    expectNoContent(await remove(EMAIL, email));

    const again = await create(EMAIL, email);
    expect(again.status, again.text).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});
    expect(await tags(EMAIL, email)).toEqual({});
    expect(await events(EMAIL, email)).toEqual([]);
    // A new export key; the old one locates nothing.
    expect(await exportKeyOf(EMAIL, email)).not.toBe(oldEk);
    expectProblem(await getSection(EXPORT, oldEk), 404, 'AUD-1201');
  });

  it('PROF-16 deleting an unknown profile → 404', async () => {
    expectProblem(await remove(EMAIL, mail('p16')), 404, 'AUD-1201');
    expectProblem(await remove(`${NS}.keyspaces.nope`, 'x'), 404, 'AUD-1101');
  });
});

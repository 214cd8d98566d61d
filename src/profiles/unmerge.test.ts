import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_EMAIL,
  A_FIRST,
  A_LAST,
  EMAIL,
  EXPORT,
  NS,
  VIP,
  WEB,
  addPageView,
  attrs,
  create,
  events,
  expectNoContent,
  exportKeyOf,
  id,
  lock,
  mail,
  merge,
  patchTags,
  patchV2,
  tags,
  uid,
  unmerge,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * DELETE /audience/profiles/merges/… through real HTTP (MRG-13..18).
 */

useProfileLifecycle();

// ---- MRG: unmerge ----

describe('profiles: unmerge', () => {
  it('MRG-13 DELETE /audience/profiles/merges/keyspaces/{ks}/profiles/{pk} → 204', async () => {
    const a = mail('m13');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    expectNoContent(await unmerge(WEB, b));
  });

  it('MRG-14 an unmerged member is standalone with its own key and values; the group keeps the data', async () => {
    const [p1, p2, p3] = [uid('p1'), uid('p2'), uid('p3')];
    for (const key of [p1, p2, p3]) expect((await create(WEB, key)).status).toBe(201);
    expect((await patchV2(WEB, p1, { [A_FIRST]: 'One' })).status).toBe(204);
    expect((await patchV2(WEB, p2, { [A_LAST]: 'Two' })).status).toBe(204);
    expect((await patchV2(WEB, p3, { [A_FIRST]: 'Three', [A_LAST]: 'Three' })).status).toBe(204);
    expect((await patchTags(WEB, p3, { [VIP]: true })).status).toBe(204);
    expect((await addPageView(WEB, p2, 'p2 own page')).status).toBe(204);
    expectNoContent(await merge(id(WEB, p1), id(WEB, p2)));
    expectNoContent(await merge(id(WEB, p3), id(WEB, p2)));
    expect(await attrs(WEB, p3)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect((await addPageView(WEB, p3, 'cluster page')).status).toBe(204);

    expectNoContent(await unmerge(WEB, p2));
    // p2 stands alone with the values it had.
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Two' });
    expect(await tags(WEB, p2)).toEqual({});
    expect((await events(WEB, p2)).map((e) => e.data.title)).toEqual(['p2 own page']);
    // Events stay on the profile that received them (docs/profiles.md): the cluster keeps those it received while merged.
    expect((await events(WEB, p1)).map((e) => e.data.title)).toEqual(['cluster page']);
    // The group keeps everything it showed, p2's contribution included, and stays merged.
    expect(await attrs(WEB, p1)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect(await attrs(WEB, p3)).toEqual({ [A_FIRST]: 'One', [A_LAST]: 'Two' });
    expect(await tags(WEB, p1)).toEqual({ [VIP]: true });
    expect((await patchV2(WEB, p3, { [A_FIRST]: 'Together' })).status).toBe(204);
    expect((await attrs(WEB, p1))[A_FIRST]).toBe('Together');
    expect((await attrs(WEB, p2))[A_FIRST]).toBeUndefined();
    // The standalone profile can be written on its own and merged again.
    expect((await patchV2(WEB, p2, { [A_FIRST]: 'Solo' })).status).toBe(204);
    expect((await attrs(WEB, p1))[A_FIRST]).toBe('Together');
    expectNoContent(await merge(id(WEB, p2), id(WEB, p1)));
  });

  it('MRG-14 values cleared in the group stay cleared after a member is unmerged', async () => {
    const [p1, p2, p3] = [uid('p1'), uid('p2'), uid('p3')];
    for (const key of [p1, p2, p3]) expect((await create(WEB, key)).status).toBe(201);
    expect((await patchV2(WEB, p2, { [A_FIRST]: 'Cleared', [A_LAST]: 'Kept' })).status).toBe(204);
    expect((await patchTags(WEB, p2, { [VIP]: true })).status).toBe(204);
    expectNoContent(await merge(id(WEB, p1), id(WEB, p2)));
    expectNoContent(await merge(id(WEB, p1), id(WEB, p3)));
    expect((await patchV2(WEB, p1, { [A_FIRST]: null })).status).toBe(204);
    expect((await patchTags(WEB, p1, { [VIP]: false })).status).toBe(204);
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Kept' });
    expect(await tags(WEB, p2)).toEqual({});

    expectNoContent(await unmerge(WEB, p3));
    expect(await attrs(WEB, p1)).toEqual({ [A_LAST]: 'Kept' });
    expect(await attrs(WEB, p2)).toEqual({ [A_LAST]: 'Kept' });
    expect(await tags(WEB, p1)).toEqual({});
  });

  it('MRG-15 unmerging a standalone profile → 204 and no change', async () => {
    const a = mail('m15');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await patchV2(EMAIL, a, { [A_FIRST]: 'Alone' })).status).toBe(204);
    expectNoContent(await unmerge(EMAIL, a));
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a, [A_FIRST]: 'Alone' });
  });

  it('MRG-16 unmerging the canonical profile → 400 AUD-1217 and nothing changes', async () => {
    const a = mail('m16');
    const b = uid('cookie');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(WEB, b), id(EMAIL, a)));
    expectProblem(await unmerge(EMAIL, ` ${a.toUpperCase()}`), 400, 'AUD-1217');
    expect(await attrs(WEB, b)).toEqual({ [A_EMAIL]: a });
    // Its export key names the same canonical member.
    expectProblem(await unmerge(EXPORT, await exportKeyOf(EMAIL, a)), 400, 'AUD-1217');
  });

  it('MRG-17 unmerging a locked profile → 410', async () => {
    const a = mail('m17');
    const b = uid('cookie');
    expectNoContent(await merge(id(EMAIL, a), id(WEB, b)));
    expectNoContent(await lock(EMAIL, a));
    expectProblem(await unmerge(WEB, b), 410, 'AUD-1202');
    expectProblem(await unmerge(EMAIL, a), 410, 'AUD-1202');
  });

  it('MRG-18 unmerging an unknown profile → 404', async () => {
    expectProblem(await unmerge(WEB, uid('nobody')), 404, 'AUD-1201');
    expectProblem(await unmerge(`${NS}.keyspaces.nope`, 'x'), 404, 'AUD-1101');
  });
});

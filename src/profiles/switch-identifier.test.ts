import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_CRM,
  A_EMAIL,
  A_FIRST,
  CLUB_S,
  CRM,
  EMAIL,
  NS,
  SHOP_S,
  WEB,
  attrs,
  create,
  expectNoContent,
  getSection,
  id,
  mail,
  merge,
  patchV1,
  patchV2,
  switchId,
  tags,
  uid,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * Switching a profile's identifier through real HTTP (MRG-26..34).
 */

useProfileLifecycle();

// ---- MRG: switch identifier ----

describe('profiles: switch identifier', () => {
  it('MRG-26 MRG-33 PUT …/profiles/{pk}/sections/{s} {from, to} → 204; `to` locates the profile and `from` no longer does', async () => {
    const old = mail('m26old');
    const next = mail('m26new');
    expect((await create(EMAIL, old)).status).toBe(201);
    expect((await patchV2(EMAIL, old, { [A_FIRST]: 'Switch' })).status).toBe(204);
    // Version 1 changes only the attribute, so the section's email can name the new address.
    expect((await patchV1(EMAIL, old, { [A_EMAIL]: next })).status).toBe(204);
    expectNoContent(
      await switchId(EMAIL, old, SHOP_S, { from: id(EMAIL, old), to: id(EMAIL, ` ${next.toUpperCase()} `) }),
    );
    expect(await attrs(EMAIL, next)).toEqual({ [A_EMAIL]: next, [A_FIRST]: 'Switch' });
    expectProblem(await getSection(EMAIL, old), 404, 'AUD-1201');
    // The old key is free again.
    expect((await create(EMAIL, old, CLUB_S)).status).toBe(201);

    // Into a keyspace without a mapped attribute, located through another identifier.
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(CRM, crm)).status).toBe(201);
    expectNoContent(await merge(id(CRM, crm), id(WEB, cookie)));
    expectNoContent(await switchId(WEB, cookie, SHOP_S, { from: id(CRM, crm), to: id(WEB, uid('cookie2')) }));
    expectProblem(await getSection(CRM, crm), 404, 'AUD-1201');
    expect(await attrs(WEB, cookie)).toEqual({ [A_CRM]: crm });
  });

  it('MRG-27 a switch without `from` or `to` → 400', async () => {
    const a = mail('m27');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { to: id(WEB, uid()) }), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a) }), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, {}), 400);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: { keyspace_discriminator: WEB } }), 400);
    expectProblem(
      await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(EMAIL, 'not-an-email') }),
      400,
      'AUD-1205',
    );
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a });
  });

  it('MRG-28 a switch on a profile that cannot be located → 404', async () => {
    const a = mail('m28');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(WEB, uid()) }), 404, 'AUD-1201');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectProblem(
      await switchId(EMAIL, a, `${NS}.sections.user-created.nope`, { from: id(EMAIL, a), to: id(WEB, uid()) }),
      404,
      'AUD-1102',
    );
  });

  it('MRG-29 `from` must be an identifier of the located profile → else 400', async () => {
    const a = mail('m29');
    const other = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await create(CRM, other)).status).toBe(201);
    const to = uid('cookie');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(CRM, other), to: id(WEB, to) }), 400, 'AUD-1221');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(CRM, uid('nobody')), to: id(WEB, to) }), 400, 'AUD-1221');
    expectProblem(await getSection(WEB, to, 'tags'), 404, 'AUD-1201');
    expect((await attrs(CRM, other))[A_CRM]).toBe(other);
  });

  it('MRG-30 `to` must not exist on this or any other profile → else 409', async () => {
    const a = mail('m30');
    const mine = uid('cookie');
    const theirs = uid('crm');
    expect((await create(EMAIL, a)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, a), id(WEB, mine)));
    expect((await create(CRM, theirs, CLUB_S)).status).toBe(201);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, theirs) }), 409, 'AUD-1222');
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(WEB, mine) }), 409, 'AUD-1222');
    expect(await attrs(EMAIL, a)).toEqual({ [A_EMAIL]: a });
    expect(await attrs(CRM, theirs, CLUB_S)).toEqual({ [A_CRM]: theirs });
  });

  it('MRG-31 a mapped attribute value in the section must equal `to` → else 400', async () => {
    const a = mail('m31');
    expect((await create(EMAIL, a)).status).toBe(201);
    const held = uid('held-crm');
    expect((await patchV1(EMAIL, a, { [A_CRM]: held })).status).toBe(204);
    expectProblem(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, uid('crm')) }), 400, 'AUD-1223');
    // Another section's value does not count, and the equal value passes.
    expect((await patchV1(EMAIL, a, { [A_CRM]: 'club-crm' }, CLUB_S)).status).toBe(204);
    expectNoContent(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(CRM, held) }));
    expect(await attrs(CRM, held)).toEqual({ [A_EMAIL]: a, [A_CRM]: held });
  });

  it('MRG-32 a `to` in the email keyspace must equal the email attribute → else 400', async () => {
    const crm = uid('crm');
    expect((await create(CRM, crm)).status).toBe(201);
    // No email attribute at all.
    expectProblem(
      await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, mail('m32')) }),
      400,
      'AUD-1223',
    );
    // Another email attribute.
    expect((await patchV1(CRM, crm, { [A_EMAIL]: 'held@example.com' })).status).toBe(204);
    expectProblem(
      await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, mail('m32')) }),
      400,
      'AUD-1223',
    );
    // The email attribute of another section does not count.
    const club = mail('m32club');
    expect((await patchV1(CRM, crm, { [A_EMAIL]: club }, CLUB_S)).status).toBe(204);
    expectProblem(await switchId(CRM, crm, SHOP_S, { from: id(CRM, crm), to: id(EMAIL, club) }), 400, 'AUD-1223');
    expectNoContent(await switchId(CRM, crm, CLUB_S, { from: id(CRM, crm), to: id(EMAIL, club) }));
    expect(await attrs(EMAIL, club, CLUB_S)).toEqual({ [A_EMAIL]: club });
  });

  it('MRG-34 `from` is kept when another section holds it as its mapped attribute, and `to` is created', async () => {
    const a = mail('m34a');
    const b = mail('m34b');
    expect((await create(EMAIL, a)).status).toBe(201);
    expect((await patchV1(EMAIL, a, { [A_EMAIL]: a }, CLUB_S)).status).toBe(204);
    expect((await patchV1(EMAIL, a, { [A_EMAIL]: b }, SHOP_S)).status).toBe(204);
    expectNoContent(await switchId(EMAIL, a, SHOP_S, { from: id(EMAIL, a), to: id(EMAIL, b) }));
    expect(await attrs(EMAIL, a, CLUB_S)).toEqual({ [A_EMAIL]: a });
    expect(await attrs(EMAIL, b, CLUB_S)).toEqual({ [A_EMAIL]: a });
    expect((await patchV2(EMAIL, b, { [A_FIRST]: 'Same' })).status).toBe(204);
    expect((await attrs(EMAIL, a))[A_FIRST]).toBe('Same');
    expectProblem(await create(EMAIL, a), 409, 'AUD-1204');
  });
});

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CRM,
  CRMID_ATTR,
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  LASTNAME,
  M,
  attr,
  attributes,
  nextNumber,
  create,
  emailProfile,
  expectNoContent,
  fresh,
  patchTags,
  patchV2,
  profile,
  server,
  tag,
  tags,
  token,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * PATCH /v2/…/attributes through real HTTP, key attributes included (ATTR-10..17, COMP-08).
 */

useProfileData();

describe('PATCH attributes, version 2', () => {
  it('sets by discriminator, clears with null, keeps unmentioned attributes, answers 204 (ATTR-10, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [LASTNAME]: 'Lee', [attr('subscribed')]: true }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Lee',
      [version(attr('subscribed'))]: true,
    });
    expectNoContent(await patchV2(EMAIL, key, { [LASTNAME]: null, [attr('subscribed')]: false }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('subscribed'))]: false,
    });
    expectNoContent(await patchV2(EMAIL, key, {}));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('subscribed'))]: false,
    });
  });

  it('writes the current version of an attribute, not a deprecated one (ATTR-10, ATTR-22)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV2(EMAIL, key, { [attr('points')]: 12.5 }));
    const values = await attributes(EMAIL, key);
    expect(values[version(attr('points'), 2)]).toBe(12.5);
    expect(values).not.toHaveProperty(version(attr('points'), 1));
  });

  it('answers 404 on a missing profile and creates nothing (ATTR-11)', async () => {
    const key = fresh('v2missing');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann' }), 404, 'AUD-1201');
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    // The key is still free: creating the profile succeeds and it starts empty but for its key.
    await create(key);
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses null for an attribute that is a profile key with 400 (ATTR-12)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: null }), 400, 'AUD-1212');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [EMAIL_ATTR]: null }), 400, 'AUD-1212');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    const crm = `crm-${nextNumber()}`;
    await create(crm, CRM);
    expectProblem(await patchV2(CRM, crm, { [CRMID_ATTR]: null }), 400, 'AUD-1212');
    expect(await attributes(CRM, crm)).toEqual({ [version(CRMID_ATTR)]: crm });
  });

  it('moves the key when a key attribute changes to a free value (ATTR-13)', async () => {
    const key = await emailProfile();
    const moved = fresh('moved');
    expectNoContent(await patchV2(EMAIL, key, { [EMAIL_ATTR]: ` ${moved.toUpperCase()} `, [FIRSTNAME]: 'Ann' }));
    // The new value is normalised like a key, and locates the profile; the old key no longer does.
    expect(await attributes(EMAIL, moved)).toEqual({ [version(EMAIL_ATTR)]: moved, [version(FIRSTNAME)]: 'Ann' });
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    // The freed key can be used by a new profile.
    await create(key);
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('moves the CRM key when the CRM id attribute changes to a free value (ATTR-13)', async () => {
    const crm = `crm-${nextNumber()}`;
    await create(crm, CRM);
    expectNoContent(await patchV2(CRM, crm, { [CRMID_ATTR]: `${crm}-new` }));
    expect(await attributes(CRM, `${crm}-new`)).toEqual({ [version(CRMID_ATTR)]: `${crm}-new` });
    expectProblem(await server.request('GET', `${profile(CRM, crm)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('refuses a key attribute value that is not a valid key with 400 AUD-1205 (ATTR-13)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: 'not an address' }), 400, 'AUD-1205');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses a key attribute value of the wrong type with 400 AUD-1209 (ATTR-20)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [EMAIL_ATTR]: true }), 400, 'AUD-1209');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it("answers 409 AUD-1213 when the new key is another profile's, without profile_key_update_method (ATTR-14)", async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, b, { [LASTNAME]: 'Bee' }));
    expectProblem(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b, [FIRSTNAME]: 'Ann' }), 409, 'AUD-1213');
    // Nothing changed on either side.
    expect(await attributes(EMAIL, a)).toEqual({ [version(EMAIL_ATTR)]: a });
    expect(await attributes(EMAIL, b)).toEqual({ [version(EMAIL_ATTR)]: b, [version(LASTNAME)]: 'Bee' });
  });

  it('accepts only delete and merge as profile_key_update_method (ATTR-15)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    for (const method of ['remove', 'DELETE', 'overwrite', '']) {
      expectProblem(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, `?profile_key_update_method=${method}`), 400);
    }
    expect(await attributes(EMAIL, a)).toEqual({ [version(EMAIL_ATTR)]: a });
    // The method is not needed, and harmless, when the new key is free or no key changes.
    const free = fresh('free');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }, '?profile_key_update_method=merge'));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: free }, '?profile_key_update_method=delete'));
    expect(await attributes(EMAIL, free)).toEqual({ [version(EMAIL_ATTR)]: free, [version(FIRSTNAME)]: 'Ann' });
  });

  it("with delete, moves the section's attributes to the profile holding the new key and drops the old key (ATTR-16)", async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann', [attr('visits')]: 7 }));
    expectNoContent(await patchV2(EMAIL, b, { [FIRSTNAME]: 'Bob', [LASTNAME]: 'Bee' }));
    expectNoContent(
      await patchV2(EMAIL, a, { [EMAIL_ATTR]: b, [attr('nickname')]: 'annie' }, '?profile_key_update_method=delete'),
    );
    // The holder of the new key has a's values over its own.
    expect(await attributes(EMAIL, b)).toEqual({
      [version(EMAIL_ATTR)]: b,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Bee',
      [version(attr('visits'))]: 7,
      [version(attr('nickname'))]: 'annie',
    });
    // a's key was not used in another section: it no longer locates a profile.
    expectProblem(await server.request('GET', `${profile(EMAIL, a)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('with delete, keeps the old key while another section still uses it (ATTR-16)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    // a's email attribute also holds the key in the magazine section.
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: a, [attr('issue')]: 4 }, '', M));
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, '?profile_key_update_method=delete'));
    expect(await attributes(EMAIL, b)).toEqual({ [version(EMAIL_ATTR)]: b, [version(FIRSTNAME)]: 'Ann' });
    // The old key still locates a: its store values moved away, its magazine values stay.
    expect(await attributes(EMAIL, a)).toEqual({});
    expect(await attributes(EMAIL, a, M)).toEqual({
      [version(EMAIL_ATTR, 1, M)]: a,
      [version(attr('issue'), 1, M)]: 4,
    });
    // They are two profiles.
    expect(await attributes(EMAIL, b, M)).toEqual({});
  });

  it('with merge, joins the two profiles: both keys locate one profile with both sets of values (ATTR-17)', async () => {
    const a = await emailProfile('a');
    const b = await emailProfile('b');
    expectNoContent(await patchV2(EMAIL, a, { [FIRSTNAME]: 'Ann' }));
    expectNoContent(await patchTags(EMAIL, a, { [tag('vip')]: true }));
    expectNoContent(await patchV2(EMAIL, b, { [LASTNAME]: 'Bee' }));
    expectNoContent(await patchV2(EMAIL, b, { [attr('issue')]: 9 }, '', M));
    expectNoContent(await patchV2(EMAIL, a, { [EMAIL_ATTR]: b }, '?profile_key_update_method=merge'));
    const expected = { [version(EMAIL_ATTR)]: b, [version(FIRSTNAME)]: 'Ann', [version(LASTNAME)]: 'Bee' };
    expect(await attributes(EMAIL, a)).toEqual(expected);
    expect(await attributes(EMAIL, b)).toEqual(expected);
    expect(await tags(EMAIL, b)).toEqual({ [tag('vip')]: true });
    expect(await attributes(EMAIL, a, M)).toEqual({ [version(attr('issue'), 1, M)]: 9 });
    // A later write through either key shows through the other.
    expectNoContent(await patchV2(EMAIL, b, { [attr('nickname')]: 'one' }));
    expect(await attributes(EMAIL, a)).toEqual({ ...expected, [version(attr('nickname'))]: 'one' });
  });
});

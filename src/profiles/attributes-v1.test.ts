import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CRM,
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  LASTNAME,
  attr,
  attributes,
  nextNumber,
  emailProfile,
  expectNoContent,
  fresh,
  patchV1,
  profile,
  server,
  token,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * PATCH …/attributes, version 1, through real HTTP (ATTR-07..09, COMP-08).
 */

useProfileData();

describe('PATCH attributes, version 1', () => {
  it('sets by version id, clears with null, keeps unmentioned attributes, answers 204 (ATTR-07, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(FIRSTNAME)]: 'Ann',
        [version(LASTNAME)]: 'Lee',
        [version(attr('visits'))]: 2,
      }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(LASTNAME)]: 'Lee',
      [version(attr('visits'))]: 2,
    });
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Anna', [version(LASTNAME)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Anna',
      [version(attr('visits'))]: 2,
    });
    // Clearing an attribute that has no value is no error.
    expectNoContent(await patchV1(EMAIL, key, { [version(LASTNAME)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Anna',
      [version(attr('visits'))]: 2,
    });
  });

  it('writes each version of an attribute on its own (ATTR-07)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchV1(EMAIL, key, { [version(attr('level'), 1)]: 'gold', [version(attr('level'), 2)]: 3 }));
    expect(await attributes(EMAIL, key)).toMatchObject({
      [version(attr('level'), 1)]: 'gold',
      [version(attr('level'), 2)]: 3,
    });
  });

  it('creates a missing profile (ATTR-08)', async () => {
    const key = fresh('v1new');
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Nina' }));
    expect(await attributes(EMAIL, key)).toMatchObject({ [version(FIRSTNAME)]: 'Nina' });
    // The key is normalised like any other email key.
    expect(await attributes(EMAIL, key.toUpperCase())).toMatchObject({ [version(FIRSTNAME)]: 'Nina' });
    // In another keyspace too.
    const crm = `crm-${nextNumber()}`;
    expectNoContent(await patchV1(CRM, crm, { [version(LASTNAME)]: 'Crm' }));
    expect(await attributes(CRM, crm)).toMatchObject({ [version(LASTNAME)]: 'Crm' });
  });

  it('creates nothing when the PATCH is refused (ATTR-08)', async () => {
    const key = fresh('v1refused');
    expectProblem(
      await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'Nina', [version(attr('visits'))]: 'many' }),
      400,
      'AUD-1209',
    );
    expectProblem(await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token }), 404, 'AUD-1201');
  });

  it('changes only the attribute when it is a key attribute: the profile key stays (ATTR-09)', async () => {
    const key = await emailProfile();
    const other = fresh('v1other');
    expectNoContent(await patchV1(EMAIL, key, { [version(EMAIL_ATTR)]: other }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: other });
    expectProblem(await server.request('GET', `${profile(EMAIL, other)}/attributes`, { token }), 404, 'AUD-1201');
    // Clearing it through version 1 is allowed as well and the key still locates the profile.
    expectNoContent(await patchV1(EMAIL, key, { [version(EMAIL_ATTR)]: null }));
    expect(await attributes(EMAIL, key)).toEqual({});
  });
});

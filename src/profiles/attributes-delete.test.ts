import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  CRM,
  CRMID_ATTR,
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  M,
  attr,
  attributes,
  nextNumber,
  create,
  emailProfile,
  expectNoContent,
  fresh,
  patchV1,
  profile,
  server,
  token,
  v2,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * DELETE …/attributes/{version_id} and DELETE /v2/…/attributes/{attribute} through real HTTP (ATTR-26..28).
 */

useProfileData();

describe('DELETE attributes', () => {
  it('clears one version by version id and answers 204 (ATTR-26, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(attr('level'), 1)]: 'gold',
        [version(attr('level'), 2)]: 3,
        [version(FIRSTNAME)]: 'Ann',
      }),
    );
    expectNoContent(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('level'), 1)}`, { token }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(attr('level'), 2)]: 3,
      [version(FIRSTNAME)]: 'Ann',
    });
    // Clearing a version without a value is no error.
    expectNoContent(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('level'), 1)}`, { token }),
    );
  });

  it('answers 400 AUD-1206 for a version unknown to the section, by version id or by discriminator (ATTR-26)', async () => {
    const key = await emailProfile();
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/999999999`, { token }),
      400,
      'AUD-1206',
    );
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, key)}/attributes/${version(attr('issue'), 1, M)}`, { token }),
      400,
      'AUD-1206',
    );
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('nope')}`, { token }),
      400,
      'AUD-1206',
    );
  });

  it('answers 404 AUD-1201 for an unknown profile, by version id or by discriminator (ATTR-26)', async () => {
    expectProblem(
      await server.request('DELETE', `${profile(EMAIL, fresh('nobody'))}/attributes/${version(FIRSTNAME)}`, { token }),
      404,
      'AUD-1201',
    );
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, fresh('nobody'))}/attributes/${FIRSTNAME}`, { token }),
      404,
      'AUD-1201',
    );
  });

  it('clears every version of an attribute by discriminator with version 2 (ATTR-27, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(
      await patchV1(EMAIL, key, {
        [version(attr('level'), 1)]: 'gold',
        [version(attr('level'), 2)]: 3,
        [version(FIRSTNAME)]: 'Ann',
      }),
    );
    expectNoContent(await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('level')}`, { token }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Ann' });
    expectNoContent(await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${FIRSTNAME}`, { token }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses to clear an attribute that is a profile key with 400 (ATTR-28)', async () => {
    const key = await emailProfile();
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${EMAIL_ATTR}`, { token }),
      400,
      'AUD-1212',
    );
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    const crm = `crm-${nextNumber()}`;
    await create(crm, CRM);
    expectProblem(
      await server.request('DELETE', `${v2(CRM, crm)}/attributes/${CRMID_ATTR}`, { token }),
      400,
      'AUD-1212',
    );
    expect(await attributes(CRM, crm)).toEqual({ [version(CRMID_ATTR)]: crm });
  });
});

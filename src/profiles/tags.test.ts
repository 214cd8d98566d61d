import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  emailProfile,
  expectNoContent,
  fresh,
  patchTags,
  profile,
  tag,
  tags,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * PATCH …/tags through real HTTP (ATTR-05, ATTR-06, COMP-08).
 */

useProfileData();

describe('PATCH tags', () => {
  it('sets true tags, removes false ones, keeps unmentioned ones, answers 204 (ATTR-05, COMP-08)', async () => {
    const key = await emailProfile();
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('newsletter')]: true }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: false }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('newsletter')]: true });
    // Removing a tag that is not set and an empty patch change nothing.
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: false }));
    expectNoContent(await patchTags(EMAIL, key, {}));
    expect(await tags(EMAIL, key)).toEqual({ [tag('newsletter')]: true });
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true }));
    expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
  });

  it('refuses a tag value that is not a boolean with 400 and changes nothing (ATTR-06)', async () => {
    const key = await emailProfile();
    for (const value of ['true', 1, 0, null, {}, []]) {
      expectProblem(await patchTags(EMAIL, key, { [tag('newsletter')]: true, [tag('vip')]: value }), 400, 'AUD-1209');
    }
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('refuses an unknown or hidden tag with 400 (ATTR-06, ATTR-25)', async () => {
    const key = await emailProfile();
    expectProblem(await patchTags(EMAIL, key, { [tag('nope')]: true }), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('hidden')]: true }), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('nope')]: true }), 400, 'AUD-1218');
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('answers 404 AUD-1201 for tags of an unknown profile', async () => {
    expectProblem(await patchTags(EMAIL, fresh('nobody'), { [tag('vip')]: true }), 404, 'AUD-1201');
  });
});

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  KB,
  LASTNAME,
  S,
  attr,
  attributes,
  create,
  emailProfile,
  expectNoContent,
  fresh,
  patchTags,
  patchV1,
  patchV2,
  profile,
  server,
  tag,
  tags,
  text,
  token,
  v2,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * What an attribute or tag PATCH body may hold, through real HTTP: its size, the values of each
 * attribute type, its media type (ATTR-19, ATTR-20, COMP-04).
 */

useProfileData();

describe('payload size (ATTR-19)', () => {
  const big = 'x'.repeat(101 * KB);
  it('refuses attribute and tag PATCH payloads over 100 KB with 413 AUD-1210', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: big }), 413, 'AUD-1210');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: big }), 413, 'AUD-1210');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true, padding: big }), 413, 'AUD-1210');
    // Also when the profile does not exist (version 1 would create it): nothing is created.
    const missing = fresh('big');
    expectProblem(await patchV1(EMAIL, missing, { [version(FIRSTNAME)]: big }), 413, 'AUD-1210');
    expectProblem(await server.request('GET', `${profile(EMAIL, missing)}/attributes`, { token }), 404, 'AUD-1201');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('accepts a payload just under 100 KB', async () => {
    const key = await emailProfile();
    const value = 'y'.repeat(99 * KB);
    expectNoContent(await patchV2(EMAIL, key, { [attr('nickname')]: value }));
    expect((await attributes(EMAIL, key))[version(attr('nickname'))]).toBe(value);
  });
});

describe('attribute types (ATTR-20)', () => {
  const cases: { attribute: string; accepted: unknown[]; refused: unknown[] }[] = [
    {
      attribute: attr('nickname'),
      accepted: ['annie', '', '2024-01-01', 'ünïcødé'],
      refused: [true, { a: 1 }, ['a']],
    },
    { attribute: attr('subscribed'), accepted: [true, false], refused: ['true', 1, 0, { a: true }, [true]] },
    {
      attribute: attr('birthday'),
      accepted: ['1990-05-17', '2024-02-29', '2024-05-01T10:00:00Z'],
      refused: ['yesterday', '17.05.1990', '2024-13-45', 19900517, true, { d: '1990-05-17' }],
    },
    {
      attribute: attr('last-seen'),
      accepted: [1714557600000, 0, -5],
      refused: [1.5, 1714557600000.25, '1714557600000', true, [1]],
    },
    { attribute: attr('visits'), accepted: [3, 0, -2, 3.5], refused: ['3', true, { n: 3 }, [3]] },
    { attribute: attr('balance'), accepted: [2.75, 10, -0.5], refused: ['2.75', false, { n: 2.75 }, [2.75]] },
    {
      attribute: attr('address'),
      accepted: [{ city: 'Oslo', lines: ['a', 'b'], nested: { n: 1 } }, {}],
      refused: [[], [{ city: 'Oslo' }], 'Oslo', 5, true],
    },
  ];

  for (const { attribute, accepted, refused } of cases) {
    const name = attribute.split('.').at(-1);
    it(`accepts values of the type of ${name} and null, through version 1 and 2 (ATTR-20)`, async () => {
      const key = await emailProfile();
      for (const value of accepted) {
        expectNoContent(await patchV2(EMAIL, key, { [attribute]: value }));
        expect((await attributes(EMAIL, key))[version(attribute)]).toEqual(value);
        expectNoContent(await patchV2(EMAIL, key, { [attribute]: null }));
        expect(await attributes(EMAIL, key)).not.toHaveProperty(version(attribute));
        expectNoContent(await patchV1(EMAIL, key, { [version(attribute)]: value }));
        expect((await attributes(EMAIL, key))[version(attribute)]).toEqual(value);
        expectNoContent(await patchV1(EMAIL, key, { [version(attribute)]: null }));
        expect(await attributes(EMAIL, key)).not.toHaveProperty(version(attribute));
      }
    });

    it(`refuses values that do not fit the type of ${name} with 400 (ATTR-20)`, async () => {
      const key = await emailProfile();
      for (const value of refused) {
        expectProblem(await patchV2(EMAIL, key, { [attribute]: value }), 400, 'AUD-1209');
        expectProblem(await patchV1(EMAIL, key, { [version(attribute)]: value }), 400, 'AUD-1209');
      }
      expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    });
  }

  it('refuses a number that is not finite (ATTR-20)', async () => {
    const key = await emailProfile();
    // JSON has no Infinity, but 1e400 parses to it.
    for (const attribute of [attr('visits'), attr('balance'), attr('last-seen')]) {
      const res = await server.request('PATCH', `${v2(EMAIL, key)}/attributes`, {
        token,
        raw: `{"${attribute}": 1e400}`,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expectProblem(res, 400, 'AUD-1209');
    }
  });

  it('refuses the whole patch when one value does not fit, changing nothing (ATTR-20)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [attr('visits')]: 'many' }), 400, 'AUD-1209');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses a body that is not a JSON object with 400', async () => {
    const key = await emailProfile();
    for (const raw of ['[1,2]', '"x"', '{"a":', 'null']) {
      const res = await server.request('PATCH', `${v2(EMAIL, key)}/attributes`, {
        token,
        raw,
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      expectProblem(res, 400);
    }
  });
});

describe('numbers for Text attributes (ATTR-20)', () => {
  const MOBILE_ATTR = 'com.vendor1.attributes.mobile';
  const patchRaw = (path: string, raw: string) =>
    server.request('PATCH', path, { token, raw, headers: { 'content-type': 'application/merge-patch+json' } });

  it('stores a JSON number written to a Text attribute as its exact decimal text through version 2 (ATTR-20)', async () => {
    const key = await emailProfile();
    // A web form's back-end sends the mobile number as a JSON number, as the platform's help does.
    expectNoContent(await patchRaw(`${v2(EMAIL, key)}/attributes`, `{"${MOBILE_ATTR}": 41791234567}`));
    expect((await attributes(EMAIL, key))[version(MOBILE_ATTR)]).toBe('41791234567');
    // Beyond 2^53 the digits are lost in parsing, and 1e21 has no plain decimal text: refused, nothing changes.
    for (const raw of ['9007199254740993', '1e21'])
      expectProblem(await patchRaw(`${v2(EMAIL, key)}/attributes`, `{"${attr('nickname')}": ${raw}}`), 400, 'AUD-1209');
    expect((await attributes(EMAIL, key))[version(attr('nickname'))]).toBeUndefined();
  });

  it('stores a JSON number written to a Text attribute as its decimal text through version 1 (ATTR-20)', async () => {
    const key = await emailProfile();
    const res = await patchRaw(`${profile(EMAIL, key)}/attributes`, `{"${version(attr('nickname'))}": 3.25}`);
    expectNoContent(res);
    expect((await attributes(EMAIL, key))[version(attr('nickname'))]).toBe('3.25');
  });
});

describe('merge-patch and JSON bodies (COMP-04)', () => {
  for (const type of [
    'application/merge-patch+json',
    'application/json',
    'application/merge-patch+json; charset=utf-8',
  ]) {
    it(`accepts ${type} on attribute and tag PATCH (COMP-04)`, async () => {
      const key = await emailProfile();
      const headers = { 'content-type': type };
      expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'One' }, S, headers));
      expectNoContent(await patchV2(EMAIL, key, { [LASTNAME]: 'Two' }, '', S, headers));
      expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true }, S, headers));
      expect(await attributes(EMAIL, key)).toEqual({
        [version(EMAIL_ATTR)]: key,
        [version(FIRSTNAME)]: 'One',
        [version(LASTNAME)]: 'Two',
      });
      expect(await tags(EMAIL, key)).toEqual({ [tag('vip')]: true });
    });
  }

  it('refuses a PATCH body of another media type with 415', async () => {
    const key = await emailProfile();
    const res = await server.request('PATCH', `${profile(EMAIL, key)}/tags`, {
      token,
      raw: JSON.stringify({ [tag('vip')]: true }),
      headers: { 'content-type': 'text/plain' },
    });
    expectProblem(res, 415);
    expect(await tags(EMAIL, key)).toEqual({});
  });
});

import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  M,
  S,
  WEB,
  attr,
  attributes,
  nextNumber,
  emailProfile,
  event,
  eventVersion,
  expectNoContent,
  patchTags,
  patchV1,
  patchV2,
  postEvents,
  profile,
  server,
  tag,
  tags,
  token,
  v2,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * Attribute, tag and event writes against their definitions and permissions, through real HTTP
 * (ATTR-21..25).
 */

useProfileData();

describe('attribute definitions and permissions', () => {
  it('refuses an attribute version id or discriminator not defined for the section with 400 AUD-1206 (ATTR-21)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { '999999999': 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [FIRSTNAME]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [attr('nope')]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [version(FIRSTNAME)]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann', [attr('nope')]: 'x' }), 400, 'AUD-1206');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses a deprecated attribute version with 400 AUD-1207 (ATTR-22)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV1(EMAIL, key, { [version(attr('points'), 1)]: 5 }), 400, 'AUD-1207');
    expectNoContent(await patchV1(EMAIL, key, { [version(attr('points'), 2)]: 5.5 }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(attr('points'), 2)]: 5.5 });
  });

  it('refuses a hidden attribute with 400 (ATTR-21)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('secret')]: 's' }), 400, 'AUD-1211');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('secret'))]: 's' }), 400, 'AUD-1211');
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
  });

  it('refuses attributes, tags and events not writable through the keyspace with 403 AUD-1208 (ATTR-23)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('read-only')]: 'r' }), 403, 'AUD-1208');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('read-only'))]: 'r' }), 403, 'AUD-1208');
    expectProblem(await patchTags(EMAIL, key, { [tag('read-only-tag')]: true }), 403, 'AUD-1208');
    expectProblem(
      await server.request('DELETE', `${v2(EMAIL, key)}/attributes/${attr('read-only')}`, { token }),
      403,
      'AUD-1208',
    );
    expectProblem(
      await postEvents(EMAIL, key, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('read-only-event')),
            data: { url: 'x' },
          },
        ],
      }),
      403,
      'AUD-1208',
    );
    // Through the web keyspace, the email-only types are not writable either.
    const cookie = `cookie-${nextNumber()}`;
    expectNoContent(
      await server.request('PUT', '/audience/profiles/merges', {
        token,
        body: {
          profiles: [
            { keyspace_discriminator: EMAIL, profile_key: key },
            { keyspace_discriminator: WEB, profile_key: cookie },
          ],
        },
      }),
    );
    expectProblem(await patchV2(WEB, cookie, { [attr('email-only')]: 'e' }), 403, 'AUD-1208');
    expectProblem(await patchTags(WEB, cookie, { [tag('email-only-tag')]: true }), 403, 'AUD-1208');
    expectProblem(
      await postEvents(WEB, cookie, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('email-only-event')),
            data: { url: 'x' },
          },
        ],
      }),
      403,
      'AUD-1208',
    );
    expectNoContent(await patchV2(WEB, cookie, { [FIRSTNAME]: 'Web' }));
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Web' });
    expect(await tags(EMAIL, key)).toEqual({});
  });

  it('keeps default attribute values per section (ATTR-24)', async () => {
    const key = await emailProfile();
    // Default attributes have the same discriminator in every section, and their own versions.
    expect(version(FIRSTNAME, 1, M)).not.toBe(version(FIRSTNAME, 1, S));
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Ann' }));
    // The profile was created in the store section: the magazine section has no values yet.
    expect(await attributes(EMAIL, key, M)).toEqual({});
    expectNoContent(await patchV2(EMAIL, key, { [FIRSTNAME]: 'Anna', [EMAIL_ATTR]: key }, '', M));
    expect(await attributes(EMAIL, key, M)).toEqual({
      [version(FIRSTNAME, 1, M)]: 'Anna',
      [version(EMAIL_ATTR, 1, M)]: key,
    });
    expect(await attributes(EMAIL, key)).toEqual({ [version(FIRSTNAME)]: 'Ann', [version(EMAIL_ATTR)]: key });
    expectNoContent(await patchV1(EMAIL, key, { [version(FIRSTNAME)]: null }));
    expect(await attributes(EMAIL, key, M)).toEqual({
      [version(FIRSTNAME, 1, M)]: 'Anna',
      [version(EMAIL_ATTR, 1, M)]: key,
    });
    // Tags are per section too.
    expectNoContent(await patchTags(EMAIL, key, { [tag('reader')]: true }, M));
    expect(await tags(EMAIL, key)).toEqual({});
    expect(await tags(EMAIL, key, M)).toEqual({ [tag('reader')]: true });
  });

  it('refuses custom attributes and tags of another section with 400 (ATTR-25)', async () => {
    const key = await emailProfile();
    expectProblem(await patchV2(EMAIL, key, { [attr('nickname')]: 'n' }, '', M), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('nickname'))]: 'n' }, M), 400, 'AUD-1206');
    expectProblem(await patchV2(EMAIL, key, { [attr('issue')]: 1 }), 400, 'AUD-1206');
    expectProblem(await patchV1(EMAIL, key, { [version(attr('issue'), 1, M)]: 1 }), 400, 'AUD-1206');
    // A default attribute's version id of one section is not one of another section.
    expectProblem(await patchV1(EMAIL, key, { [version(FIRSTNAME, 1, M)]: 'x' }), 400, 'AUD-1206');
    expectProblem(await patchTags(EMAIL, key, { [tag('vip')]: true }, M), 400, 'AUD-1218');
    expectProblem(await patchTags(EMAIL, key, { [tag('reader')]: true }), 400, 'AUD-1218');
    expectProblem(
      await postEvents(
        EMAIL,
        key,
        {
          items: [
            { event_time: '2026-01-01T00:00:00Z', version_id: eventVersion(event('page-view')), data: { url: 'x' } },
          ],
        },
        M,
      ),
      400,
      'AUD-1220',
    );
    expect(await attributes(EMAIL, key, M)).toEqual({});
    expect(await tags(EMAIL, key, M)).toEqual({});
  });
});

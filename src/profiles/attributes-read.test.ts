import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  EMAIL_ATTR,
  FIRSTNAME,
  NS,
  WEB,
  attr,
  attributes,
  nextNumber,
  emailProfile,
  event,
  eventVersion,
  expectNoContent,
  fresh,
  getEvents,
  patchTags,
  patchV1,
  patchV2,
  postEvents,
  profile,
  server,
  tag,
  tags,
  token,
  version,
  useProfileData,
} from '../../test/profile-data.ts';

/**
 * GET …/tags and …/attributes through real HTTP (ATTR-01..04).
 */

useProfileData();

describe('GET tags and attributes', () => {
  it('answers the tags as a map of tag discriminator to boolean (ATTR-01)', async () => {
    const key = await emailProfile();
    expect(await tags(EMAIL, key)).toEqual({});
    expectNoContent(await patchTags(EMAIL, key, { [tag('vip')]: true, [tag('newsletter')]: true }));
    const res = await server.request('GET', `${profile(EMAIL, key)}/tags`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ [tag('vip')]: true, [tag('newsletter')]: true });
  });

  it('answers the attributes as a map of attribute version id to value (ATTR-02)', async () => {
    const key = await emailProfile();
    // Creating the profile set the email attribute mapped to the keyspace (SPEC §1 rule 5).
    expect(await attributes(EMAIL, key)).toEqual({ [version(EMAIL_ATTR)]: key });
    expectNoContent(
      await patchV2(EMAIL, key, {
        [FIRSTNAME]: 'Ann',
        [attr('visits')]: 3,
        [attr('address')]: { city: 'Oslo', zip: '0150' },
      }),
    );
    const res = await server.request('GET', `${profile(EMAIL, key)}/attributes`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('visits'))]: 3,
      [version(attr('address'))]: { city: 'Oslo', zip: '0150' },
    });
  });

  it('answers 404 AUD-1201 for attributes, tags and events of an unknown profile (ATTR-03)', async () => {
    for (const what of ['attributes', 'tags', 'events']) {
      expectProblem(
        await server.request('GET', `${profile(EMAIL, fresh('nobody'))}/${what}`, { token }),
        404,
        'AUD-1201',
      );
    }
  });

  it('answers 404 for an unknown keyspace or section (ATTR-03)', async () => {
    const key = await emailProfile();
    for (const what of ['attributes', 'tags', 'events']) {
      expectProblem(
        await server.request('GET', `${profile(`${NS}.keyspaces.nope`, key)}/${what}`, { token }),
        404,
        'AUD-1101',
      );
      expectProblem(
        await server.request('GET', `${profile(EMAIL, key, `${NS}.sections.user-created.nope`)}/${what}`, { token }),
        404,
        'AUD-1102',
      );
    }
    // Writes name the same resources and answer the same.
    expectProblem(
      await patchV1(EMAIL, key, { [version(FIRSTNAME)]: 'x' }, `${NS}.sections.user-created.nope`),
      404,
      'AUD-1102',
    );
    expectProblem(await patchV2(`${NS}.keyspaces.nope`, key, { [FIRSTNAME]: 'x' }), 404, 'AUD-1101');
    expectProblem(
      await patchTags(EMAIL, key, { [tag('vip')]: true }, `${NS}.sections.user-created.nope`),
      404,
      'AUD-1102',
    );
  });

  it('leaves out attributes and tags not readable through the keyspace (ATTR-04)', async () => {
    const key = await emailProfile();
    // "Write only" can be written but not read through the email keyspace.
    expectNoContent(
      await patchV2(EMAIL, key, { [attr('write-only')]: 'w', [attr('email-only')]: 'e', [FIRSTNAME]: 'Ann' }),
    );
    expectNoContent(
      await patchTags(EMAIL, key, { [tag('write-only-tag')]: true, [tag('email-only-tag')]: true, [tag('vip')]: true }),
    );
    expect(await attributes(EMAIL, key)).toEqual({
      [version(EMAIL_ATTR)]: key,
      [version(FIRSTNAME)]: 'Ann',
      [version(attr('email-only'))]: 'e',
    });
    expect(await tags(EMAIL, key)).toEqual({ [tag('email-only-tag')]: true, [tag('vip')]: true });

    // Through the web keyspace (after a merge) the email-only types are left out too.
    const cookie = `cookie-${nextNumber()}`;
    const merged = await server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: key },
          { keyspace_discriminator: WEB, profile_key: cookie },
        ],
      },
    });
    expectNoContent(merged);
    expect(await attributes(WEB, cookie)).toEqual({ [version(EMAIL_ATTR)]: key, [version(FIRSTNAME)]: 'Ann' });
    expect(await tags(WEB, cookie)).toEqual({ [tag('vip')]: true });
    // Events follow the same rule.
    expectNoContent(
      await postEvents(EMAIL, key, {
        items: [
          {
            event_time: '2026-01-01T00:00:00Z',
            version_id: eventVersion(event('email-only-event')),
            data: { url: 'e' },
          },
          { event_time: '2026-01-02T00:00:00Z', version_id: eventVersion(event('page-view')), data: { url: 'p' } },
        ],
      }),
    );
    const viaEmail = await getEvents(EMAIL, key);
    expect(viaEmail.body.items.map((e: { data: { url: string } }) => e.data.url)).toEqual(['p', 'e']);
    const viaWeb = await getEvents(WEB, cookie);
    expect(viaWeb.body.items.map((e: { data: { url: string } }) => e.data.url)).toEqual(['p']);
  });
});

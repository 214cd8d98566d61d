import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('path handling (COMP-09, COMP-10, COMP-11)', () => {
  const section = 'com.vendor1.sections.user-created.a+b@c.d';
  const tag = 'com.vendor1.tags.x+y@z.json';
  const manifest = { sections: [{ name: 'X', discriminator: section, tags: [{ name: 'T', discriminator: tag }] }] };

  it('percent-encoded and raw segments address the same section and tag (COMP-09)', async () => {
    const { token } = await server.login(manifest);
    const raw = await server.request('GET', `/audience/sections/${section}/tags/${tag}`, { token });
    expect(raw.status).toBe(200);
    expect(raw.body).toMatchObject({ discriminator: tag, name: 'T' });
    const encoded = await server.request(
      'GET',
      `/audience/sections/${encodeURIComponent(section)}/tags/${encodeURIComponent(tag)}`,
      { token },
    );
    expect(encoded.status).toBe(200);
    expect(encoded.body).toEqual(raw.body);
    const list = await server.request('GET', `/audience/sections/com.vendor1.sections.user-created.a%2Bb%40c.d/tags`, {
      token,
    });
    expect(list.status).toBe(200);
    expect(list.body.items.map((t: { discriminator: string }) => t.discriminator)).toEqual([tag]);
  });

  it('a + in a path segment stays + and is never read as a space (COMP-10)', async () => {
    const { token } = await server.login(manifest);
    expect((await server.request('GET', `/audience/sections/${section}/tags`, { token })).status).toBe(200);
    const spaced = await server.request('GET', '/audience/sections/com.vendor1.sections.user-created.a%20b@c.d/tags', {
      token,
    });
    expectProblem(spaced, 404, 'AUD-1102');
    expect(spaced.body.detail).toContain('a b@c.d');
    const tagSpaced = await server.request('GET', `/audience/sections/${section}/tags/com.vendor1.tags.x%20y@z.json`, {
      token,
    });
    expectProblem(tagSpaced, 404, 'AUD-1103');
  });

  it('dots are part of the discriminator, never a format suffix (COMP-11)', async () => {
    const { token } = await server.login(manifest);
    const res = await server.request('GET', `/audience/sections/${section}/tags/${tag}`, { token });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.discriminator).toBe(tag);
    // Without its ".json" the tag is another (unknown) identifier.
    expectProblem(
      await server.request('GET', `/audience/sections/${section}/tags/com.vendor1.tags.x+y@z`, { token }),
      404,
      'AUD-1103',
    );
    expectProblem(
      await server.request('GET', `/audience/sections/com.vendor1.sections.user-created.a+b@c/tags`, { token }),
      404,
      'AUD-1102',
    );
  });
});

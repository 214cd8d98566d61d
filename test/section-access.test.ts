import { describe, expect, it } from 'vitest';
import { expectProblem } from './app.ts';
import { ALPHA, alphaOnly, BETA, EMAIL, full, ids, importBody, sectionAccessServer, server } from './section-access.ts';

// API keys restricted to sections, beyond the table of operations (test/section-operations.test.ts):
// the sections a key lists, AQL that names another section, and imports that merge profiles.

sectionAccessServer();

describe('API keys restricted to sections', () => {
  it('lists only the sections the key is granted', async () => {
    const listed = (await server.request('GET', '/audience/sections', { token: alphaOnly })).body.items.map(
      (s: { discriminator: string }) => s.discriminator,
    );
    expect(listed).toEqual([ALPHA]);
  });

  it('refuses AQL that reads another section even when the body names its own: no count of data it may not read', async () => {
    const query = (section: string) => `section(${ids[section].section}).attribute(${ids[section].score}).gt(10)`;
    const text = `${query(ALPHA)} || ${query(BETA)}`;
    const denied = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token: alphaOnly,
      body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_definition: text } },
    });
    const detail = expectProblem(denied, 403, 'AUD-1107');
    // The position of the Beta term's section id.
    expect(detail).toContain(
      `line 1, column ${text.indexOf(`section(${ids[BETA].section})`, query(ALPHA).length) + 'section('.length + 1}`,
    );
    const own = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token: alphaOnly,
      body: { section_discriminator: ALPHA, segment: { timezone: 'UTC', segment_definition: query(ALPHA) } },
    });
    expect(own.status, own.text).toBe(200);
  });

  it('refuses an import that merges profiles: the merge joins data of every section', async () => {
    const body = {
      ...importBody(1, ALPHA),
      keyspace_mappings: [{ keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: true }],
    };
    expectProblem(
      await server.request('POST', `/audience/sections/${ALPHA}/imports`, { token: alphaOnly, body }),
      403,
      'AUD-1107',
    );
    expect((await server.request('POST', `/audience/sections/${ALPHA}/imports`, { token: full, body })).status).toBe(
      201,
    );
  });
});

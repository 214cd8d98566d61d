import { describe, expect, it } from 'vitest';
import { expectProblem, SHOP } from '../../test/app.ts';
import { server, httpServer, SHOP_SECTION } from '../../test/http-server.ts';

httpServer();

const BIG = 'com.vendor1.segments.user-created.big-spenders';

describe('saving a segment and its versions', () => {
  it("POST /audience/segments/{d}/versions saves a query as the segment's new last version, which counts and trends use", async () => {
    const { token } = await server.login(SHOP);
    const before = (await server.request('GET', `/audience/segments/${BIG}`, { token })).body;
    const query = before.versions[0].query.replace('gt(100)', 'gt(50)');
    expect(query).not.toBe(before.versions[0].query);
    const saved = await server.request('POST', `/audience/segments/${BIG}/versions`, { token, body: { query } });
    expect(saved.status, saved.text).toBe(201);
    expect(saved.body).toEqual({ id: expect.any(String), query });
    const after = (await server.request('GET', `/audience/segments/${BIG}`, { token })).body;
    expect(after.versions).toEqual([...before.versions, saved.body]);
    const count = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token,
      body: { section_discriminator: SHOP_SECTION, segment: { timezone: 'UTC', segment_discriminator: BIG } },
    });
    expect(count.status, count.text).toBe(200);
  });

  it('refuses a query that does not parse (400 with its position, nothing saved), an unknown segment (404); test/section-operations.ts: a key restricted to sections (403)', async () => {
    const { token } = await server.login(SHOP);
    const bad = await server.request('POST', `/audience/segments/${BIG}/versions`, {
      token,
      body: { query: 'section(1).tag(' },
    });
    const detail = expectProblem(bad, 400);
    const [, column, character] = /line 1, column (\d+) \(character (\d+)\)/.exec(detail)!.map(Number);
    expect(bad.body).toMatchObject({ line: 1, column, offset: character - 1 });
    expect((await server.request('GET', `/audience/segments/${BIG}`, { token })).body.versions).toHaveLength(1);
    expectProblem(
      await server.request('POST', '/audience/segments/com.vendor1.segments.user-created.none/versions', {
        token,
        body: { query: 'section(1).tag("x").exists()' },
      }),
      404,
      'AUD-1104',
    );
  });

  it('POST /audience/segments creates a segment with its first version, its discriminator from its name, listed and counted (DEF-19)', async () => {
    const { token } = await server.login(SHOP);
    const big = (await server.request('GET', `/audience/segments/${BIG}`, { token })).body;
    const query = big.versions[0].query.replace('gt(100)', 'gt(7)');
    const created = await server.request('POST', '/audience/segments', {
      token,
      body: { name: 'Loyal customers', query },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({
      discriminator: 'com.vendor1.segments.user-created.loyal-customers',
      name: 'Loyal customers',
      description: '',
      versions: [{ id: expect.any(String), query }],
    });
    const listed = (await server.request('GET', '/audience/segments', { token })).body.items;
    expect(listed).toContainEqual(created.body);
    // The same name again is another segment, its discriminator numbered.
    const again = await server.request('POST', '/audience/segments', {
      token,
      body: { name: 'Loyal customers', description: 'the second', query },
    });
    expect(again.status, again.text).toBe(201);
    expect(again.body.discriminator).toBe('com.vendor1.segments.user-created.loyal-customers-2');
    const count = await server.request('POST', '/audience/profiles/reports/segments/count', {
      token,
      body: {
        section_discriminator: SHOP_SECTION,
        segment: { timezone: 'UTC', segment_discriminator: again.body.discriminator },
      },
    });
    expect(count.status, count.text).toBe(200);
  });

  it('refuses a new segment whose query does not parse (400, nothing saved) or that lacks a name (400 naming it)', async () => {
    const { token } = await server.login(SHOP);
    const before = (await server.request('GET', '/audience/segments', { token })).body.items.length;
    expectProblem(
      await server.request('POST', '/audience/segments', { token, body: { name: 'Broken', query: 'section(1).tag(' } }),
      400,
    );
    const unnamed = await server.request('POST', '/audience/segments', { token, body: { query: 'section(1)' } });
    expect(expectProblem(unnamed, 400)).toMatch(/name/);
    expect((await server.request('GET', '/audience/segments', { token })).body.items).toHaveLength(before);
  });
});

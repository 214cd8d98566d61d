import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { TestServer, expectProblem } from '../../test/app.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('operations', () => {
  it('GET /openapi.json is an OpenAPI 3 document listing /audience/sections', async () => {
    const res = await server.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
    expect(res.body.paths['/audience/sections']).toHaveProperty('get');
    expect(res.body.paths['/audience/sections/{section_discriminator}/tags']).toHaveProperty('post');
  });

  it('GET /openapi.json lints clean (the recommended rules of redocly lint): servers from PUBLIC_URL, unique operationIds, a licence', async () => {
    const published = await TestServer.start({ PUBLIC_URL: 'https://cdp.shop.test/' });
    try {
      const res = await published.request('GET', '/openapi.json');
      const config = await createConfig({ extends: ['recommended'] });
      const problems = await lintFromString({ source: res.text, absoluteRef: '/openapi.json', config });
      expect(problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
      expect(res.body.servers).toEqual([{ url: 'https://cdp.shop.test', description: expect.any(String) }]);
      expect(res.body.info.license.name).toBe('Apache-2.0');
      const operations = Object.values(
        res.body.paths as Record<string, Record<string, { operationId: string }>>,
      ).flatMap((path) => Object.values(path));
      expect(operations.length).toBeGreaterThan(50);
      expect(new Set(operations.map((o) => o.operationId)).size).toBe(operations.length);
      expect(res.body.paths['/audience/segments/{segment_discriminator}'].get.operationId).toBe(
        'getAudienceSegmentsBySegmentDiscriminator',
      );
    } finally {
      await published.close();
    }
  });

  it('GET /openapi.json declares every error of every operation as application/problem+json, as errors are sent', async () => {
    const { paths } = (await server.request('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, unknown> }> }>>;
    };
    for (const [path, methods] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const status of ['4XX', '5XX'])
          expect(Object.keys(operation.responses[status]?.content ?? {}), `${method} ${path} ${status}`).toEqual([
            'application/problem+json',
          ]);
      }
    }
    const sent = await server.request('GET', '/audience/sections');
    expectProblem(sent, 401);
  });

  it('GET /docs answers 200 HTML without a token', async () => {
    const res = await server.request('GET', '/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html/i);
  });

  it('GET /errors/AUD-8 describes the code (ERR-04)', async () => {
    const res = await server.request('GET', '/errors/AUD-8');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      type: '/errors/AUD-8',
      code: 'AUD-8',
      title: 'Authorization failure',
      http_status: 401,
    });
    expectProblem(await server.request('GET', '/errors/AUD-99999'), 404, 'AUD-1');
  });
});

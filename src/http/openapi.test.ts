import path from 'node:path';
import { loadConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { TestServer, expectProblem } from '../../test/app.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

type Json = Record<string, any>;

describe('operations', () => {
  it('GET /openapi.json is an OpenAPI 3 document listing /audience/sections', async () => {
    const res = await server.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
    expect(res.body.paths['/audience/sections']).toHaveProperty('get');
    expect(res.body.paths['/audience/sections/{section_discriminator}/tags']).toHaveProperty('post');
  });

  it('GET /openapi.json lints clean under redocly.yaml (every rule of `all` but those it turns off, docs/reference.md): servers from PUBLIC_URL, unique operationIds, a licence', async () => {
    const published = await TestServer.start({ PUBLIC_URL: 'https://cdp.shop.test/' });
    try {
      const config = await loadConfig({ configPath: path.join(import.meta.dirname, '../../redocly.yaml') });
      for (const url of ['/openapi.json', '/openapi/public.json', '/openapi/operator.json']) {
        const res = await published.request('GET', url);
        const problems = await lintFromString({ source: res.text, absoluteRef: url, config });
        expect(
          problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`),
          url,
        ).toEqual([]);
      }
      const res = await published.request('GET', '/openapi.json');
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
      // "Authorize" takes a client id and secret: the client-credentials flow at this service's token URL.
      expect(res.body.components.securitySchemes.oauth.flows).toEqual({
        clientCredentials: { tokenUrl: 'https://cdp.shop.test/oauth/token', scopes: {} },
      });
    } finally {
      await published.close();
    }
  });

  it("GET /openapi.json and the two definitions /docs shows say an access token lives as long as /oauth/token's expires_in says", async () => {
    const credentials = await server.createAccount();
    const answer = await server.request('POST', '/oauth/token', {
      body: {
        grant_type: 'client_credentials',
        client_id: credentials.clientId,
        client_secret: credentials.clientSecret,
      },
    });
    const hours = `valid for ${answer.body.expires_in / 3600} hours`;
    const doc = (await server.request('GET', '/openapi.json')).body;
    expect(doc.info.description).toContain(hours);
    expect(doc.tags.find((t: Json) => t.name === 'auth').description).toContain(hours);
    expect(JSON.stringify(doc)).not.toMatch(/for an hour/);
    for (const url of ['/openapi/public.json', '/openapi/operator.json']) {
      const part = (await server.request('GET', url)).body;
      expect(part.info.description, url).toContain(hours);
      expect(JSON.stringify(part), url).not.toMatch(/for an hour/);
    }
  });

  it('GET /openapi.json teaches every operation: a one-line summary, a description with the codes it can answer, and examples of its request and answers', async () => {
    const { paths } = (await server.request('GET', '/openapi.json')).body as {
      paths: Record<string, Record<string, Json>>;
    };
    const missing: string[] = [];
    for (const [path, methods] of Object.entries(paths))
      for (const [method, op] of Object.entries(methods)) {
        const name = `${method.toUpperCase()} ${path}`;
        if (!op.summary || /\n/.test(op.summary) || op.summary.length > 80) missing.push(`${name}: summary`);
        const [own, errors] = String(op.description ?? '').split('**Errors**');
        if (!own || own.trim().length < 20) missing.push(`${name}: description`);
        if (!errors || !/\| `AUD-\d+` \|/.test(errors)) missing.push(`${name}: errors`);
        for (const [type, media] of Object.entries((op.requestBody?.content ?? {}) as Record<string, Json>))
          if (type !== 'multipart/form-data' && media.example === undefined) missing.push(`${name}: body example`);
        for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
          if (/^[45]XX$/.test(status)) {
            if (response.$ref !== '#/components/responses/Problem') missing.push(`${name}: ${status} problem`);
            continue;
          }
          for (const media of Object.values((response.content ?? {}) as Record<string, Json>))
            if (media.example === undefined) missing.push(`${name}: ${status} example`);
        }
      }
    expect(missing).toEqual([]);
    // Realistic discriminators, not the schemas' names for them.
    const tags = paths['/audience/sections/{section_discriminator}/tags'].get;
    expect(tags.parameters.find((p: Json) => p.in === 'path')).toMatchObject({
      name: 'section_discriminator',
      example: 'com.vendor1.sections.user-created.shop',
    });
    expect(tags.description).toContain('| 404 | `AUD-1102` | Section not found |');
  });

  it('GET /openapi.json declares every error of every operation as the one problem document component, as errors are sent', async () => {
    const doc = (await server.request('GET', '/openapi.json')).body as Json;
    expect(doc.components.responses.Problem.content).toEqual({
      'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, example: expect.any(Object) },
    });
    expect(Object.keys(doc.components.schemas.Problem.properties)).toEqual([
      'type',
      'title',
      'status',
      'status_code',
      'detail',
      // An AQL error's position (docs/aql.md "Errors"), present on those problems only.
      'line',
      'column',
      'offset',
    ]);
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, Json>>))
      for (const [method, operation] of Object.entries(methods))
        for (const status of ['4XX', '5XX'])
          expect(operation.responses[status], `${method} ${path} ${status}`).toEqual({
            $ref: '#/components/responses/Problem',
          });
    // Shared types are named once and referred to.
    const created = doc.paths['/audience/keyspaces/{keyspace_discriminator}/sections/{section_discriminator}/profiles'];
    expect(created.post.responses['201'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/UniqueIdentifier',
    });
    const sent = await server.request('GET', '/audience/sections');
    expectProblem(sent, 401);
  });

  it('the public and operator APIs are two documents: /admin and health only in the operator one, under the operator token', async () => {
    const pub = (await server.request('GET', '/openapi/public.json')).body as Json;
    const op = (await server.request('GET', '/openapi/operator.json')).body as Json;
    const all = (await server.request('GET', '/openapi.json')).body as Json;
    const pubPaths = Object.keys(pub.paths);
    const opPaths = Object.keys(op.paths);
    expect(pubPaths.filter((p) => p.startsWith('/admin'))).toEqual([]);
    expect(opPaths.filter((p) => !p.startsWith('/admin') && !['/healthz', '/readyz'].includes(p))).toEqual([]);
    expect(pubPaths.length + opPaths.length).toBe(Object.keys(all.paths).length);
    expect(Object.keys(op.components.securitySchemes)).toEqual(['operator']);
    expect(op.paths['/admin/accounts'].get.security).toEqual([{ operator: [] }]);
    expect(Object.keys(pub.components.securitySchemes)).toEqual(['oauth', 'bearer']);
  });

  it("GET /docs is the reference under the project's own title and mark, with both definitions, and allows only its own scripts", async () => {
    const res = await server.request('GET', '/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<title>audience API reference<\/title>/);
    expect(res.text).not.toMatch(/swagger ui|favicon-32x32/i);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    const init = await server.request('GET', '/docs/static/swagger-initializer.js');
    expect(init.text).toContain('/openapi/operator.json');
    expect(init.text).toContain('data:image/svg+xml;base64');
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

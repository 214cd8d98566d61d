import { describe, expect, it } from 'vitest';
import { expectProblem } from './app.ts';
import { OPERATIONS } from './section-operations.ts';
import { ALPHA, alphaOnly, BETA, full, ids, sectionAccessServer, server } from './section-access.ts';

// API keys restricted to sections, checked on every operation of the public interface: a table
// (test/section-operations.ts) names each one (a test below fails when an operation of /openapi.json
// is missing from it), how to call it in a section, and what a key restricted to another section meets.

sectionAccessServer();

/** The operations of the public interface in the OpenAPI document, as `METHOD /path`. */
async function publicOperations(): Promise<string[]> {
  const doc = (await server.request('GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
  const operational = /^\/(admin|oauth|files|errors|docs|openapi\.json|healthz|readyz|metrics|\.well-known)\b/;
  return Object.entries(doc.paths)
    .filter(([path]) => !operational.test(path))
    .flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((m) => m !== 'head')
        .map((m) => `${m.toUpperCase()} ${path}`),
    );
}

describe('API keys restricted to sections', () => {
  it('the table names every operation of the public interface', async () => {
    const operations = await publicOperations();
    expect(operations.length).toBeGreaterThan(30);
    expect(operations.filter((o) => !(o in OPERATIONS))).toEqual([]);
  });

  for (const [name, operation] of Object.entries(OPERATIONS)) {
    it(`${name}: ${operation.access === 'section' ? '403 in another section, served in its own' : operation.access === 'every-section' ? '403: it reaches every section' : 'served'}`, async () => {
      if (operation.access === 'section') {
        const denied = await operation.call(alphaOnly, BETA);
        expectProblem(denied, 403, 'AUD-1107');
        expect(denied.body.detail).toMatch(new RegExp(`${BETA.replaceAll('.', '\\.')}|${ids[BETA].section}`));
        const own = await operation.call(alphaOnly, ALPHA);
        expect(own.status, own.text).toBeLessThan(400);
      } else if (operation.access === 'every-section') {
        expectProblem(await operation.call(alphaOnly, ALPHA), 403, 'AUD-1107');
      } else {
        const served = await operation.call(alphaOnly, ALPHA);
        expect(served.status, served.text).toBeLessThan(400);
      }
      // A key granted every section is served either way.
      const allowed = await operation.call(full, BETA);
      expect(allowed.status, allowed.text).toBeLessThan(400);
    });
  }
});

import fs from 'node:fs/promises';
import path from 'node:path';
import { expect, it } from 'vitest';
import { generatePythonClient, OPENAPI_DOCUMENT, PYTHON_CLIENT } from '../scripts/generate-python-client.ts';

// The Python client's models and operations are generated from the OpenAPI document of the
// TypeScript client (which clients/typescript/test/generated.test.ts keeps equal to the served
// one), and committed: this test fails when they differ from what the document gives now.
// `npm run generate:python-client` writes them again (`npm run generate:client` does both).

it('the committed models and operations of the Python client are those the OpenAPI document gives', async () => {
  const document = JSON.parse(await fs.readFile(OPENAPI_DOCUMENT, 'utf8'));
  const files = generatePythonClient(document);
  expect(Object.keys(files).sort()).toEqual(['audience_client/models.py', 'audience_client/operations.py']);
  for (const [file, text] of Object.entries(files)) {
    const committed = await fs.readFile(path.join(PYTHON_CLIENT, file), 'utf8').catch(() => '(missing)');
    expect(
      committed,
      `clients/python/${file} differs from what clients/typescript/openapi.json gives: run \`npm run generate:python-client\` and commit the result`,
    ).toBe(text);
  }
});

it('names every operation of the document once, and every problem code its error tables give', () => {
  const document = {
    openapi: '3.0.3',
    components: {
      schemas: {
        Thing: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, from: { type: 'integer' } } },
      },
      securitySchemes: { oauth: { type: 'oauth2' } },
    },
    security: [{ oauth: [] }],
    paths: {
      '/things/{thing_id}': {
        get: {
          operationId: 'getThing',
          description: '| Status | Code | Title |\n|---|---|---|\n| 404 | `AUD-9001` | Thing not found |',
          parameters: [
            { in: 'path', name: 'thing_id', required: true, schema: { type: 'string' } },
            { in: 'query', name: 'kind', schema: { type: 'string', enum: ['a', 'b'] } },
          ],
          responses: { '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } } },
        },
        delete: { operationId: 'deleteThing', security: [], responses: { '204': { description: 'gone' } } },
      },
    },
  };
  const { 'audience_client/models.py': models, 'audience_client/operations.py': operations } =
    generatePythonClient(document);
  // A key that is no Python name takes the functional form.
  expect(models).toContain(
    'Thing = TypedDict(\n    "Thing",\n    {\n        "id": "str",\n        "from": "NotRequired[int]",',
  );
  expect(models).toContain('ProblemCode: TypeAlias = Literal[\n    "AUD-9001",\n]');
  expect(models).toContain('"AUD-9001": (404, "Thing not found"),');
  expect(operations).toContain('def get_thing(');
  expect(operations).toContain('kind: Literal["a", "b"] | None = None,');
  expect(operations).toContain(') -> Thing:');
  expect(operations).toMatch(
    /def delete_thing\(self, thing_id: str, \*, headers: Mapping\[str, str\] \| None = None\) -> None:/,
  );
  expect(operations).toContain('auth=None,');
});

import fastJsonStringify from 'fast-json-stringify';
import { describe, expect, it } from 'vitest';
import { nullableForSerializer } from './app.ts';

describe('nullableForSerializer', () => {
  const schema = {
    type: 'object',
    properties: {
      list: { anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'null' }] },
      at: { anyOf: [{ type: 'null' }, { type: 'string', format: 'date-time' }] },
      nested: { anyOf: [{ type: 'object', properties: { n: { type: 'integer' } } }, { type: 'null' }] },
      either: { anyOf: [{ type: 'string' }, { type: 'integer' }] },
    },
  };

  it('makes a union of one type and null that type, nullable, and leaves other unions alone', () => {
    const { properties } = nullableForSerializer(schema) as { properties: Record<string, unknown> };
    expect(properties.list).toEqual({ type: 'array', items: { type: 'string' }, nullable: true });
    expect(properties.at).toEqual({ type: 'string', format: 'date-time', nullable: true });
    expect(properties.nested).toMatchObject({ type: 'object', nullable: true });
    expect(properties.either).toEqual(schema.properties.either);
  });

  it('writes the same JSON as the schema it came from', () => {
    const before = fastJsonStringify(schema as never);
    const after = fastJsonStringify(nullableForSerializer(schema) as never);
    for (const value of [
      { list: null, at: null, nested: null, either: 1 },
      { list: ['a'], at: new Date(0), nested: { n: 2, extra: true }, either: 'b' },
      {},
    ])
      expect(after(value)).toBe(before(value));
  });
});

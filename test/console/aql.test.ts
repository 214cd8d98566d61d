import { describe, expect, test } from 'vitest';
import type { Expression } from '../../src/aql/ast.ts';
import { parse } from '../../src/aql/parser.ts';
// @ts-expect-error: the console's modules are plain JavaScript, without declarations.
import { NotBuildable, parseAql, writeAql } from '../../web/console/lib/aql.js';

// The segment builder reads AQL typed by hand into its conditions and writes them back: every form
// docs/aql.md shows survives the round trip, and the service's own parser reads the written query
// as the same expression as the typed one.

const FORMS = [
  'section(1).attribute(10).gt(100)',
  'section(1).attribute(10).eq("Lyon")',
  "section(1).attribute(10).neq('it\\'s')",
  'section(1).attribute(10).lte(-2.5)',
  'section(1).attribute(10).gte(1767225600000)',
  'section(1).attribute(10).lt("2000-01-31")',
  'section(1).attribute(12).eq(true)',
  'section(1).attribute(13).attributeData("address.city").eq("Porto")',
  'section(1).event(20)',
  'section(1).event(20).inLast("events.day", 0, 7)',
  'section(1).event(20).inLast("events.month", 1, 3)',
  'section(1).event(20).betweenDates("events", "2026-01-01", "2026-01-31")',
  'section(1).event(20).betweenDates("events", "2026-01-01T00:00:00+01:00", "2026-02-01")',
  'section(1).event(20).eventData("total").gt(200).inLast("events.week", 0, 2)',
  'section(12).event(345).eventData("activityId").eq("welcome").eventData("type").eq("OPENED")',
  'section(1).attribute(10).gt(100) && section(1).event(20).inLast("events.hour", 0, 48)',
  'section(1).attribute(10).gt(100) || section(2).attribute(30).eq("gold")',
  'section(1).attribute(10).gt(100) && section(1).attribute(11).eq("a") || section(1).event(20)',
  'section(1).attribute(10).gt(100) && (section(1).event(20) || section(1).event(21).inLast("events.minute", 5, 60))',
  '(section(1).attribute(10).gt(1) || section(1).attribute(10).lt(0)) && (section(2).event(5) || section(2).event(6))',
  '  section( 1 ) . attribute( 10 ) . gt( 100 )\n&&\tsection(1).event(20)  ',
];

/** The service's reading of a query, without positions, and with `a && (b && c)` read as `a && b && c`. */
function meaning(expression: Expression): unknown {
  if (expression.kind === 'and' || expression.kind === 'or')
    return {
      kind: expression.kind,
      terms: expression.terms.flatMap((t) => {
        const m = meaning(t) as { kind: string; terms?: unknown[] };
        return m.kind === expression.kind ? m.terms! : [m];
      }),
    };
  return JSON.parse(JSON.stringify(expression, (key, value) => (/^(at|\w+At)$/.test(key) ? undefined : value)));
}

describe('the segment builder and AQL', () => {
  test.each(FORMS)('reads and writes %s', (typed) => {
    const tree = parseAql(typed);
    const written = writeAql(tree);
    // The builder's query means what the typed one meant, to the service.
    expect(meaning(parse(written))).toEqual(meaning(parse(typed)));
    // Written again from its own reading, it is the same text and the same tree.
    expect(writeAql(parseAql(written))).toBe(written);
    expect(parseAql(written)).toEqual(tree);
  });

  test('a tree the builder made is read back as that tree', () => {
    const tree = {
      kind: 'all',
      items: [
        {
          kind: 'attribute',
          section: '1',
          version: '10',
          path: '',
          comparator: 'gt',
          value: { type: 'number', text: '100' },
        },
        {
          kind: 'any',
          items: [
            {
              kind: 'event',
              section: '1',
              version: '20',
              conditions: [],
              window: { kind: 'inLast', unit: 'day', from: 0, to: 30 },
            },
            {
              kind: 'attribute',
              section: '1',
              version: '11',
              path: '',
              comparator: 'eq',
              value: { type: 'string', text: 'say "hi"\\' },
            },
          ],
        },
      ],
    };
    const written = writeAql(tree);
    expect(written).toBe(
      'section(1).attribute(10).gt(100) && (section(1).event(20).inLast("events.day", 0, 30) || section(1).attribute(11).eq("say \\"hi\\"\\\\"))',
    );
    expect(parseAql(written)).toEqual(tree);
    expect(parseAql('')).toEqual({ kind: 'all', items: [] });
    expect(writeAql({ kind: 'all', items: [] })).toBe('');
  });

  test('what the builder cannot show is said so, not guessed', () => {
    for (const text of [
      'section(1).attribute(10).gt(100',
      'loyalty points > 100',
      'section("shop").attribute(1).eq(1)',
    ])
      expect(() => parseAql(text)).toThrow(NotBuildable);
  });
});

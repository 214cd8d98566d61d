import { describe, expect, it } from 'vitest';
import type { Expression } from './ast.ts';
import { MAX_TERMS } from './check.ts';
import { parse } from './parser.ts';
import { accept, aqlDefinitions, id, q } from '../../test/aql.ts';

// The forms of the audience query language parse and check against an account's definitions.

aqlDefinitions();

describe('AQL forms of SPEC §2.9 parse and check', () => {
  it('section(N).attribute(N) with each comparison eq, neq, lt, lte, gt, gte (AQL-12, AQL-13, AQL-16)', () => {
    for (const cmp of ['eq', 'neq', 'lt', 'lte', 'gt', 'gte'] as const) {
      expect(accept(q(`section({shop}).attribute({points}).${cmp}(100)`))).toEqual({
        kind: 'attribute',
        sectionId: id.shop,
        versionId: id.points,
        at: 0,
        sectionAt: 8,
        versionAt: 20 + id.shop.length,
        condition: {
          comparator: cmp,
          value: 100,
          path: [],
          at: 22 + id.shop.length + id.points.length,
          valueAt: 23 + id.shop.length + id.points.length + cmp.length,
        },
      });
      expect(accept(q(`section({shop}).attribute({nickname}).${cmp}("Anna")`))).toMatchObject({
        condition: { comparator: cmp, value: 'Anna' },
      });
      expect(accept(q(`section({shop}).attribute({birthday}).${cmp}("2000-01-31")`))).toMatchObject({
        condition: { comparator: cmp, value: '2000-01-31' },
      });
      expect(accept(q(`section({shop}).attribute({lastSeen}).${cmp}(1767225600000)`))).toMatchObject({
        condition: { comparator: cmp, value: 1767225600000 },
      });
      expect(accept(q(`section({shop}).attribute({pointsDecimal}).${cmp}(-2.5)`))).toMatchObject({
        condition: { comparator: cmp, value: -2.5 },
      });
    }
    expect(accept(q(`section({shop}).attribute({member}).eq(true)`))).toMatchObject({
      condition: { comparator: 'eq', value: true },
    });
    expect(accept(q(`section({shop}).attribute({member}).neq(false)`))).toMatchObject({
      condition: { comparator: 'neq', value: false },
    });
    // Single quotes, escapes, white space and line breaks between tokens.
    expect(accept(q(`section( {shop} )\n  .attribute({nickname})\n  .eq('O\\'Neil "Jr"')`))).toMatchObject({
      condition: { value: `O'Neil "Jr"` },
    });
  });

  it('attributeData("f") selects a field, dotted paths nested fields, on Struct attributes (AQL-14)', () => {
    expect(accept(q(`section({shop}).attribute({address}).attributeData("city").eq("Oslo")`))).toMatchObject({
      kind: 'attribute',
      condition: { comparator: 'eq', value: 'Oslo', path: ['city'] },
    });
    expect(accept(q(`section({shop}).attribute({address}).attributeData("geo.lat").gte(59.9)`))).toMatchObject({
      condition: { comparator: 'gte', value: 59.9, path: ['geo', 'lat'] },
    });
    expect(accept(q(`section({shop}).attribute({address}).attributeData("verified").eq(true)`))).toMatchObject({
      condition: { value: true, path: ['verified'] },
    });
  });

  it('event(N) alone, with eventData conditions, inLast and betweenDates (AQL-14, AQL-17, AQL-18)', () => {
    expect(accept(q(`section({shop}).event({purchase})`))).toEqual({
      kind: 'event',
      sectionId: id.shop,
      versionId: id.purchase,
      conditions: [],
      window: undefined,
      at: 0,
      sectionAt: 8,
      versionAt: 16 + id.shop.length,
    });
    expect(accept(q(`section({shop}).event({purchase}).eventData("sku").eq("A-1")`))).toMatchObject({
      conditions: [{ comparator: 'eq', value: 'A-1', path: ['sku'] }],
    });
    expect(
      accept(
        q(
          `section({shop}).event({purchase}).eventData("amount").gt(10).eventData("paid").eq(true).eventData("shipping.city").neq("Bergen")`,
        ),
      ),
    ).toMatchObject({
      conditions: [
        { comparator: 'gt', value: 10, path: ['amount'] },
        { comparator: 'eq', value: true, path: ['paid'] },
        { comparator: 'neq', value: 'Bergen', path: ['shipping', 'city'] },
      ],
    });
    for (const unit of ['minute', 'hour', 'day', 'week', 'month'] as const) {
      expect(accept(q(`section({shop}).event({purchase}).inLast("events.${unit}", 0, 7)`))).toMatchObject({
        window: { kind: 'inLast', unit, from: 0, to: 7 },
      });
    }
    expect(accept(q(`section({shop}).event({purchase}).inLast("events.day", 3, 3)`))).toMatchObject({
      window: { kind: 'inLast', unit: 'day', from: 3, to: 3 },
    });
    expect(
      accept(q(`section({shop}).event({purchase}).betweenDates("events", "2026-01-01", "2026-02-01")`)),
    ).toMatchObject({
      window: { kind: 'betweenDates', start: '2026-01-01', end: '2026-02-01' },
    });
    expect(
      accept(
        q(
          `section({shop}).event({purchase}).betweenDates("events", "2026-01-01T08:00:00+01:00", "2026-01-01T17:30:00Z")`,
        ),
      ),
    ).toMatchObject({
      window: { kind: 'betweenDates', start: '2026-01-01T08:00:00+01:00', end: '2026-01-01T17:30:00Z' },
    });
    // A window and conditions in any order: all of them hold for the same event.
    expect(
      accept(q(`section({shop}).event({purchase}).inLast("events.week", 0, 2).eventData("sku").eq("A")`)),
    ).toMatchObject({
      conditions: [{ path: ['sku'] }],
      window: { kind: 'inLast', unit: 'week' },
    });
    expect(
      accept(
        q(
          `section({club}).event({visit}).eventData("room").lt("B").betweenDates("events", "2026-01-01", "2026-01-31")`,
        ),
      ),
    ).toMatchObject({
      sectionId: id.club,
      conditions: [{ path: ['room'] }],
      window: { kind: 'betweenDates' },
    });
  });

  it('&& binds tighter than ||, parentheses group, chains flatten (AQL-19)', () => {
    const a = q('section({shop}).attribute({points}).gt(1)');
    const b = q('section({shop}).attribute({nickname}).eq("b")');
    const c = q('section({shop}).event({purchase})');
    const d = q('section({club}).attribute({level}).lt(4)');
    const term = (text: string) => parse(text);
    const strip = (e: Expression): unknown =>
      'terms' in e ? { kind: e.kind, terms: e.terms.map(strip) } : { kind: e.kind, versionId: e.versionId };
    expect(strip(accept(`${a} || ${b} && ${c}`))).toEqual(
      strip({ kind: 'or', terms: [term(a), { kind: 'and', terms: [term(b), term(c)] }] }),
    );
    expect(strip(accept(`${a} && ${b} || ${c}`))).toEqual(
      strip({ kind: 'or', terms: [{ kind: 'and', terms: [term(a), term(b)] }, term(c)] }),
    );
    expect(strip(accept(`(${a} || ${b}) && ${c}`))).toEqual(
      strip({ kind: 'and', terms: [{ kind: 'or', terms: [term(a), term(b)] }, term(c)] }),
    );
    expect(strip(accept(`${a} && (${b} || (${c} && ${d}))`))).toEqual(
      strip({
        kind: 'and',
        terms: [term(a), { kind: 'or', terms: [term(b), { kind: 'and', terms: [term(c), term(d)] }] }],
      }),
    );
    expect(strip(accept(`${a} || ${b} || ${c} || ${d}`))).toEqual(
      strip({ kind: 'or', terms: [term(a), term(b), term(c), term(d)] }),
    );
    expect(strip(accept(`((${a}))`))).toEqual(strip(term(a)));
  });

  it(`accepts exactly ${MAX_TERMS} terms, the generated query size limit (AQL-26)`, () => {
    const text = Array.from({ length: MAX_TERMS }, () => q('section({shop}).attribute({points}).gt(1)')).join(' || ');
    expect((accept(text) as { terms: unknown[] }).terms).toHaveLength(MAX_TERMS);
  });
});

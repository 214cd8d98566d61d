import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';
import { loadDefinitions } from '../definitions/definitions.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { Problem } from '../core/problems.ts';
import type { Expression } from './ast.ts';
import { check, MAX_TERMS } from './check.ts';
import { parse } from './parser.ts';
import type { Definitions } from '../core/definitions.ts';

/** A section with one attribute of every type and an event whose fields are typed, one of them a Struct. */
const MANIFEST: Manifest = {
  sections: [
    {
      name: 'Shop',
      attributes: [
        { name: 'Nickname', versions: [{ type: ['Text'] }] },
        { name: 'Points', versions: [{ type: ['Number'] }, { type: ['Number with decimal'] }] },
        { name: 'Member', versions: [{ type: ['True/False'] }] },
        { name: 'Birthday', versions: [{ type: ['Date'] }] },
        { name: 'Last seen', versions: [{ type: ['Timestamp'] }] },
        { name: 'Address', versions: [{ type: ['Struct'] }] },
      ],
      events: [
        {
          name: 'Purchase',
          versions: [
            {
              type: [
                { name: 'sku', type: 'Text' },
                { name: 'amount', type: 'Number' },
                { name: 'paid', type: 'True/False' },
                { name: 'day', type: 'Date' },
                { name: 'shipping', type: 'Struct' },
              ],
            },
          ],
        },
      ],
    },
    {
      name: 'Club',
      attributes: [{ name: 'Level', versions: [{ type: ['Number'] }] }],
      events: [{ name: 'Visit', versions: [{ type: [{ name: 'room', type: 'Text' }] }] }],
    },
  ],
};

let server: TestServer;
let defs: Definitions;
/** Ids of the manifest's definitions. */
const id = {
  shop: '',
  club: '',
  nickname: '',
  points: '',
  pointsDecimal: '',
  member: '',
  birthday: '',
  lastSeen: '',
  address: '',
  level: '',
  purchase: '',
  visit: '',
};

beforeAll(async () => {
  server = await TestServer.start();
  const { accountId } = await server.login(MANIFEST);
  defs = await loadDefinitions(server.services.pool, accountId);
  const shop = defs.sections.find((s) => s.name === 'Shop')!;
  const club = defs.sections.find((s) => s.name === 'Club')!;
  const attribute = (section: typeof shop, name: string, n = 0) =>
    section.attributes.find((a) => a.name === name)!.versions[n].id;
  Object.assign(id, {
    shop: shop.id,
    club: club.id,
    nickname: attribute(shop, 'Nickname'),
    points: attribute(shop, 'Points'),
    pointsDecimal: attribute(shop, 'Points', 1),
    member: attribute(shop, 'Member'),
    birthday: attribute(shop, 'Birthday'),
    lastSeen: attribute(shop, 'Last seen'),
    address: attribute(shop, 'Address'),
    level: attribute(club, 'Level'),
    purchase: shop.events.find((e) => e.name === 'Purchase')!.versions[0].id,
    visit: club.events.find((e) => e.name === 'Visit')!.versions[0].id,
  });
});
afterAll(async () => server?.close());

/** Replaces `{name}` by the id of that definition. */
function q(text: string): string {
  return text.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = (id as Record<string, string>)[name];
    if (value === undefined) throw new Error(`no id ${name}`);
    return value;
  });
}

/** Parses and checks a query against the account's definitions. */
function accept(text: string): Expression {
  const expression = parse(text);
  check(expression, defs, text);
  return expression;
}

/** The problem a query is refused with, parsing and checking it. */
function refusal(text: string): Problem {
  try {
    accept(text);
  } catch (err) {
    if (err instanceof Problem) return err;
    throw err;
  }
  throw new Error(`accepted: ${text}`);
}

/**
 * Expects `text` refused with `code`, a 400 whose detail names the line, column and character
 * (1-based) where the fault is: given, at an offset (from 0) or at the first (or `nth`, from 0)
 * occurrence of `marker` (the last for -1) in a one-line query, `<end>` for its end.
 */
function expectRefused(
  text: string,
  code: string,
  where: string | [string, number] | number | { line: number; column: number; character: number },
): Problem {
  const problem = refusal(text);
  expect(problem.code, problem.detail).toBe(code);
  expect(problem.status).toBe(400);
  let expected = where;
  if (typeof where === 'number') expected = { line: 1, column: where + 1, character: where + 1 };
  if (typeof where === 'string' || Array.isArray(where)) {
    const [marker, nth] = typeof where === 'string' ? [where, 0] : where;
    let at = marker === '<end>' ? text.length : nth < 0 ? text.lastIndexOf(marker) : text.indexOf(marker);
    for (let k = 0; k < nth; k++) at = text.indexOf(marker, at + 1);
    if (at < 0 || text.includes('\n')) throw new Error(`bad marker ${marker}`);
    expected = { line: 1, column: at + 1, character: at + 1 };
  }
  const { line, column, character } = expected as { line: number; column: number; character: number };
  expect(problem.detail).toMatch(/^AQL: /);
  expect(problem.detail).toContain(`at line ${line}, column ${column} (character ${character})`);
  return problem;
}

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

describe('AQL refusals: each with its code and where', () => {
  it('a section given by name, discriminator, quoted or negative value → AUD-1702 (AQL-12)', () => {
    expectRefused(q('section(shop).attribute({points}).eq(1)'), 'AUD-1702', 'shop');
    expectRefused(q('section("{shop}").attribute({points}).eq(1)'), 'AUD-1702', '"');
    expectRefused(q("section('{shop}').attribute({points}).eq(1)"), 'AUD-1702', "'");
    expectRefused(q('section(com.vendor1.sections.user-created.shop).attribute({points}).eq(1)'), 'AUD-1702', 'com');
    expectRefused(q('section(-{shop}).attribute({points}).eq(1)'), 'AUD-1702', '-');
    expectRefused(q('section({shop}.5).attribute({points}).eq(1)'), 'AUD-1702', `${id.shop}.5`);
    expectRefused(q('section().attribute({points}).eq(1)'), 'AUD-1702', ')');
    const problem = expectRefused(q('section("shop").attribute({points}).eq(1)'), 'AUD-1702', '"shop"');
    expect(problem.title).toBe('Invalid section specifier');
    expect(problem.detail).toContain('not a quoted string');
  });

  it('an attribute or event version given quoted, negative, by name or missing → AUD-1703 (AQL-13)', () => {
    expectRefused(q('section({shop}).attribute("{points}").eq(1)'), 'AUD-1703', '"');
    expectRefused(q('section({shop}).attribute(-{points}).eq(1)'), 'AUD-1703', '-');
    expectRefused(q('section({shop}).attribute(points).eq(1)'), 'AUD-1703', 'points');
    expectRefused(q('section({shop}).attribute().eq(1)'), 'AUD-1703', ').eq');
    expectRefused(q('section({shop}).event("{purchase}")'), 'AUD-1703', '"');
    expectRefused(q('section({shop}).event(-1)'), 'AUD-1703', '-1');
    // Neither attribute nor event after the section.
    expectRefused(q('section({shop}).tag(3).eq(true)'), 'AUD-1703', 'tag');
    expect(refusal(q('section({shop}).attribute("x").eq(1)')).title).toBe('Invalid attribute or event specifier');
  });

  it('eventData after an attribute, attributeData after an event, a condition on an event itself → AUD-1704 (AQL-14)', () => {
    expectRefused(q('section({shop}).attribute({address}).eventData("city").eq("Oslo")'), 'AUD-1704', 'eventData');
    expectRefused(q('section({shop}).event({purchase}).attributeData("sku").eq("A")'), 'AUD-1704', 'attributeData');
    expectRefused(q('section({shop}).event({purchase}).eq("A")'), 'AUD-1704', 'eq');
    expect(refusal(q('section({shop}).event({purchase}).attributeData("sku").eq("A")')).title).toBe(
      'Wrong data selector',
    );
  });

  it('two event() (or attribute()) in one expression → AUD-1708 (AQL-15)', () => {
    expectRefused(q('section({shop}).event({purchase}).event({purchase})'), 'AUD-1708', ['event', 1]);
    expectRefused(
      q('section({shop}).event({purchase}).eventData("sku").eq("A").event({purchase}).eventData("sku").eq("B")'),
      'AUD-1708',
      ['event(', 1],
    );
    expectRefused(q('section({shop}).attribute({points}).event({purchase})'), 'AUD-1708', 'event');
    expectRefused(q('section({shop}).attribute({points}).attribute({nickname}).eq("a")'), 'AUD-1708', ['attribute', 1]);
    expect(refusal(q('section({shop}).event({purchase}).event({purchase})')).title).toBe('Several event expressions');
    // Two event terms joined by && are two expressions, each with one event().
    expect(accept(q('section({shop}).event({purchase}) && section({club}).event({visit})'))).toMatchObject({
      kind: 'and',
    });
  });

  it('a data selector or term without condition → AUD-1705; a condition or selector without its constant → AUD-1706 (AQL-16)', () => {
    expectRefused(q('section({shop}).attribute({points})'), 'AUD-1705', '<end>');
    expectRefused(q('section({shop}).attribute({address}).attributeData("city")'), 'AUD-1705', '<end>');
    expectRefused(
      q('section({shop}).attribute({address}).attributeData("city") && section({shop}).event({purchase})'),
      'AUD-1705',
      '&&',
    );
    expectRefused(q('section({shop}).attribute({points}).between(1, 2)'), 'AUD-1705', 'between');
    expectRefused(q('section({shop}).event({purchase}).eventData("sku")'), 'AUD-1705', '<end>');
    expectRefused(
      q('section({shop}).event({purchase}).eventData("sku").inLast("events.day", 0, 1)'),
      'AUD-1705',
      'inLast',
    );
    expect(refusal(q('section({shop}).attribute({points})')).title).toBe('Missing condition');
    const empty = q('section({shop}).attribute({nickname}).eq()');
    expectRefused(empty, 'AUD-1706', empty.length - 1);
    expectRefused(q('section({shop}).attribute({nickname}).eq'), 'AUD-1706', '<end>');
    expectRefused(q('section({shop}).attribute({nickname}).eq(Anna)'), 'AUD-1706', 'Anna');
    expectRefused(q('section({shop}).attribute({nickname}).eq('), 'AUD-1706', '<end>');
    expectRefused(q('section({shop}).attribute({points}).gt(1e400)'), 'AUD-1706', '1e400');
    expectRefused(q('section({shop}).event({purchase}).eventData("amount").gt(null)'), 'AUD-1706', 'null');
    expectRefused(q('section({shop}).attribute({address}).attributeData(city).eq("Oslo")'), 'AUD-1706', 'city');
    expectRefused(q('section({shop}).event({purchase}).eventData().eq("A")'), 'AUD-1706', ').eq');
    expect(refusal(q('section({shop}).attribute({nickname}).eq()')).title).toBe('Missing string constant');
  });

  it('inLast with another unit or shape, betweenDates with other than "events" and two dates → AUD-1707 (AQL-17, AQL-18)', () => {
    const e = q('section({shop}).event({purchase})');
    expectRefused(`${e}.inLast("events.year", 0, 1)`, 'AUD-1707', '"events.year"');
    expectRefused(`${e}.inLast("events.days", 0, 1)`, 'AUD-1707', '"events.days"');
    expectRefused(`${e}.inLast("day", 0, 1)`, 'AUD-1707', '"day"');
    expectRefused(`${e}.inLast("profiles.day", 0, 1)`, 'AUD-1707', '"profiles.day"');
    expectRefused(`${e}.inLast(events.day, 0, 1)`, 'AUD-1707', 'events.day');
    expectRefused(`${e}.inLast("events.day", 1)`, 'AUD-1707', [')', -1]);
    expectRefused(`${e}.inLast("events.day")`, 'AUD-1707', [')', -1]);
    expectRefused(`${e}.inLast("events.day", 0, 1, 2)`, 'AUD-1707', ', 2');
    expectRefused(`${e}.inLast("events.day", -1, 2)`, 'AUD-1707', '-1');
    expectRefused(`${e}.inLast("events.day", 0, 1.5)`, 'AUD-1707', '1.5');
    expectRefused(`${e}.inLast("events.day", 0, "7")`, 'AUD-1707', '"7"');
    expectRefused(`${e}.inLast("events.day", 7, 0)`, 'AUD-1707', 'inLast');
    expectRefused(`${e}.inLast`, 'AUD-1707', '<end>');
    expectRefused(`${e}.inLast("events.day", 0, 1).inLast("events.week", 0, 1)`, 'AUD-1707', ['inLast', 1]);
    expectRefused(
      `${e}.betweenDates("events", "2026-01-01", "2026-02-01").inLast("events.week", 0, 1)`,
      'AUD-1707',
      'inLast',
    );
    expectRefused(`${e}.betweenDates("event", "2026-01-01", "2026-02-01")`, 'AUD-1707', '"event"');
    expectRefused(`${e}.betweenDates("2026-01-01", "2026-02-01")`, 'AUD-1707', '"2026-01-01"');
    expectRefused(`${e}.betweenDates("events", "yesterday", "2026-02-01")`, 'AUD-1707', '"yesterday"');
    expectRefused(`${e}.betweenDates("events", "2026-13-01", "2026-02-01")`, 'AUD-1707', '"2026-13-01"');
    expectRefused(`${e}.betweenDates("events", 20260101, "2026-02-01")`, 'AUD-1707', '20260101');
    expectRefused(`${e}.betweenDates("events", "2026-01-01")`, 'AUD-1707', [')', -1]);
    // A time window on an attribute.
    expectRefused(q('section({shop}).attribute({points}).inLast("events.day", 0, 1)'), 'AUD-1707', 'inLast');
    expect(refusal(`${e}.inLast("events.year", 0, 1)`).title).toBe('Invalid time-window syntax');
  });

  it('an array marker [] in a data path → AUD-1403 (AQL-21)', () => {
    expectRefused(q('section({shop}).attribute({address}).attributeData("lines[]").eq("x")'), 'AUD-1403', '"lines[]"');
    expectRefused(
      q('section({shop}).attribute({address}).attributeData("lines[0]").eq("x")'),
      'AUD-1403',
      '"lines[0]"',
    );
    expectRefused(
      q('section({shop}).event({purchase}).eventData("shipping.items[].sku").eq("x")'),
      'AUD-1403',
      '"shipping',
    );
    expectRefused(q('section({shop}).event({purchase}).eventData("items"[]).eq("x")'), 'AUD-1403', '[');
    expect(refusal(q('section({shop}).attribute({address}).attributeData("lines[]").eq("x")')).title).toBe(
      'Array types unsupported',
    );
  });

  it('a field condition on a struct node → AUD-1404 (AQL-20)', () => {
    expectRefused(q('section({shop}).attribute({address}).eq("Oslo")'), 'AUD-1404', 'eq');
    expectRefused(q('section({shop}).event({purchase}).eventData("shipping").eq("x")'), 'AUD-1404', '"shipping"');
    expect(refusal(q('section({shop}).attribute({address}).eq("Oslo")')).title).toBe(
      'Field condition on a non-primitive type',
    );
  });

  it('a data path that does not point to a field of the type → AUD-1402 (AQL-22)', () => {
    expectRefused(q('section({shop}).event({purchase}).eventData("colour").eq("red")'), 'AUD-1402', '"colour"');
    expectRefused(q('section({shop}).event({purchase}).eventData("SKU").eq("A")'), 'AUD-1402', '"SKU"');
    expectRefused(q('section({shop}).event({purchase}).eventData("sku.code").eq("A")'), 'AUD-1402', '"sku.code"');
    expectRefused(
      q('section({shop}).event({purchase}).eventData("amount").gt(1).eventData("nope").eq(1)'),
      'AUD-1402',
      '"nope"',
    );
    expectRefused(q('section({shop}).attribute({nickname}).attributeData("first").eq("A")'), 'AUD-1402', '"first"');
    expectRefused(q('section({shop}).attribute({address}).attributeData("geo..lat").eq(1)'), 'AUD-1402', '"geo..lat"');
    expectRefused(q('section({shop}).attribute({address}).attributeData("").eq(1)'), 'AUD-1402', '""');
    expect(refusal(q('section({shop}).event({purchase}).eventData("colour").eq("red")')).title).toBe('No such field');
  });

  it('a section, attribute version or event version the account does not have → AUD-1111 (SPEC §7.3 target not found)', () => {
    expectRefused(q('section(999999999).attribute({points}).eq(1)'), 'AUD-1111', '999999999');
    expectRefused(q('section({shop}).attribute(999999999).eq(1)'), 'AUD-1111', '999999999');
    expectRefused(q('section({shop}).event(999999999)'), 'AUD-1111', '999999999');
    // Ids of another section.
    expectRefused(q('section({club}).attribute({points}).eq(1)'), 'AUD-1111', id.points);
    expectRefused(q('section({shop}).event({visit})'), 'AUD-1111', id.visit);
    // An attribute version id is not an event version id.
    expectRefused(q('section({shop}).event({points})'), 'AUD-1111', id.points);
    // The first fault counts, in the second term.
    expectRefused(
      q('section({shop}).attribute({points}).eq(1) || section({shop}).attribute(999999999).eq(1)'),
      'AUD-1111',
      '999999999',
    );
  });

  it('negation, other operators and garbage → AUD-1709 unsupported expression, or AUD-1701 syntax error (AQL-23)', () => {
    const a = q('section({shop}).attribute({points}).gt(1)');
    expectRefused(`!${a}`, 'AUD-1709', '!');
    expectRefused(`${a} && !(${a})`, 'AUD-1709', '!');
    expectRefused('hello world', 'AUD-1709', 'hello');
    expectRefused(`${a} && points.gt(3)`, 'AUD-1709', 'points');
    expectRefused(`${a} || (true)`, 'AUD-1709', 'true');
    expectRefused(`${a} && 42`, 'AUD-1709', '42');
    expect(refusal('hello world').title).toBe('Unsupported expression');
    expectRefused(`${a} & ${a}`, 'AUD-1701', '&');
    expectRefused(`${a} | ${a}`, 'AUD-1701', '|');
    expectRefused(`${a} and ${a}`, 'AUD-1701', 'and');
    expectRefused(`${a} ${a}`, 'AUD-1701', ['section', 1]);
    expectRefused(`(${a}`, 'AUD-1701', '<end>');
    expectRefused(`${a})`, 'AUD-1701', [')', -1]);
    expectRefused(q('section({shop}).attribute({nickname}).eq("open'), 'AUD-1701', '"open');
    expectRefused(`${a} # comment`, 'AUD-1701', '#');
    expectRefused('', 'AUD-1701', '<end>');
    expectRefused('   ', 'AUD-1701', '<end>');
  });

  it(`more than ${MAX_TERMS} terms → AUD-1710, generated query size limit (AQL-26)`, () => {
    const terms = Array.from({ length: MAX_TERMS + 1 }, (_, i) =>
      q(i % 2 ? 'section({shop}).attribute({points}).gt(1)' : 'section({shop}).event({purchase})'),
    );
    const text = `(${terms.slice(0, 10).join(' && ')}) || ${terms.slice(10).join(' || ')}`;
    const last = text.lastIndexOf('section');
    const problem = expectRefused(text, 'AUD-1710', { line: 1, column: last + 1, character: last + 1 });
    expect(problem.title).toBe('Generated query size limit reached');
  });

  it('a constant of the wrong type for the attribute or field → AUD-1401 (SPEC §7.3 type processing error)', () => {
    expectRefused(q('section({shop}).attribute({points}).eq("100")'), 'AUD-1401', '"100"');
    expectRefused(q('section({shop}).attribute({pointsDecimal}).lt(true)'), 'AUD-1401', 'true');
    expectRefused(q('section({shop}).attribute({nickname}).eq(3)'), 'AUD-1401', ['3)', -1]);
    expectRefused(q('section({shop}).attribute({birthday}).gt(20000131)'), 'AUD-1401', '20000131');
    expectRefused(q('section({shop}).attribute({lastSeen}).gt("2026-01-01T00:00:00Z")'), 'AUD-1401', '"2026');
    expectRefused(q('section({shop}).attribute({member}).eq("true")'), 'AUD-1401', '"true"');
    expectRefused(q('section({shop}).attribute({member}).eq(1)'), 'AUD-1401', ['1)', -1]);
    expectRefused(q('section({shop}).event({purchase}).eventData("amount").gte("5")'), 'AUD-1401', '"5"');
    expectRefused(q('section({shop}).event({purchase}).eventData("sku").eq(5)'), 'AUD-1401', ['5)', -1]);
    expectRefused(q('section({shop}).event({purchase}).eventData("paid").eq("yes")'), 'AUD-1401', '"yes"');
    // true and false take only eq and neq.
    expectRefused(q('section({shop}).attribute({member}).lt(true)'), 'AUD-1401', 'lt');
    expectRefused(q('section({shop}).event({purchase}).eventData("paid").gte(false)'), 'AUD-1401', 'gte');
    // Also inside Struct values, whose layout is not defined (found by differential.test.ts: the SQL
    // back end ordered false before true, the evaluator did not).
    expectRefused(q('section({shop}).attribute({address}).attributeData("verified").lte(true)'), 'AUD-1401', 'lte');
    expectRefused(q('section({shop}).event({purchase}).eventData("shipping.express").gt(false)'), 'AUD-1401', 'gt');
    expect(accept(q('section({shop}).event({purchase}).eventData("shipping.express").neq(false)'))).toMatchObject({
      conditions: [{ comparator: 'neq', value: false }],
    });
    expect(refusal(q('section({shop}).attribute({points}).eq("100")')).title).toBe('Type processing error');
  });

  it('names line and column on multi-line queries (AQL-12, AQL-16, AQL-22)', () => {
    const text = q(
      'section({shop}).attribute({points}).gt(1)\n  && section({shop})\n    .event({purchase})\n    .eventData("colour").eq("red")',
    );
    const problem = expectRefused(text, 'AUD-1402', { line: 4, column: 16, character: text.indexOf('"colour"') + 1 });
    expect(problem.detail).toContain('colour');
    const missing = q('section({shop}).attribute({points}).gt(1) ||\n\tsection({shop}).attribute({nickname})\n');
    expectRefused(missing, 'AUD-1705', { line: 3, column: 1, character: missing.length + 1 });
    const quoted = q('section({shop}).attribute({points}).gt(1)\r\n|| section("{shop}").attribute({points}).gt(1)');
    expectRefused(quoted, 'AUD-1702', { line: 2, column: 12, character: quoted.indexOf('"') + 1 });
  });
});

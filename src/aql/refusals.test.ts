import { describe, expect, it } from 'vitest';
import { MAX_TERMS } from './check.ts';
import { accept, aqlDefinitions, expectRefused, id, q, refusal } from '../../test/aql.ts';

// Queries the parser or the checker refuses, each with its code and where.

aqlDefinitions();

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

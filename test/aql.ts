import { beforeAll, expect } from 'vitest';
import { TestServer } from './app.ts';
import { loadDefinitions } from '../src/definitions/definitions.ts';
import type { Manifest } from '../src/definitions/schemas.ts';
import { Problem } from '../src/core/problems.ts';
import type { Expression } from '../src/aql/ast.ts';
import { check } from '../src/aql/check.ts';
import { parse } from '../src/aql/parser.ts';
import type { Definitions } from '../src/core/definitions.ts';

// What the AQL parser and checker tests (src/aql/parser.test.ts, refusals.test.ts) share: the
// definitions of an account with MANIFEST, the ids of its definitions, and accepting or refusing
// a query against them.

/** Starts the test file's server and loads the definitions of an account with MANIFEST, before its tests. */
export function aqlDefinitions(): void {
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
}

/** A section with one attribute of every type and an event whose fields are typed, one of them a Struct. */
export const MANIFEST: Manifest = {
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

export let server: TestServer;
export let defs: Definitions;
/** Ids of the manifest's definitions. */
export const id = {
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

/** Replaces `{name}` by the id of that definition. */
export function q(text: string): string {
  return text.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = (id as Record<string, string>)[name];
    if (value === undefined) throw new Error(`no id ${name}`);
    return value;
  });
}

/** Parses and checks a query against the account's definitions. */
export function accept(text: string): Expression {
  const expression = parse(text);
  check(expression, defs, text);
  return expression;
}

/** The problem a query is refused with, parsing and checking it. */
export function refusal(text: string): Problem {
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
export function expectRefused(
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
  expect(problem.toJSON()).toMatchObject({ line, column, offset: character - 1 });
  return problem;
}

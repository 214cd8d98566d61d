import { Problem, type ProblemCode } from '../core/problems.ts';

/** What parsing and checking a query can answer (aqlError's codes). */
export const AQL_PROBLEMS: readonly ProblemCode[] = [
  'AUD-1111',
  'AUD-1401',
  'AUD-1402',
  'AUD-1403',
  'AUD-1404',
  'AUD-1701',
  'AUD-1702',
  'AUD-1703',
  'AUD-1704',
  'AUD-1705',
  'AUD-1706',
  'AUD-1707',
  'AUD-1708',
  'AUD-1709',
  'AUD-1710',
];

/** Line and column (1-based) of an offset in the query text. */
export function position(text: string, at: number): { line: number; column: number } {
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  return { line, column: at - before.lastIndexOf('\n') };
}

/**
 * An AQL error: a 400 problem whose detail says what is wrong and where, and which carries where
 * as members of its own (`line`, `column`, `offset`), for clients that point at it.
 */
export function aqlError(code: ProblemCode, text: string, at: number, message: string): Problem {
  const { line, column } = position(text, at);
  return new Problem(
    code,
    `AQL: ${message} at line ${line}, column ${column} (character ${at + 1})`,
    {},
    {
      line,
      column,
      offset: at,
    },
  );
}

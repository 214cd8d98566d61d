import { Problem, type ProblemCode } from '../core/problems.ts';

/** Line and column (1-based) of an offset in the query text. */
export function position(text: string, at: number): { line: number; column: number } {
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  return { line, column: at - before.lastIndexOf('\n') };
}

/** An AQL error: a 400 problem whose detail says what is wrong and where. */
export function aqlError(code: ProblemCode, text: string, at: number, message: string): Problem {
  const { line, column } = position(text, at);
  return new Problem(code, `AQL: ${message} at line ${line}, column ${column} (character ${at + 1})`);
}

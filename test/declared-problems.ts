import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { declaredIn, type Observation } from './problem-codes.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The folder where the run's servers note the problem codes their operations answer (test/problem-codes.ts). */
    problemRecord: string;
  }
}

// Declared = observed. Every operation declares the problem codes it can answer (its `errors` and
// those of its kind, `problemsOf` in src/http/operation.ts), and /openapi.json, /docs and the
// generated client show them. The servers of the tests note each code an operation answers
// (test/problem-codes.ts); at the end of the run this fails when an operation answered a code it
// does not declare (printed last), and counts the declared codes no test reached, but for those
// below (`LIST` writes them all).

/** Why AUD-1711 "segment has no version" cannot be caused where a segment is only looked up by name. */
const NO_VERSION =
  'a stored segment without a version: every segment is stored with its first version (POST /audience/segments, or a manifest, whose schema asks for one), so no request can cause it';

/**
 * Declared codes no test of the run reaches, with the reason; by code (every operation that
 * declares it) or by `operationId code`.
 */
export const UNREACHED: Record<string, string> = {
  'getAudienceSegmentsLive AUD-1711': NO_VERSION,
  'postAudienceSectionsSegmentsTrend AUD-1711': NO_VERSION,
  'putAudienceSegmentsLive AUD-1711': NO_VERSION,
  'AUD-0':
    'test/common-problems.test.ts asks it of every operation that declares it and gets it; on those of no body and no typed query it is a path whose % starts no escape, which the router answers before the operation, so this record does not see it',
  'AUD-2':
    'every operation: the database gone; test/serve-supervision.test.ts stops it under a running program, whose answers this record does not see',
};

/**
 * Codes an operation may answer without declaring them, with the reason: they are no refusal of
 * the request but its failure, which every operation's 5XX answer (the problem document) covers.
 */
export const UNDECLARED: Record<string, string> = {
  'AUD-4':
    'an internal error: declared by no operation, since none should answer it; src/http/failures.test.ts causes one on purpose, and any other fails its own test by its status',
};

/**
 * The environment variable that names a file to write the whole list of unreached codes to, one
 * `operationId AUD-…` a line (`AUDIENCE_UNREACHED_PROBLEMS=/tmp/unreached.txt npm test`); the log
 * shows only their count by code.
 */
const LIST = 'AUDIENCE_UNREACHED_PROBLEMS';

/** The unreached codes in one line: how many, and the codes most operations leave unreached, with how many. */
function summary(unreached: string[], whole: boolean): string {
  const byCode = new Map<string, number>();
  for (const line of unreached) {
    const code = line.slice(line.indexOf(' ') + 1);
    byCode.set(code, (byCode.get(code) ?? 0) + 1);
  }
  const counts = [...byCode]
    .sort(([a, m], [b, n]) => n - m || a.localeCompare(b, 'en', { numeric: true }))
    .map(([code, n]) => `${code} ×${n}`);
  const shown = counts.length > 12 ? [...counts.slice(0, 12), `${counts.length - 12} codes more`] : counts;
  // A run of some test files reaches few codes: the figure means something for a whole run.
  const scope = whole ? 'this run' : 'this run of some test files';
  return `${unreached.length} declared problem codes no test of ${scope} reached (by code: ${shown.join(', ')}); ${LIST}=<file> writes them all, UNREACHED in test/declared-problems.ts gives reasons`;
}

const DOCUMENT = path.join(import.meta.dirname, '..', 'clients', 'typescript', 'openapi.json');

/** Each operation of the committed document (the one the server serves, checked by clients/typescript/test/generated.test.ts) with its declared codes. */
async function documentedOperations(): Promise<Map<string, string[]>> {
  const document = JSON.parse(await fs.readFile(DOCUMENT, 'utf8')) as {
    paths: Record<string, Record<string, { operationId: string; description?: string }>>;
  };
  const operations = new Map<string, string[]>();
  for (const methods of Object.values(document.paths))
    for (const op of Object.values(methods)) operations.set(op.operationId, declaredIn(op.description));
  return operations;
}

export default async function setup(project: TestProject) {
  const folder = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-problems-'));
  project.provide('problemRecord', folder);
  return async () => {
    const observations: Observation[] = [];
    for (const name of await fs.readdir(folder))
      for (const line of (await fs.readFile(path.join(folder, name), 'utf8')).split('\n'))
        if (line) observations.push(JSON.parse(line));
    await fs.rm(folder, { recursive: true, force: true });
    if (observations.length === 0) return;

    const declared = await documentedOperations();
    const reached = new Map<string, Set<string>>();
    const undeclared = new Set<string>();
    for (const o of observations) {
      if (!declared.has(o.operation)) declared.set(o.operation, o.declared);
      if (!reached.has(o.operation)) reached.set(o.operation, new Set());
      reached.get(o.operation)!.add(o.code);
      if (!o.declared.includes(o.code) && !UNDECLARED[o.code]) undeclared.add(`${o.operation} ${o.code}`);
    }
    const unreached: string[] = [];
    for (const [operation, codes] of [...declared].sort(([a], [b]) => a.localeCompare(b)))
      for (const code of codes)
        if (!reached.get(operation)?.has(code) && !UNREACHED[code] && !UNREACHED[`${operation} ${code}`])
          unreached.push(`${operation} ${code}`);
    const whole = [...declared.keys()].every((operation) => reached.has(operation));
    if (unreached.length > 0) console.log(summary(unreached, whole));
    const list = process.env[LIST];
    if (list) await fs.writeFile(list, unreached.map((line) => `${line}\n`).join(''));
    // Printed last, so that a run's log ends with it. Vitest only logs an error of a teardown, and
    // one thrown would skip the teardowns after it (the database's): the run fails by its exit code.
    if (undeclared.size > 0) {
      console.error(
        `FAIL declared = observed: operations answered problem codes they do not declare (add them to the operation's errors, or fix the code):\n  ${[...undeclared].sort().join('\n  ')}`,
      );
      process.exitCode = 1;
    }
  };
}

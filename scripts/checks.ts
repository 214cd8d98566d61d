/**
 * The checks `npm test` makes before vitest, all at once: the type checks of the service and of the
 * console, the format check, the OpenAPI lint and the bundle the tests' programs run. None needs
 * another's result, and one after the other they took 31 s of a quiet 2-core machine, most of it
 * `tsc` and prettier, a core each (docs/benchmarks.md "Test suite"). Each one's output is printed
 * whole when it ends, under its command; `node scripts/checks.ts` exits 1 if any failed.
 *
 * Written here rather than taken from a package (concurrently, npm-run-all2): a spawn per command
 * and an exit code is all it takes.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');

/** What is checked: a name and the command line, run from the repository's root. */
export const CHECKS: { name: string; command: string[] }[] = [
  { name: 'tsc -p .', command: [path.join(BIN, 'tsc'), '-p', '.'] },
  { name: 'tsc -p web/console', command: [path.join(BIN, 'tsc'), '-p', 'web/console'] },
  { name: 'format:check', command: ['npm', 'run', '--silent', 'format:check'] },
  { name: 'lint:openapi', command: ['npm', 'run', '--silent', 'lint:openapi'] },
  // The bundle the tests' `bin/audience` programs load: made here, before any of them starts.
  { name: 'bundle', command: [process.execPath, path.join(ROOT, 'src', 'bundle.js')] },
];

/** Runs a command to its end: its exit code (1 when it could not start) and its output, both streams in order. */
function runCheck(command: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command[0], command.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('error', (err) => resolve({ code: 1, output: `${output}${err.message}\n` }));
    child.once('close', (code, signal) =>
      resolve({ code: code ?? 1, output: signal ? `${output}killed by ${signal}\n` : output }),
    );
  });
}

const started = Date.now();
const results = await Promise.all(
  CHECKS.map(async (check) => {
    const result = await runCheck(check.command);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    process.stdout.write(
      `── ${check.name}: ${result.code === 0 ? 'passed' : `failed (exit ${result.code})`}, ${seconds} s\n`,
    );
    if (result.output.trim() !== '') process.stdout.write(`${result.output.trimEnd()}\n`);
    return { ...check, ...result };
  }),
);
const failed = results.filter((r) => r.code !== 0);
if (failed.length > 0) {
  process.stderr.write(`Failed: ${failed.map((f) => f.name).join(', ')}\n`);
  process.exit(1);
}

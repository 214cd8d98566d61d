import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

// What a test file makes outside its database (folders in the temporary folder, processes) is
// undone when the file ends, whether its tests passed or failed: test/clean-up.ts runs the
// clean-ups registered here after the file's own hooks, newest first. `.ci/run` fails on anything
// a test run leaves in the temporary folder.

const cleanUps: (() => Promise<unknown>)[] = [];

/** Runs `cleanUp` when the test file ends (after its own afterAll hooks). */
export function atFileEnd(cleanUp: () => Promise<unknown>): void {
  cleanUps.push(cleanUp);
}

/** A new folder in the temporary folder, removed with its contents when the test file ends. */
export async function scratchFolder(prefix: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  // Retried: a program's database may still be writing its last files as the program exits.
  atFileEnd(() => fs.rm(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 }));
  return dir;
}

/** Runs the registered clean-ups, newest first (a process goes before the folder it used). */
export async function cleanUpFile(): Promise<void> {
  const failures: unknown[] = [];
  for (const cleanUp of cleanUps.splice(0).reverse()) await cleanUp().catch((err) => failures.push(err));
  if (failures.length > 0) throw new AggregateError(failures, 'cleaning up after the test file failed');
}

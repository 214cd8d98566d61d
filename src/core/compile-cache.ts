import module from 'node:module';
import path from 'node:path';

/*
 * Node's compile cache keeps the program's modules (their TypeScript with the types stripped, and
 * V8's code cache of each, the service's and its packages') between starts; Node checks each entry
 * against its source, so an edited file is compiled again. The entry, src/main.js, turns it on for
 * the process's main thread; without it a start strips and compiles some 600 modules again (about
 * 1 s more CPU for `serve` on the project's 2-core machine, docs/benchmarks.md "Start").
 */

/**
 * What a worker thread's environment needs for the thread to use the same cache from its first
 * module on (each thread of a process turns it on for itself): nothing when it is off.
 */
export function compileCacheEnvironment(): Record<string, string> {
  // The folder the entry gave, without the folder Node adds for its version.
  const dir = module.getCompileCacheDir();
  return dir ? { NODE_COMPILE_CACHE: path.dirname(dir) } : {};
}

/**
 * Writes what this thread compiled so far to the cache (Node would write it only when the thread
 * ends, and a process that is killed never does): called once a start is over.
 */
export function flushCompileCache(): void {
  module.flushCompileCache();
}

// The program's entry (bin/audience runs it), in JavaScript on purpose: Node strips the types of a
// TypeScript file with a compiler (amaro, WebAssembly) that it loads at the first such file, 0.2 s of
// CPU or more. Node's compile cache, turned on here before any of the program's TypeScript is
// read, keeps every module stripped and compiled from one start to the next, so that a start loads
// no compiler at all (src/core/compile-cache.ts, docs/benchmarks.md "Start").
import fs from 'node:fs';
import module from 'node:module';
import path from 'node:path';

// Beside the installed packages, a folder the program owns (not the shared temporary folder). Not
// when the operator's NODE_COMPILE_CACHE did it already or NODE_DISABLE_COMPILE_CACHE forbids it,
// when the packages are not installed here, or when the folder cannot be written (a read-only
// image): the program then starts as before, compiling.
const modules = path.join(import.meta.dirname, '..', 'node_modules');
if (fs.existsSync(modules)) {
  try {
    module.enableCompileCache(path.join(modules, '.cache', 'audience'));
  } catch {
    // A cache only saves time: the start goes on without it.
  }
}
// The bundled program (src/bundle.js), made by `npm ci` or at the first start that finds none of
// the current sources; the sources where it cannot be made, or with AUDIENCE_BUNDLE=0.
const bundled = process.env.AUDIENCE_BUNDLE === '0' ? undefined : await import('./bundle.js');
const entry = await bundled?.bundle();
if (entry) {
  // Stack traces name the source files and lines.
  bundled.mapStackTraces();
  await import(entry);
} else await import('./cli.ts');

// The program bundled: one file per entry (the command line, the worker thread, the Excel thread)
// and the chunks of what they load later, instead of some 900 modules (the service's and its
// packages'). Loading that many took most of a start's CPU even from Node's compile cache: the
// loader resolves, instantiates and evaluates each (docs/benchmarks.md "Start"). JavaScript on
// purpose, as src/main.js, which asks for it before any TypeScript is loaded.
//
// The bundle lives beside the installed packages (node_modules/.cache/audience/bundle), is made
// by `npm ci` (the package's prepare script) and again at the first start after a source file,
// package.json or the installed packages changed, with rolldown (the bundler vitest installs).
// Where it cannot be made (rolldown not installed, a read-only image, a failed build) the program
// runs its sources as before. AUDIENCE_BUNDLE=0 runs the sources. Each module's own place stays
// what import.meta and __dirname say in it (the migrations, the console's files, a package's
// assets are found beside their module), and source maps make stack traces name the sources.
import fs from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(import.meta.dirname, '..');
const MODULES = path.join(ROOT, 'node_modules');
const HOME = path.join(MODULES, '.cache', 'audience', 'bundle');
/** The file naming the current build's folder; builds are never changed in place. */
const CURRENT = path.join(HOME, 'current.json');
/** What is bundled: the program's entry and the modules it starts threads on. */
const ENTRIES = {
  cli: 'src/cli.ts',
  'thread-entry': 'src/worker/thread-entry.ts',
  'xlsx-thread': 'src/exports/xlsx-thread.ts',
};
/** Builds kept: a process still running an older one loads its later chunks from it. */
const KEEP = 3;
/** Written when a build failed, with its reason. */
const FAILED = path.join(HOME, 'failed.json');
const LOCK_MS = 120_000;
/** npm's record of the installed tree, which an install or a removal of a package writes. */
const INSTALLED = path.join(MODULES, '.package-lock.json');

/**
 * The bundled command line's file when a build of the current sources is there, else undefined.
 * A build lists the files it was made of (the packages as npm's record of the installed tree);
 * it is current while none of them changed after it (a stat of some 150 files, 2–5 ms).
 */
export function currentBundle() {
  let build;
  try {
    build = JSON.parse(fs.readFileSync(CURRENT, 'utf8'));
  } catch {
    return undefined;
  }
  if (build.root !== ROOT) return undefined;
  for (const file of build.inputs) {
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (!stat || stat.mtimeMs > build.builtAt) {
      // npm's record of the installed tree is written again when the development packages go
      // (`npm prune --omit=dev`, as the container image does): the bundle holds none of them.
      if (stat && file === INSTALLED && build.packages === productionPackages()) continue;
      return undefined;
    }
  }
  return path.join(HOME, build.dir, 'cli.js');
}

/** The installed packages that are not only development ones, with their versions, in one line. */
function productionPackages() {
  try {
    const { packages } = JSON.parse(fs.readFileSync(INSTALLED, 'utf8'));
    return Object.entries(packages)
      .filter(([, p]) => !p.dev)
      .map(([at, p]) => `${at}@${p.version}`)
      .sort()
      .join(' ');
  } catch {
    return undefined;
  }
}

/**
 * The bundle of the current sources, built now when there is none: undefined when it cannot be
 * made (said once on standard error, and not tried again until a source changes) or while another
 * process builds it (this one runs the sources meanwhile).
 */
export async function bundle() {
  const current = currentBundle();
  if (current) return current;
  if (!fs.existsSync(MODULES) || failedBefore()) return undefined;
  const lock = path.join(HOME, 'building');
  try {
    fs.mkdirSync(HOME, { recursive: true });
    // A build takes seconds; a lock older than LOCK_MS is a killed build's.
    const since = fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
    if (since !== undefined && Date.now() - since < LOCK_MS) return undefined;
    fs.writeFileSync(lock, String(process.pid));
  } catch {
    // A read-only image: the sources.
    return undefined;
  }
  try {
    return await buildBundle();
  } catch (err) {
    const failed = { at: Date.now(), error: String(err?.message ?? err).split('\n')[0] };
    process.stderr.write(`audience: running the sources; the bundle could not be made: ${failed.error}\n`);
    fs.writeFileSync(FAILED, JSON.stringify(failed));
    return undefined;
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

/** A build failed after every source file's last change: not tried again until one changes. */
function failedBefore() {
  const at = fs.statSync(FAILED, { throwIfNoEntry: false })?.mtimeMs;
  if (at === undefined) return false;
  const sources = [import.meta.filename, path.join(ROOT, 'package.json'), INSTALLED];
  for (const dir of fs.readdirSync(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true }))
    if (dir.isFile()) sources.push(path.join(dir.parentPath, dir.name));
  return sources.every((file) => (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0) <= at);
}

/** Builds the bundle (a new folder, then current.json pointed at it); throws when it cannot. */
export async function buildBundle() {
  const { rolldown } = await import('rolldown');
  // Files changed from here on make the build stale: it may have read them before or after.
  const builtAt = Date.now();
  const dir = `build-${builtAt}-${process.pid}`;
  const out = path.join(HOME, dir);
  const entries = Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, path.join(ROOT, file)]));
  const entryNames = new Map(Object.entries(entries).map(([name, file]) => [file, name]));
  const bundle = await rolldown({
    input: entries,
    platform: 'node',
    // Native addons and what the packages only look for when it is there.
    external: [/\.node$/, 'pg-native', 'cloudflare:sockets'],
    logLevel: 'silent',
    plugins: [{ name: 'audience-places', transform: (code, id) => keepPlaces(code, id, entryNames) }],
  });
  let written;
  try {
    written = await bundle.write({
      dir: out,
      format: 'esm',
      sourcemap: true,
      entryFileNames: '[name].js',
      chunkFileNames: '[name]-[hash].js',
      // Without comments and whitespace, and in ASCII (other characters escaped): a start reads
      // and decodes each chunk it loads into text, and text with a single character beyond ASCII
      // is decoded and scanned as two-byte; names stay as written (no mangling, no compression),
      // for profiles and `name`. A tenth less CPU to ready for `emulate` (docs/benchmarks.md
      // "Start"). The packages' licences stay in their folders.
      comments: { jsdoc: false, legal: false, annotation: false },
      minify: { compress: false, mangle: false, codegen: { removeWhitespace: true, asciiOnly: true } },
      // A thread's entry maps its own stack traces (src/main.js does for the command line's).
      banner: (chunk) =>
        chunk.isEntry && chunk.name !== 'cli'
          ? `import { mapStackTraces } from ${JSON.stringify(import.meta.url)}; mapStackTraces();`
          : '',
    });
  } finally {
    await bundle.close();
  }
  // The chunks are ES modules, and say so: a .js file under node_modules with no package.json
  // of its own is taken for CommonJS, compiled as such, and compiled again as an ES module once
  // that fails (loading the service's chunks took 0.15 s more CPU of some 0.5 s).
  fs.writeFileSync(path.join(out, 'package.json'), '{ "type": "module" }\n');
  const inputs = new Set([import.meta.filename, path.join(ROOT, 'package.json'), INSTALLED]);
  for (const chunk of written.output)
    if (chunk.type === 'chunk')
      for (const id of chunk.moduleIds) if (path.isAbsolute(id) && !id.startsWith(MODULES)) inputs.add(id);
  const next = `${CURRENT}.${process.pid}`;
  fs.writeFileSync(
    next,
    JSON.stringify({ root: ROOT, dir, builtAt, inputs: [...inputs], packages: productionPackages() }),
  );
  fs.renameSync(next, CURRENT);
  // The oldest builds go (by their time in the name).
  const builds = fs
    .readdirSync(HOME)
    .filter((name) => name.startsWith('build-') && name !== dir)
    .sort((a, b) => Number(b.split('-')[1]) - Number(a.split('-')[1]));
  for (const old of builds.slice(KEEP - 1)) fs.rmSync(path.join(HOME, old), { recursive: true, force: true });
  return path.join(out, 'cli.js');
}

/**
 * A module's code with what names its own place written out: import.meta.url, .dirname and
 * .filename, and a CommonJS module's __dirname and __filename, become the source file's; a
 * thread started on another entry's file (new URL('./thread-entry.ts', import.meta.url)) starts
 * on that entry's bundled file, beside the chunk.
 */
function keepPlaces(code, id, entryNames) {
  if (!path.isAbsolute(id) || !/import\.meta|__dirname|__filename/.test(code)) return null;
  const quoted = (value) => JSON.stringify(value);
  const chunkUrl = '__audience_chunk_url__';
  let kept = code.replace(/new URL\((['"])(\.[^'"]+)\1, import\.meta\.url\)/g, (whole, _quote, relative) => {
    const name = entryNames.get(path.resolve(path.dirname(id), relative));
    return name ? `new URL(${quoted(`./${name}.js`)}, ${chunkUrl})` : whole;
  });
  kept = kept
    .replace(/\bimport\.meta\.url\b/g, quoted(pathToFileURL(id).href))
    .replace(/\bimport\.meta\.dirname\b/g, quoted(path.dirname(id)))
    .replace(/\bimport\.meta\.filename\b/g, quoted(id))
    .replaceAll(chunkUrl, 'import.meta.url');
  // A CommonJS module's own (an ES module that uses them declares them), on its first line.
  const declared = (name) => new RegExp(`\\b(var|let|const|function)\\s+${name}\\b`).test(kept);
  if (/\b__dirname\b/.test(kept) && !declared('__dirname'))
    kept = `var __dirname = ${quoted(path.dirname(id))}; ${kept}`;
  if (/\b__filename\b/.test(kept) && !declared('__filename')) kept = `var __filename = ${quoted(id)}; ${kept}`;
  // Lines are kept, so the source map still names each line of the source.
  return kept === code ? null : { code: kept };
}

/**
 * Stack traces that name the sources: a frame in a bundled file is looked up in that file's source
 * map, read at the first stack that needs it. Node's own (--enable-source-maps) reads and indexes
 * every map as its module loads, 20 MB of them here: a tenth of a start's CPU.
 */
export function mapStackTraces() {
  const home = pathToFileURL(HOME).href;
  const maps = new Map();
  const mapOf = (file) => {
    if (!maps.has(file))
      try {
        maps.set(file, new module.SourceMap(JSON.parse(fs.readFileSync(`${fileURLToPath(file)}.map`, 'utf8'))));
      } catch {
        maps.set(file, undefined);
      }
    return maps.get(file);
  };
  const mapped = (frame) => {
    const text = String(frame);
    const file = frame.getFileName();
    if (!file?.startsWith(home)) return text;
    const [line, column] = [frame.getLineNumber(), frame.getColumnNumber()];
    const origin = mapOf(file)?.findOrigin(line, column);
    if (!origin?.fileName) return text;
    const source = fileURLToPath(new URL(origin.fileName, file));
    return text.replace(`${file}:${line}:${column}`, `${source}:${origin.lineNumber}:${origin.columnNumber}`);
  };
  Error.prepareStackTrace = (error, frames) => {
    let head;
    try {
      head = Error.prototype.toString.call(error);
    } catch {
      head = 'Error';
    }
    return head + frames.map((frame) => `\n    at ${mapped(frame)}`).join('');
  };
}

// `node src/bundle.js` (npm ci runs it, as the package's prepare script, and npm test): builds the
// bundle now, when it is not current, rather than at the next start. Never fails: the program runs
// its sources without it.
if (process.argv[1] === import.meta.filename) {
  const started = performance.now();
  const current = currentBundle();
  try {
    const built = current ?? (await buildBundle());
    console.log(
      current
        ? `audience: the bundle in ${path.dirname(current)} is current`
        : `audience: bundled into ${path.dirname(built)} in ${Math.round(performance.now() - started)} ms`,
    );
  } catch (err) {
    console.log(`audience: not bundled (the program runs its sources): ${String(err?.message ?? err).split('\n')[0]}`);
  }
}

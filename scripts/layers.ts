/**
 * Checks the layers of src/ (docs/architecture.md "Layers"): every import points to the same
 * layer or a lower one, the two transports (HTTP and the worker) do not import each other, no import
 * cycle between files, and none between area folders. Test files are not checked: they may
 * reach any layer. `node scripts/layers.ts` prints what breaks the rules and exits 1 if anything
 * does; the test suite runs the same check (test/layers.test.ts).
 *
 * Written here rather than taken from a package (madge, dependency-cruiser): the rules are this
 * project's own, and reading relative imports of .ts files takes a regular expression.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The layers, lowest first. A module not matched by a rule is an area: a new area folder gets the area rule. */
export const LAYERS = [
  { name: 'core', matches: (m: string) => m.startsWith('core/') || m.startsWith('store/') },
  {
    name: 'library',
    matches: (m: string) =>
      m.startsWith('aql/') || m.startsWith('files/') || m.startsWith('outbound/') || m.startsWith('jobs/'),
  },
  { name: 'area', matches: (_m: string) => false },
  { name: 'services', matches: (m: string) => m === 'services.ts' || m === 'config.ts' },
  { name: 'transport', matches: (m: string) => m.startsWith('http/') || m.startsWith('worker/') },
  { name: 'program', matches: (m: string) => m === 'cli.ts' || m === 'server.ts' || m === 'emulate.ts' },
] as const;

export type LayerName = (typeof LAYERS)[number]['name'];

/** The layer of a module, by its path relative to src/. */
export function layerOf(module: string): LayerName {
  return (LAYERS.find((l) => l.matches(module)) ?? LAYERS[2]).name;
}

const rank = (module: string) => LAYERS.findIndex((l) => l.name === layerOf(module));

/** The folder of an area module (`profiles/attributes.ts` → `profiles`); undefined outside the area layer. */
function areaOf(module: string): string | undefined {
  return layerOf(module) === 'area' && module.includes('/') ? module.slice(0, module.indexOf('/')) : undefined;
}

/** A module's text without its comments (block comments, and lines that are a line comment). */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

/** The relative imports of a module's text, type-only and re-exports included, comments left out. */
export function importsOf(text: string): string[] {
  const code = withoutComments(text);
  const specs = [
    ...code.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms),
    ...code.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
    ...code.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]);
  return specs.filter((s) => s.startsWith('.'));
}

/** Every non-test .ts module below `srcDir`, as paths relative to it, with the modules it imports. */
export function readGraph(srcDir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.endsWith('.d.ts')) {
        const module = path.relative(srcDir, full).split(path.sep).join('/');
        const imports = importsOf(fs.readFileSync(full, 'utf8')).map((spec) =>
          path
            .relative(srcDir, path.resolve(path.dirname(full), spec))
            .split(path.sep)
            .join('/'),
        );
        graph.set(module, imports);
      }
    }
  };
  walk(srcDir);
  return graph;
}

/** The strongly connected components of more than one node (or a node importing itself): the cycles (Tarjan). */
export function cyclesOf(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return cycles;
}

/** Every break of the rules in the modules below `srcDir`, one line each; empty when the layers hold. */
export function checkLayers(srcDir: string): string[] {
  const graph = readGraph(srcDir);
  const faults: string[] = [];
  const areaGraph = new Map<string, string[]>();
  for (const [module, imports] of graph) {
    for (const target of imports) {
      if (rank(target) > rank(module)) {
        faults.push(
          `${module} (${layerOf(module)}) imports ${target} (${layerOf(target)}): imports point to the same layer or a lower one`,
        );
      }
      if (
        layerOf(module) === 'transport' &&
        layerOf(target) === 'transport' &&
        module.split('/')[0] !== target.split('/')[0]
      ) {
        faults.push(`${module} imports ${target}: the HTTP layer and the worker do not import each other`);
      }
      const [from, to] = [areaOf(module), areaOf(target)];
      if (from && to && from !== to) areaGraph.set(from, [...new Set([...(areaGraph.get(from) ?? []), to])]);
    }
  }
  for (const cycle of cyclesOf(graph)) faults.push(`import cycle between files: ${cycle.join(' ↔ ')}`);
  for (const area of areaGraph.keys()) if (!areaGraph.has(area)) areaGraph.set(area, []);
  for (const cycle of cyclesOf(areaGraph)) faults.push(`import cycle between areas: ${cycle.join(' ↔ ')}`);
  return faults;
}

/**
 * The owners of the tables that no statement inserts into by name: their statements choose the
 * table at run time. Every other table's owner is found in the code (tableOwners).
 */
export const DECLARED_OWNERS: Record<string, string> = {
  attribute_versions: 'definitions',
  event_versions: 'definitions',
};

/**
 * The folder below `srcDir` that owns each table the migrations create (`store/migrations/*.sql`):
 * the one whose code inserts into it (`insert into <table>`), or that DECLARED_OWNERS names. A table
 * with no owner, or inserted into from two folders, is a fault.
 */
export function tableOwners(
  srcDir: string,
  declared: Record<string, string> = DECLARED_OWNERS,
): { owners: Map<string, string>; faults: string[] } {
  const migrations = path.join(srcDir, 'store/migrations');
  const tables = fs
    .readdirSync(migrations)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .flatMap((f) =>
      [...fs.readFileSync(path.join(migrations, f), 'utf8').matchAll(/\bcreate table (?:if not exists )?(\w+)/gi)].map(
        (m) => m[1].toLowerCase(),
      ),
    );
  const code = [...readGraph(srcDir).keys()].map((module) => ({
    module,
    text: withoutComments(fs.readFileSync(path.join(srcDir, module), 'utf8')),
  }));
  const owners = new Map<string, string>();
  const faults: string[] = [];
  for (const table of tables) {
    const writers = [
      ...new Set(
        code.filter((c) => new RegExp(`\\binsert into ${table}\\b`).test(c.text)).map((c) => c.module.split('/')[0]),
      ),
    ];
    if (declared[table] !== undefined) writers.splice(0, writers.length, declared[table]);
    if (writers.length === 1) owners.set(table, writers[0]);
    else if (writers.length === 0)
      faults.push(
        `table ${table}: no module inserts into it by name; name its owner in DECLARED_OWNERS (scripts/layers.ts)`,
      );
    else
      faults.push(
        `table ${table}: inserted into by ${writers.join(' and ')}; one area owns a table, the others call its functions`,
      );
  }
  return { owners, faults };
}

/**
 * Every area module that names, in its SQL, a table another folder owns: an area uses another's
 * functions, never its tables (docs/architecture.md "Layers"). SQL is written in lower case, so a
 * table counts where `from`, `join`, `into`, `update` or `table` stands before its name, outside
 * comments; a name that the module gives a CTE of its own (`name as (`) is not a table there.
 */
export function checkTables(srcDir: string, declared: Record<string, string> = DECLARED_OWNERS): string[] {
  const { owners, faults } = tableOwners(srcDir, declared);
  for (const module of readGraph(srcDir).keys()) {
    const area = areaOf(module);
    if (area === undefined) continue;
    const code = withoutComments(fs.readFileSync(path.join(srcDir, module), 'utf8'));
    const ctes = new Set([...code.matchAll(/\b(\w+) as (?:materialized |not materialized )?\(/g)].map((m) => m[1]));
    const named = new Set([...code.matchAll(/\b(?:from|join|into|update|table)\s+(\w+)\b/g)].map((m) => m[1]));
    for (const table of [...named].sort()) {
      const owner = owners.get(table);
      if (owner !== undefined && owner !== area && !ctes.has(table)) {
        faults.push(
          `${module} names the table ${table} of ${owner}: areas use each other's exported functions (or SQL relations), never their tables`,
        );
      }
    }
  }
  return faults;
}

if (import.meta.main) {
  const src = path.resolve(import.meta.dirname, '../src');
  const faults = [...checkLayers(src), ...checkTables(src)];
  for (const fault of faults) console.log(fault);
  console.log(
    faults.length === 0
      ? 'layers hold: no upward import, no cycle, no table of another area'
      : `${faults.length} faults`,
  );
  process.exitCode = faults.length === 0 ? 0 : 1;
}

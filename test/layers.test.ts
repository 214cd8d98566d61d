import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLayers, checkTables, importsOf, layerOf } from '../scripts/layers.ts';

// The layers of docs/architecture.md, checked over the real source tree and over a made-up one
// that breaks each rule, so that a check that found nothing would fail here.

/** A made-up tree of `files` (path → text) in a folder of its own for the tests of the calling describe; answers its folder. */
function madeUpTree(files: Record<string, string>): () => string {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layers-'));
    for (const [file, text] of Object.entries(files)) {
      await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await fs.writeFile(path.join(dir, file), text);
    }
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));
  return () => dir;
}
describe('the layers of src/', () => {
  it('hold: imports point down, HTTP and the worker apart, no cycle between files or areas', () => {
    expect(checkLayers(path.resolve(import.meta.dirname, '../src'))).toEqual([]);
  });

  it('hold for tables: each has one owner, and no area names the table of another', () => {
    expect(checkTables(path.resolve(import.meta.dirname, '../src'))).toEqual([]);
  });

  it('place each module: core, library, areas (new folders too), services, transport, program', () => {
    expect(
      [
        'core/problems.ts',
        'store/pool.ts',
        'aql/parser.ts',
        'files/s3.ts',
        'outbound/outbound.ts',
        'jobs/queue.ts',
        'profiles/profiles.ts',
        'exports/exports.ts',
        'services.ts',
        'http/app.ts',
        'worker/worker.ts',
        'server.ts',
      ].map(layerOf),
    ).toEqual([
      'core',
      'core',
      'library',
      'library',
      'library',
      'library',
      'area',
      'area',
      'services',
      'transport',
      'transport',
      'program',
    ]);
  });

  it('reads type-only, multi-line, re-exported and dynamic imports, and not those in comments', () => {
    const text = [
      "import type { A } from './a.ts';",
      'import {',
      '  B,',
      "} from '../b.ts';",
      "export { C } from './c.ts';",
      "const d = await import('./d.ts');",
      "// import { E } from './e.ts';",
      "import pg from 'pg';",
    ].join('\n');
    expect(importsOf(text)).toEqual(['./a.ts', '../b.ts', './c.ts', './d.ts']);
  });

  describe('in a tree that breaks every rule', () => {
    const dir = madeUpTree({
      'core/problems.ts': "import type { S } from '../http/app.ts';\n",
      'http/app.ts': "import { w } from '../worker/worker.ts';\n",
      'worker/worker.ts': 'export const w = 1;\n',
      'profiles/profiles.ts': "import { c } from '../consents/consents.ts';\n",
      'consents/consents.ts': "import { p } from '../profiles/keys.ts';\n",
      'profiles/keys.ts': 'export const p = 1;\n',
      'aql/a.ts': "import { b } from './b.ts';\n",
      'aql/b.ts': "import { a } from './a.ts';\n",
      'aql/b.test.ts': "import { x } from '../http/app.ts';\n",
    });

    it('names each fault, and leaves tests out', () => {
      const faults = checkLayers(dir());
      expect(faults).toEqual(
        expect.arrayContaining([
          'core/problems.ts (core) imports http/app.ts (transport): imports point to the same layer or a lower one',
          'http/app.ts imports worker/worker.ts: the HTTP layer and the worker do not import each other',
          'import cycle between files: aql/a.ts ↔ aql/b.ts',
          'import cycle between areas: consents ↔ profiles',
        ]),
      );
      expect(faults).toHaveLength(4);
    });
  });
});

describe('the table check', () => {
  const dir = madeUpTree({
    'store/migrations/0001_a.sql':
      'create table things (account_id bigint);\ncreate table notes (account_id bigint);\n',
    'store/migrations/0002_b.sql':
      'create table shared (account_id bigint);\ncreate table orphans (account_id bigint);\ncreate table chosen (account_id bigint);\n',
    'things/queries.ts':
      "export const a = 'insert into things (account_id) values ($1)';\nexport const s = 'insert into shared (account_id) values ($1)';\n",
    'notes/queries.ts': [
      "export const b = 'insert into notes (account_id) values ($1)';",
      "export const s = 'insert into shared (account_id) values ($1)';",
      "export const c = 'select n.* from notes n join things t using (account_id)';",
      '// select * from things, in a comment',
      "export const d = 'with chosen as (select 1) select * from chosen';",
      "export const e = 'Update things through the things area';",
    ].join('\n'),
  });

  it("finds owners by their inserts or the declared list, and names a read of another area's table, not comments, CTEs or prose", () => {
    expect(checkTables(dir(), { chosen: 'things' })).toEqual([
      'table shared: inserted into by notes and things; one area owns a table, the others call its functions',
      'table orphans: no module inserts into it by name; name its owner in DECLARED_OWNERS (scripts/layers.ts)',
      "notes/queries.ts names the table things of things: areas use each other's exported functions (or SQL relations), never their tables",
    ]);
  });
});

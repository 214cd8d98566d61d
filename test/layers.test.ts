import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLayers, importsOf, layerOf } from '../scripts/layers.ts';

// The layers of docs/architecture.md, checked over the real source tree and over a made-up one
// that breaks each rule, so that a check that found nothing would fail here.
describe('the layers of src/', () => {
  it('hold: imports point down, HTTP and jobs apart, no cycle between files or areas', () => {
    expect(checkLayers(path.resolve(import.meta.dirname, '../src'))).toEqual([]);
  });

  it('place each module: core, library, areas (new folders too), services, transport, program', () => {
    expect(['core/problems.ts', 'store/pool.ts', 'aql/parser.ts', 'files/s3.ts', 'outbound/outbound.ts', 'jobs/queue.ts', 'profiles/profiles.ts', 'exports/exports.ts', 'services.ts', 'http/app.ts', 'jobs/worker.ts', 'server.ts'].map(layerOf))
      .toEqual(['core', 'core', 'library', 'library', 'library', 'library', 'area', 'area', 'services', 'transport', 'transport', 'program']);
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
    let dir: string;
    const write = async (file: string, text: string) => {
      await fs.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await fs.writeFile(path.join(dir, file), text);
    };
    beforeAll(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layers-'));
      await write('core/problems.ts', "import type { S } from '../http/app.ts';\n");
      await write('http/app.ts', "import { w } from '../jobs/worker.ts';\n");
      await write('jobs/worker.ts', "export const w = 1;\n");
      await write('profiles/profiles.ts', "import { c } from '../consents/consents.ts';\n");
      await write('consents/consents.ts', "import { p } from '../profiles/keys.ts';\n");
      await write('profiles/keys.ts', "export const p = 1;\n");
      await write('aql/a.ts', "import { b } from './b.ts';\n");
      await write('aql/b.ts', "import { a } from './a.ts';\n");
      await write('aql/b.test.ts', "import { x } from '../http/app.ts';\n");
    });
    afterAll(() => fs.rm(dir, { recursive: true, force: true }));

    it('names each fault, and leaves tests out', () => {
      const faults = checkLayers(dir);
      expect(faults).toEqual(expect.arrayContaining([
        'core/problems.ts (core) imports http/app.ts (transport): imports point to the same layer or a lower one',
        'http/app.ts imports jobs/worker.ts: the HTTP layer and the jobs layer do not import each other',
        'import cycle between files: aql/a.ts ↔ aql/b.ts',
        'import cycle between areas: consents ↔ profiles',
      ]));
      expect(faults).toHaveLength(4);
    });
  });
});

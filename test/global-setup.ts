import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedDatabase } from '../src/store/embedded.ts';
import { migrate } from '../src/store/migrate.ts';
import { createPool } from '../src/store/pool.ts';
import { createDatabase, dropDatabase, freezeTemplate, workerNodes } from './databases.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Server URL of the test PostgreSQL; database `audience_template` holds the migrated schema. */
    databaseUrl: string;
    /** Whether that server is the coordinator of a Citus cluster (npm run test:citus). */
    citus: boolean;
  }
}

export const TEMPLATE = 'audience_template';

/**
 * Starts one PostgreSQL for the whole run (DATABASE_URL when set: one PostgreSQL or a Citus
 * coordinator; else the embedded one) and migrates a template database that each test file clones.
 */
export default async function setup(project: TestProject) {
  let dir: string | undefined;
  let stop = async () => {};
  let url = process.env.DATABASE_URL;
  if (!url) {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-test-'));
    const db = await startEmbeddedDatabase(dir, { persistent: false, throwaway: true });
    url = db.url;
    stop = db.stop;
  }
  await dropDatabase(url, TEMPLATE);
  const pool = createPool(await createDatabase(url, TEMPLATE), 2);
  await migrate(pool);
  await pool.end();
  await freezeTemplate(url, TEMPLATE);
  project.provide('databaseUrl', url);
  project.provide('citus', (await workerNodes(url)).length > 0);
  return async () => {
    await stop();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  };
}

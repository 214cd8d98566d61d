import { afterAll, inject } from 'vitest';
import { takeTestDatabaseName } from './app.ts';
import { dropDatabase } from './databases.ts';

// Each test file's database goes when the file ends (its own hooks, closing its servers, run
// first). Kept, they piled up: on a Citus cluster every database holds a maintenance daemon and
// its connections on each node, and a hundred test files' databases took the coordinator past
// max_connections ("too many clients already").
afterAll(async () => {
  const name = takeTestDatabaseName();
  if (name) await dropDatabase(inject('databaseUrl'), name);
});

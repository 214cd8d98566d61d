import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'clients/typescript/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts', 'test/declared-problems.ts'],
    setupFiles: ['test/drop-database.ts', 'test/clean-up.ts'],
    pool: 'forks',
    // One process runs file after file, loading the service's modules once rather than once per
    // file: test helpers keep nothing of one file for the next (test/app.ts makes each file's database).
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});

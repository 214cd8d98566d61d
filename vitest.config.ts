import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'clients/typescript/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts', 'test/declared-problems.ts'],
    setupFiles: ['test/drop-database.ts', 'test/clean-up.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});

import { configDefaults, defineConfig } from 'vitest/config';

// test/packages.test.ts packs the client packages, installs them and runs them on each Node.js at
// hand: about 50 s of CPU and minutes on a busy machine, so `npm run test:packages` runs it, a step
// of .ci/run of its own, and `npm test` leaves it out.
const packages = process.env.AUDIENCE_TEST_PACKAGES === '1' ? [] : ['test/packages.test.ts'];
// The web console's tests (test/console/) start a server and chromium per file: about two minutes
// of a quiet 2-core machine, a fifth of the suite. `npm run test:console` runs them, a step of
// .ci/run of its own, and `npm test` leaves them out.
const consoleTests = process.env.AUDIENCE_TEST_CONSOLE === '1' ? [] : ['test/console/**'];

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'clients/typescript/test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...packages, ...consoleTests],
    globalSetup: ['test/global-setup.ts', 'test/declared-problems.ts'],
    setupFiles: ['test/drop-database.ts', 'test/clean-up.ts'],
    pool: 'forks',
    // One process runs file after file, loading the service's modules once rather than once per
    // file: test helpers keep nothing of one file for the next (test/app.ts makes each file's database).
    isolate: false,
    // Two such processes, each taking the next file: most files wait on PostgreSQL or on a program
    // they started (a spawn, a restart), leaving a core idle with one. Each file has a database of
    // its own, its ports from the system and its folders from mkdtemp (test/scratch.ts).
    maxWorkers: 2,
    // An outer bound, not a measure: a test waits for the state it needs, and on a shared machine
    // at a load of 20–30 a property test of 2,500 requests took 37 s (30 s failed it).
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});

import { afterAll, beforeAll } from 'vitest';
import { TestServer } from './app.ts';

// What the tests of the HTTP layer (src/http/*.test.ts) share: one server per test file, and the
// shop section (test/app.ts's SHOP manifest) whose tags they call.

export let server: TestServer;

/** Starts the test file's server before its tests and closes it after them. */
export function httpServer(): void {
  beforeAll(async () => {
    server = await TestServer.start();
  });
  afterAll(async () => server?.close());
}

export const SHOP_SECTION = 'com.vendor1.sections.user-created.shop';
export const TAGS = `/audience/sections/${SHOP_SECTION}/tags`;

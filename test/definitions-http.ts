import { afterAll, beforeAll, expect } from 'vitest';
import { expectProblem as expectProblemDocument, TestServer, type Response } from './app.ts';

// What the tests of definitions (src/definitions/*.test.ts but profile-access) share: their server
// and the reads they make.

export let server: TestServer;

/** Starts the test file's server, before its tests. */
export function definitionsServer(): void {
  beforeAll(async () => {
    server = await TestServer.start();
  });
  afterAll(async () => server?.close());
}

export const NS = 'com.vendor1';
export const SHOP_SECTION = `${NS}.sections.user-created.shop`;
export const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
export const NUMERIC_ID = /^\d+$/;

/** Every error is a problem document whose `status` is the HTTP status (ERR-01, ERR-02, ERR-03, ERR-04, ERR-09; test/app.ts), and its detail names what is at fault. */
export function expectProblem(res: Response, status: number, detailMentions?: string): void {
  const detail = expectProblemDocument(res, status);
  if (detailMentions !== undefined) expect(detail).toContain(detailMentions);
}

/** A copy of a manifest, to change without touching the shared constant. */
export function copy<T>(value: T): T {
  return structuredClone(value);
}

/** A fresh account with a manifest whose one section has no tags, and a token for it. */
export const bare = (name: string, limits?: Record<string, number | null>) =>
  server.login({ sections: [{ name }] }, limits ?? { requests_per_second: null, token_requests_per_minute: null });

export async function get(token: string, path: string) {
  const res = await server.request('GET', path, { token });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res.body;
}

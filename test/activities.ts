import { afterAll, beforeAll } from 'vitest';
import type { Manifest } from '../src/definitions/schemas.ts';
import { TestServer, type Response } from './app.ts';
import { builtIn, NS, userCreated } from './names.ts';

// What the tests of activities share (src/activities/, and the email event export): the
// operator's calls on an account's routes, events as the ingestion endpoint takes them, and a
// server with one account for a test file.

export { NS };
export const EMAIL = builtIn('keyspaces', 'email');
export const SHOP = userCreated('sections', 'shop');

/** A call of the operator API on the routes of one account: `path` is below /admin/accounts/{id}. */
export type AccountAdmin = (method: string, path: string, body?: unknown) => Promise<Response>;

export function accountAdmin(server: TestServer, accountId: string): AccountAdmin {
  return (method, path, body) => server.admin(method, `/admin/accounts/${accountId}${path}`, body);
}

/** An activity event as ingested: of `type` in the activity, on the profile keyed `key` in the email keyspace; `over` adds or replaces fields. */
export function activityEvent(
  activity: string,
  type: string,
  key: string,
  correlation: string,
  over: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    activity_id: activity,
    type,
    keyspace_discriminator: EMAIL,
    profile_key: key,
    correlation_id: correlation,
    ...over,
  };
}

/**
 * Starts a server with a new account of `manifest` before the file's tests, hands them to
 * `ready` (with the account's token and its operator calls), and closes the server after them.
 */
export function serverWithAccount(
  manifest: Manifest,
  ready: (account: { server: TestServer; accountId: string; token: string; admin: AccountAdmin }) => void,
): void {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await TestServer.start();
    const { accountId, token } = await server.login(manifest);
    ready({ server, accountId, token, admin: accountAdmin(server, accountId) });
  });
  afterAll(async () => server?.close());
}

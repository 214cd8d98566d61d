import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer } from '../../test/app.ts';
import { Problem } from '../core/problems.ts';
import { keyspaceForProfileAccess, loadDefinitions } from './definitions.ts';

// The profile routes (issue "Profiles") locate profiles through this function; until they exist it
// is checked here against a real account.
let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => server?.close());

describe('keyspaceForProfileAccess', () => {
  it('AUTH-18 refuses a keyspace the account does not permit, with the detail of SPEC §2.1', async () => {
    const { accountId } = await server.createAccount({
      keyspaces: [{ discriminator: 'com.{vendor}1.keyspaces.sms', api_access: false }],
    });
    const defs = await loadDefinitions(server.services.pool, accountId);
    let thrown: unknown;
    try {
      keyspaceForProfileAccess(defs, 'com.vendor1.keyspaces.sms');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Problem);
    expect((thrown as Problem).status).toBe(403);
    expect((thrown as Problem).detail).toMatch(/access via the API is not allowed through the keyspace/i);
    expect(keyspaceForProfileAccess(defs, 'com.vendor1.keyspaces.email').kind).toBe('email');
  });

  it('ERR-11 answers 404 for an unknown keyspace', async () => {
    const { accountId } = await server.createAccount();
    const defs = await loadDefinitions(server.services.pool, accountId);
    expect(() => keyspaceForProfileAccess(defs, 'com.vendor1.keyspaces.nope')).toThrow(
      expect.objectContaining({ status: 404 }),
    );
  });
});

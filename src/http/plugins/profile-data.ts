import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AccountScope } from '../../core/scope.ts';
import { accountScope } from '../../services.ts';
import { addressKeyspace } from '../../consents/consents.ts';
import { normaliseKey } from '../../profiles/keys.ts';
import type { Services } from '../../services.ts';
import { registerOperations, type OperationTable } from '../operation.ts';
import { spend } from './auth.ts';

/**
 * The profile data plane (profiles, consents, segments, imports, exports): its route modules, registered
 * together under the limit of SPEC §8 of at most 10 consecutive operations per second on one
 * profile key.
 */
/** What the domain operations of a request need (route modules not yet tables of operations). */
export type ScopeOf = (request: FastifyRequest) => Promise<AccountScope>;
type Legacy = (services: Services, scopeOf: ScopeOf) => (app: FastifyInstance) => Promise<void>;

export function profileDataPlane(services: Services, tables: (OperationTable | Legacy)[]) {
  return async (app: FastifyInstance) => {
    app.addHook('preHandler', async (request) => {
      const params = request.params as {
        keyspace_discriminator?: string;
        profile_key?: string;
        channel_discriminator?: string;
        address?: string;
      };
      const raw = params.profile_key ?? params.address;
      if (raw === undefined) return;
      const { accountId } = request.caller;
      const defs = await services.definitions.get(accountId);
      // The legacy consent routes name a profile by its address on a channel: its key in the keyspace of the channel's addresses.
      const channel =
        params.address === undefined
          ? undefined
          : defs.channels.find((c) => c.discriminator === params.channel_discriminator);
      const keyspace = channel
        ? addressKeyspace(defs, channel)
        : defs.keyspaces.find((k) => k.discriminator === params.keyspace_discriminator);
      // Counted per normalised key, so that another spelling of one address is the same key.
      let key = raw;
      try {
        if (keyspace) key = normaliseKey(keyspace.kind, key);
      } catch {
        // An invalid key is refused by the route itself.
      }
      await spend(
        services,
        accountId,
        `${accountId}:${keyspace?.discriminator ?? params.keyspace_discriminator ?? params.channel_discriminator}:${key}`,
        'profile_key_operations_per_second',
      );
    });
    const scopeOf: ScopeOf = (request) => accountScope(services, request.caller.accountId, request.caller);
    for (const table of tables)
      if (typeof table === 'function') await app.register(table(services, scopeOf));
      else await registerOperations(app, services, table);
  };
}

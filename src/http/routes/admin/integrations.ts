import { Type } from 'typebox';
import { addIntegration, listIntegrations } from '../../../definitions/integrations.ts';
import { Integration, IntegrationSystem } from '../../../definitions/schemas.ts';
import { answer, operation, type OperationTable } from '../../operation.ts';
import { AccountParams } from '../../schemas/common.ts';

/** The integrations an operator connects to an account: each a keyspace of its own. */
export const adminIntegrationsRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/integrations',
      summary: 'List connected integrations',
      description: 'The shop and CMS integrations connected to the account, each with its keyspace.',
      params: AccountParams,
      response: { 200: Type.Object({ items: Type.Array(Integration) }) },
      scope: 'operator-account',
      handle: async ({ scope, services }) => ({
        items: listIntegrations(scope.defs.keyspaces, services.config.vendor),
      }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/integrations',
      summary: 'Connect an integration',
      description:
        'Connects a shop or CMS integration: creates its keyspace (201), or answers the one the account has for that system (200).',
      params: AccountParams,
      body: Type.Object({ system: IntegrationSystem }, { additionalProperties: false }),
      response: { 200: Integration, 201: Integration },
      scope: 'operator-account',
      transaction: true,
      handle: async ({ db, scope, services, body }) => {
        const { created, ...integration } = await addIntegration(
          db,
          services.feed,
          services.config.vendor,
          scope.accountId,
          body.system,
        );
        return answer(created ? 201 : 200, integration);
      },
    }),
  ],
};

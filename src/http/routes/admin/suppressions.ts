import { Type } from 'typebox';
import * as consents from '../../../consents/consents.ts';
import { Suppression } from '../../../consents/schemas.ts';
import { operation, type OperationTable } from '../../operation.ts';
import { AccountId, AccountParams } from '../../schemas/common.ts';
import { NoContent } from '../../schemas/problem.ts';

/** The addresses an operator suppresses on a channel: no message goes to them, whatever their consents. */
export const adminSuppressionsRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/accounts/:account_id/suppressions',
      summary: 'List suppressed addresses',
      description: 'The addresses no message may be sent to, by channel, with why.',
      params: AccountParams,
      response: { 200: Type.Object({ items: Type.Array(Suppression) }) },
      scope: 'operator-account',
      handle: async ({ db, scope }) => ({ items: await consents.listSuppressions(db, scope) }),
    }),
    operation({
      method: 'PUT',
      path: '/admin/accounts/:account_id/suppressions',
      summary: 'Suppress an address on a channel',
      description: "Adds an address to the channel's suppressions: no message is sent to it, whatever its consents.",
      errors: ['AUD-1205', 'AUD-1607'],
      params: AccountParams,
      body: Suppression,
      response: { 204: NoContent },
      scope: 'operator-account',
      handle: ({ db, scope, body }) => consents.addSuppression(db, scope, body),
    }),
    operation({
      method: 'DELETE',
      path: '/admin/accounts/:account_id/suppressions/:channel_discriminator/:address',
      summary: 'Lift a suppression',
      description: "Takes an address off the channel's suppressions.",
      errors: ['AUD-1', 'AUD-1205'],
      params: Type.Object({ account_id: AccountId, channel_discriminator: Type.String(), address: Type.String() }),
      response: { 204: NoContent },
      scope: 'operator-account',
      handle: ({ db, scope, params }) =>
        consents.removeSuppression(db, scope, params.channel_discriminator, params.address),
    }),
  ],
};

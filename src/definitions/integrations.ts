import crypto from 'node:crypto';
import type { KeyspaceRow } from '../core/definitions.ts';
import type { ChangeFeed } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { namespace } from './builtins.ts';
import { announce, followDefaultPermissions } from './definitions.ts';
import * as q from './queries.ts';
import type { Integration } from './schemas.ts';

/**
 * Integrations (docs/manifest.md "Integrations"). Shop connectors and CMS plugins accept their
 * credentials only once `/audience/keyspaces` lists their integration keyspace,
 * `com.<vendor>1.integrations.keyspaces.<8 hex>.<system>`, which the platform creates when an
 * integration is connected (CHECKLIST COMP-17). An account has one per system: the keyspace is the
 * integration, so nothing else records it.
 */

const prefix = (vendor: string) => `${namespace(vendor)}.integrations.keyspaces.`;

/** The integrations of an account: its integration keyspaces of the platform's form. */
export function listIntegrations(keyspaces: KeyspaceRow[], vendor: string): Integration[] {
  return keyspaces.flatMap((k) => {
    const match =
      k.kind === 'integration' &&
      k.discriminator.startsWith(prefix(vendor)) &&
      /^[0-9a-f]{8}\.(.+)$/.exec(k.discriminator.slice(prefix(vendor).length));
    return match ? [{ system: match[1], discriminator: k.discriminator }] : [];
  });
}

/**
 * Connects an integration: creates its keyspace unless the account has one for that system, and
 * gives it the default permissions wherever the keyspaces there have them. The caller announces it.
 */
export async function connectIntegration(
  tx: Queryable,
  vendor: string,
  accountId: string,
  system: string,
): Promise<Integration & { created: boolean }> {
  await q.lockKeyspacesByAccount(tx, accountId);
  const before = await q.listKeyspacesByAccount(tx, accountId);
  const existing = listIntegrations(before, vendor).find((i) => i.system === system);
  if (existing) return { ...existing, created: false };
  // The platform's discriminators carry 8 random hex digits; connectors match the form, not the digits.
  const discriminator = `${prefix(vendor)}${crypto.randomBytes(4).toString('hex')}.${system}`;
  await q.upsertKeyspace(tx, accountId, {
    discriminator,
    name: `${system} customer id`,
    description: `Customer ids of the ${system} integration`,
    manage_subscriptions: false,
    api_access: true,
    kind: 'integration',
    mapped_attribute: null,
  });
  await followDefaultPermissions(tx, accountId, before);
  return { system, discriminator, created: true };
}

/** Connects one integration to an account (the operator API's `POST /admin/accounts/{id}/integrations`). */
export async function addIntegration(
  tx: Queryable,
  feed: ChangeFeed,
  vendor: string,
  accountId: string,
  system: string,
): Promise<Integration & { created: boolean }> {
  const integration = await connectIntegration(tx, vendor, accountId, system);
  if (integration.created) await announce(feed, tx, accountId);
  return integration;
}

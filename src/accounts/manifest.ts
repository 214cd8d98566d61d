import { addSuppression } from '../consents/consents.ts';
import { loadDefinitions } from '../definitions/definitions.ts';
import { applyManifest } from '../definitions/manifest.ts';
import type { Manifest } from '../definitions/schemas.ts';
import type { ChangeFeed } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { getAccount, updateAccount, type Account } from './accounts.ts';

/** Applies a whole manifest (docs/manifest.md) to an account in one transaction: account settings, definitions, suppressions. */
export async function applyAccountManifest(tx: Queryable, feed: ChangeFeed, vendor: string, accountId: string, manifest: Manifest): Promise<void> {
  await getAccount(tx, accountId);
  const { account, suppressions, ...definitions } = manifest;
  if (account && (account.name !== undefined || account.limits !== undefined)) {
    await updateAccount(tx, feed, accountId, { name: account.name, limits: account.limits as Account['limit_overrides'] | undefined });
  }
  await applyManifest(tx, feed, vendor, accountId, definitions);
  if (suppressions?.length) {
    const defs = await loadDefinitions(tx, accountId);
    for (const s of suppressions) await addSuppression(tx, { accountId, defs }, { ...s, channel_discriminator: s.channel_discriminator.replaceAll('{vendor}', vendor) });
  }
}

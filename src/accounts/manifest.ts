import { addSuppression, listSuppressions } from '../consents/consents.ts';
import { loadDefinitions } from '../definitions/definitions.ts';
import { applyManifest, summarise } from '../definitions/manifest.ts';
import type { Manifest, ManifestSummary } from '../definitions/schemas.ts';
import type { ChangeFeed } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { getAccount, updateAccount, type Account } from './accounts.ts';

/**
 * Applies a whole manifest (docs/manifest.md) to an account in one transaction: account settings,
 * definitions, suppressions. Answers what it created, changed and left alone.
 */
export async function applyAccountManifest(tx: Queryable, feed: ChangeFeed, vendor: string, accountId: string, manifest: Manifest): Promise<ManifestSummary> {
  const before = await accountItems(tx, accountId);
  const { account, suppressions, ...definitions } = manifest;
  if (account && (account.name !== undefined || account.limits !== undefined)) {
    await updateAccount(tx, feed, accountId, { name: account.name, limits: account.limits as Account['limit_overrides'] | undefined });
  }
  const applied = await applyManifest(tx, feed, vendor, accountId, definitions);
  if (suppressions?.length) {
    const defs = await loadDefinitions(tx, accountId);
    for (const s of suppressions) await addSuppression(tx, { accountId, defs }, { ...s, channel_discriminator: s.channel_discriminator.replaceAll('{vendor}', vendor) });
  }
  const own = summarise(before, await accountItems(tx, accountId));
  return { created: [...own.created, ...applied.created], changed: [...own.changed, ...applied.changed], unchanged: [...own.unchanged, ...applied.unchanged] };
}

/** The account's settings and suppressions, named as the summary of an apply names items; 404 for an unknown account. */
async function accountItems(tx: Queryable, accountId: string): Promise<Map<string, string>> {
  const account = await getAccount(tx, accountId);
  const items = new Map([[`account ${accountId}`, JSON.stringify({ name: account.name, limits: account.limit_overrides })]]);
  for (const s of await listSuppressions(tx, { accountId, defs: await loadDefinitions(tx, accountId) })) {
    items.set(`suppression of ${s.address} on ${s.channel_discriminator}`, JSON.stringify(s.reason));
  }
  return items;
}

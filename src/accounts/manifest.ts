import { Type, type Static } from 'typebox';
import { listAllActivities, putActivity } from '../activities/activities.ts';
import { ActivityId, ActivityInput } from '../activities/schemas.ts';
import { addSuppression, listSuppressions } from '../consents/consents.ts';
import { Problem } from '../core/problems.ts';
import { loadDefinitions, type DefinitionsWriter } from '../definitions/definitions.ts';
import { definitionItems, manifestOf, summarise, writeManifest } from '../definitions/manifest.ts';
import { checkActivityTemplates } from '../transactional/sends.ts';
import { Manifest, type ManifestSummary } from '../definitions/schemas.ts';
import type pg from 'pg';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { applyManifestWebhooks, manifestWebhooks } from '../webhooks/webhooks.ts';
import { ManifestWebhook } from '../webhooks/schemas.ts';
import { createAccount, getAccount, updateAccount, type Account } from './accounts.ts';
import * as q from './queries.ts';

/** The whole manifest: the definitions' manifest, with the account's activities (docs/manifest.md "Activities"). */
export const AccountManifest = Type.Object(
  {
    ...Manifest.properties,
    activities: Type.Optional(
      Type.Array(Type.Object({ id: ActivityId, ...ActivityInput.properties }, { additionalProperties: false }), {
        description: 'Activities, matched by id: created, or changed to what is listed',
      }),
    ),
    webhooks: Type.Optional(
      Type.Array(ManifestWebhook, {
        description: 'Webhook endpoints, matched by URL: subscribed, or changed to what is listed (docs/webhooks.md)',
      }),
    ),
  },
  { additionalProperties: false, title: 'AccountManifest' },
);
export type AccountManifest = Static<typeof AccountManifest>;

/**
 * Applies a whole manifest (docs/manifest.md) to an account in one transaction: account settings,
 * definitions, suppressions, activities. Answers what it created, changed and left alone. `now` is
 * the creation time of activities that do not give one.
 */
export async function applyAccountManifest(
  tx: Queryable,
  writer: DefinitionsWriter & { serverSecret: string },
  args: { accountId: string; manifest: AccountManifest; now: Date },
): Promise<ManifestSummary> {
  const { accountId } = args;
  const before = await accountItems(tx, accountId);
  const beforeDefinitions = definitionItems(await loadDefinitions(tx, accountId));
  await writeAccountManifest(tx, writer, args);
  const own = summarise(before, await accountItems(tx, accountId));
  const applied = summarise(beforeDefinitions, definitionItems(await loadDefinitions(tx, accountId)));
  return {
    created: [...own.created, ...applied.created],
    changed: [...own.changed, ...applied.changed],
    unchanged: [...own.unchanged, ...applied.unchanged],
  };
}

/**
 * `applyAccountManifest` without its summary, for a new account made from a manifest (the demo
 * account, the emulator's ready account and namespaces): the reads before and after that the
 * summary compares were a third of the statements of the emulator's ready account
 * (docs/benchmarks.md "Start").
 */
export async function writeAccountManifest(
  tx: Queryable,
  { feed, vendor, serverSecret }: DefinitionsWriter & { serverSecret: string },
  { accountId, manifest, now }: { accountId: string; manifest: AccountManifest; now: Date },
): Promise<void> {
  const { account, suppressions, activities, webhooks, ...definitions } = manifest;
  if (account && (account.name !== undefined || account.limits !== undefined)) {
    await updateAccount(tx, feed, accountId, {
      name: account.name,
      limits: account.limits as Account['limit_overrides'] | undefined,
    });
  }
  await writeManifest(tx, feed, vendor, accountId, definitions);
  if (suppressions?.length) {
    const defs = await loadDefinitions(tx, accountId);
    for (const s of suppressions)
      await addSuppression(
        tx,
        { accountId, defs },
        { ...s, channel_discriminator: s.channel_discriminator.replaceAll('{vendor}', vendor) },
      );
  }
  if (activities?.length) {
    const defs = await loadDefinitions(tx, accountId);
    for (const [i, { id, ...activity }] of activities.entries()) {
      // A transactional activity's templates are checked as when the operator API saves it, the fault named by its place in the manifest.
      const checkEmail = (input: ActivityInput) =>
        checkActivityTemplates(input).catch((err: unknown) => {
          throw err instanceof Problem ? err.within(`activities[${i}].`) : err;
        });
      await putActivity(tx, { accountId, defs, now }, { feed, vendor, checkEmail }, id, {
        ...activity,
        section_discriminator: activity.section_discriminator.replaceAll('{vendor}', vendor),
      });
    }
  }
  if (webhooks?.length) await applyManifestWebhooks(tx, { accountId, secret: serverSecret }, webhooks);
}

/**
 * Applies a manifest to the account its `account.name` names, creating the account (in `region`)
 * when none has that name, all in one transaction: a manifest that fails leaves no account behind,
 * and applying it again finds the account it made. Applies to one account at a time per name, so
 * that two applies of one new manifest make one account.
 */
export async function applyNamedManifest(
  tx: Queryable,
  { feed, vendor, serverSecret }: DefinitionsWriter & { serverSecret: string },
  { manifest, region, now }: { manifest: AccountManifest; region: string; now: Date },
): Promise<ManifestSummary & { account: Account; created_account: boolean }> {
  const name = manifest.account?.name;
  if (name === undefined)
    throw new Problem('AUD-1118', 'account.name is required: it names the account to apply the manifest to');
  await tx.query('select pg_advisory_xact_lock(hashtext($1))', [`account name ${name}`]);
  const named = await q.findAccountsByName(tx, name);
  if (named.length > 1)
    throw new Problem(
      'AUD-1112',
      `${named.length} accounts are named "${name}" (${named.map((a) => a.account_id).join(', ')}): apply the manifest to one of them by its id`,
    );
  const id = named[0]?.account_id ?? (await createAccount(tx, feed, vendor, { name, region })).id;
  const summary = await applyAccountManifest(tx, { feed, vendor, serverSecret }, { accountId: id, manifest, now });
  const item = `account ${id}`;
  const createdAccount = named.length === 0;
  return {
    account: await getAccount(tx, id),
    created_account: createdAccount,
    created: createdAccount ? [item, ...summary.created] : summary.created,
    changed: createdAccount ? summary.changed.filter((i) => i !== item) : summary.changed,
    unchanged: createdAccount ? summary.unchanged.filter((i) => i !== item) : summary.unchanged,
  };
}

/**
 * The account as a manifest (docs/manifest.md "Reading an account's manifest"): its name and limit
 * overrides, its definitions, suppressions and activities. Applied back to the account, it creates
 * and changes nothing. 404 for an unknown account.
 */
export async function getAccountManifest(db: Queryable, vendor: string, accountId: string): Promise<AccountManifest> {
  const account = await getAccount(db, accountId);
  const defs = await loadDefinitions(db, accountId);
  const activities = (await listAllActivities(db, { accountId, defs }, {})).map(({ archived_at, ...a }) => ({
    ...a,
    archived: archived_at !== null,
  }));
  return {
    account: { name: account.name, limits: account.limit_overrides },
    ...manifestOf(defs, vendor),
    suppressions: await listSuppressions(db, { accountId, defs }),
    activities: activities as AccountManifest['activities'],
    webhooks: await manifestWebhooks(db, accountId),
  };
}

/**
 * What applying the manifest to the account would create, change and leave alone, with nothing
 * changed: the apply runs, meeting every check a real one meets, in a transaction rolled back.
 */
export async function previewAccountManifest(
  pool: pg.Pool,
  writer: DefinitionsWriter & { serverSecret: string },
  args: { accountId: string; manifest: AccountManifest; now: Date },
): Promise<ManifestSummary> {
  const preview: { summary?: ManifestSummary } = {};
  try {
    await withTransaction(pool, async (tx) => {
      preview.summary = await applyAccountManifest(tx, writer, args);
      throw preview;
    });
  } catch (err) {
    if (err !== preview) throw err;
  }
  return preview.summary!;
}

/** The account's settings, suppressions and activities, named as the summary of an apply names items; 404 for an unknown account. */
async function accountItems(tx: Queryable, accountId: string): Promise<Map<string, string>> {
  const account = await getAccount(tx, accountId);
  const items = new Map([
    [`account ${accountId}`, JSON.stringify({ name: account.name, limits: account.limit_overrides })],
  ]);
  const defs = await loadDefinitions(tx, accountId);
  for (const s of await listSuppressions(tx, { accountId, defs })) {
    items.set(`suppression of ${s.address} on ${s.channel_discriminator}`, JSON.stringify(s.reason));
  }
  for (const a of await listAllActivities(tx, { accountId, defs }, {}))
    items.set(`activity ${a.id}`, JSON.stringify(a));
  for (const w of await manifestWebhooks(tx, accountId)) items.set(`webhook ${w.url}`, JSON.stringify(w));
  return items;
}

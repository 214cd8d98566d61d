import type pg from 'pg';
import { forgetAccountActivities } from '../activities/activities.ts';
import type { ApiKeys } from '../api-keys/api-keys.ts';
import { forgetAccountConsents } from '../consents/consents.ts';
import { Problem } from '../core/problems.ts';
import { forgetAccountDefinitions } from '../definitions/definitions.ts';
import { forgetAccountExports } from '../exports/exports.ts';
import type { FileStore } from '../files/store.ts';
import { forgetAccountImports } from '../imports/imports.ts';
import { forgetAccountJobs } from '../jobs/queue.ts';
import { forgetAccountProfiles } from '../profiles/profiles.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import { forgetAccountMail } from '../transactional/sends.ts';
import { forgetAccountWebhooks } from '../webhooks/webhooks.ts';
import { ACCOUNT_TOPIC } from './accounts.ts';
import * as q from './queries.ts';

/**
 * Deletes an account and everything of it: every row of every area, each area erasing its own
 * tables (the areas that name another's rows first: mail, exports, imports, activities, jobs,
 * consents, profiles, definitions, keys), in one transaction, then its files. Every statement
 * names the account, so on Citus each runs on the one node holding it. The account's row is
 * locked first: a write of the account that starts meanwhile waits, and then finds it gone.
 * Takes the pool rather than a transaction because the files go only once the rows are gone for
 * good; a process that dies between the two leaves files that no row names, which
 * `forgetDeletedAccountsFiles` removes at the next start.
 */
export async function deleteAccount(
  pool: pg.Pool,
  deps: { feed: ChangeFeed; apiKeys: ApiKeys; files: FileStore },
  accountId: string,
): Promise<void> {
  await withTransaction(pool, async (tx) => {
    if (!(await q.lockAccount(tx, accountId))) throw new Problem('AUD-1110', `Account "${accountId}" does not exist`);
    await forgetAccountMail(tx, accountId);
    await forgetAccountWebhooks(tx, accountId);
    await forgetAccountExports.rows(tx, accountId);
    await forgetAccountImports.rows(tx, accountId);
    await forgetAccountActivities(tx, accountId);
    await forgetAccountJobs(tx, accountId);
    await forgetAccountConsents(tx, accountId);
    await forgetAccountProfiles(tx, accountId);
    await forgetAccountDefinitions(tx, deps.feed, accountId);
    await deps.apiKeys.forgetAccount(tx, accountId);
    await q.deleteAccount(tx, accountId);
    await deps.feed.publish(tx, ACCOUNT_TOPIC, accountId);
  });
  await forgetAccountImports.files(deps.files, accountId);
  await forgetAccountExports.files(deps.files, accountId);
}

/**
 * Removes the files of accounts that are gone: what an account delete leaves when its process dies
 * after its transaction, before its files. A folder is an account's when named by an account id;
 * it is read before the accounts are, and an account's files come after its row, so a folder of an
 * account being created is never taken for a deleted one's. Answers how many folders (an area's files of one
 * account) went.
 */
export async function forgetDeletedAccountsFiles(db: Queryable, files: FileStore): Promise<number> {
  let forgotten = 0;
  for (const area of [forgetAccountImports, forgetAccountExports]) {
    const holders = (await area.accounts(files)).filter((name) => ACCOUNT_ID.test(name));
    if (holders.length === 0) continue;
    const live = new Set(await q.existingAccounts(db, holders));
    for (const accountId of holders.filter((id) => !live.has(id))) {
      await area.files(files, accountId);
      forgotten++;
    }
  }
  return forgotten;
}
const ACCOUNT_ID = /^[1-9]\d{0,17}$/;

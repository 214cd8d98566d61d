import { Problem } from '../core/problems.ts';
import type { ChangeFeed } from '../store/changes.ts';
import { RecordCache } from '../store/changes.ts';
import type { Queryable } from '../store/pool.ts';
import { installBuiltins, vendorWordOf } from '../definitions/definitions.ts';
import {
  effectiveLimits,
  LIMIT_NAMES,
  LIMIT_RANGES,
  type LimitName,
  type LimitOverrides,
  type Limits,
} from '../core/limits.ts';
import type { ApiKeys } from '../api-keys/api-keys.ts';
import type { AccountScope } from '../core/scope.ts';
import * as q from './queries.ts';

export interface Account {
  id: string;
  name: string;
  region: string;
  /** Only the overrides; see `limits` for the limits in force. */
  limit_overrides: LimitOverrides;
  limits: Limits;
  created_at: string;
}

export const ACCOUNT_TOPIC = 'account';

function view(row: q.AccountRow): Account {
  return {
    id: row.account_id,
    name: row.name,
    region: row.region,
    limit_overrides: row.limits,
    limits: effectiveLimits(row.limits),
    created_at: row.created_at.toISOString(),
  };
}

/** Refuses overrides that name no limit or leave a limit's range (the manifest's `account.limits` reaches here unchecked by a schema). */
function checkLimits(limits: LimitOverrides): void {
  for (const [name, value] of Object.entries(limits)) {
    if (!(LIMIT_NAMES as string[]).includes(name))
      throw new Problem('AUD-1116', `limits.${name} is not a limit; the limits are ${LIMIT_NAMES.join(', ')}`);
    const range = LIMIT_RANGES[name as LimitName];
    if (range && value !== null && (value < range.minimum || value > range.maximum)) {
      throw new Problem(
        'AUD-1117',
        `limits.${name} must be from ${range.minimum} to ${range.maximum}, or null for the default`,
      );
    }
  }
}

/** Creates an account with the keyspaces and channels every account has. */
export async function createAccount(
  tx: Queryable,
  feed: ChangeFeed,
  vendor: string,
  input: { name: string; region: string; limits?: LimitOverrides },
): Promise<Account> {
  checkLimits(input.limits ?? {});
  const row = await q.insertAccount(tx, { name: input.name, region: input.region, limits: input.limits ?? {} });
  await installBuiltins(tx, feed, vendor, row.account_id);
  return view(row);
}

export async function getAccount(db: Queryable, accountId: string): Promise<Account> {
  const row = await q.findAccountById(db, accountId);
  if (!row) throw new Problem('AUD-1110', `Account "${accountId}" does not exist`);
  return view(row);
}

/**
 * Who calls, for an API key's session: its account's id and name and the key's client id and
 * name (the console's header shows them instead of the key's UUID).
 */
export async function callerAccount(
  db: Queryable,
  scope: AccountScope,
  keys: Pick<ApiKeys, 'listApiKeys'>,
): Promise<{ id: string; name: string; key: { client_id: string; name: string } }> {
  const account = await getAccount(db, scope.accountId);
  const clientId = scope.caller?.clientId ?? '';
  const key = (await keys.listApiKeys(db, scope.accountId)).find((k) => k.client_id === clientId);
  return { id: account.id, name: account.name, key: { client_id: clientId, name: key?.name ?? '' } };
}

export async function listAccounts(db: Queryable): Promise<Account[]> {
  return (await q.listAccounts(db)).map(view);
}

export async function countAccounts(db: Queryable): Promise<number> {
  return q.countAccounts(db);
}

/** The vendor word the oldest account's identifiers were made with; undefined on a database without accounts. */
export async function vendorWordInUse(db: Queryable): Promise<string | undefined> {
  const oldest = await q.oldestAccount(db);
  return oldest && vendorWordOf(db, oldest.account_id);
}

/** Renames an account or changes the limit overrides it names; the others stay as they are. */
export async function updateAccount(
  tx: Queryable,
  feed: ChangeFeed,
  accountId: string,
  changes: { name?: string; limits?: LimitOverrides },
): Promise<Account> {
  if (changes.limits) checkLimits(changes.limits);
  const row = await q.updateAccount(tx, accountId, changes);
  if (!row) throw new Problem('AUD-1110', `Account "${accountId}" does not exist`);
  await feed.publish(tx, ACCOUNT_TOPIC, accountId);
  return view(row);
}

/** Accounts by id, cached for the per-request needs (region, limits). */
export class AccountDirectory {
  private readonly cache: RecordCache<Account | null>;
  constructor(db: Queryable, feed: ChangeFeed) {
    this.cache = new RecordCache(feed, ACCOUNT_TOPIC, async (id) => {
      const row = await q.findAccountById(db, id);
      return row ? view(row) : null;
    });
  }
  get(accountId: string): Promise<Account | null> {
    return this.cache.get(accountId);
  }
}

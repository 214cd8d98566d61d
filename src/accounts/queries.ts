import type { Queryable } from '../store/pool.ts';
import type { LimitOverrides } from '../core/limits.ts';

export interface AccountRow {
  account_id: string;
  name: string;
  region: string;
  limits: LimitOverrides;
  created_at: Date;
}

export async function insertAccount(
  db: Queryable,
  account: { name: string; region: string; limits: LimitOverrides },
): Promise<AccountRow> {
  const { rows } = await db.query<AccountRow>(
    'insert into accounts (name, region, limits) values ($1, $2, $3) returning *',
    [account.name, account.region, account.limits],
  );
  return rows[0];
}

export async function findAccountById(db: Queryable, accountId: string): Promise<AccountRow | undefined> {
  if (!/^\d{1,18}$/.test(accountId)) return undefined;
  const { rows } = await db.query<AccountRow>('select * from accounts where account_id = $1::bigint', [accountId]);
  return rows[0];
}

export async function listAccounts(db: Queryable): Promise<AccountRow[]> {
  const { rows } = await db.query<AccountRow>('select * from accounts order by account_id');
  return rows;
}

export async function oldestAccount(db: Queryable): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>('select * from accounts order by account_id limit 1');
  return rows[0];
}

export async function countAccounts(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select count(*)::int as n from accounts');
  return rows[0].n;
}

export async function updateAccount(
  db: Queryable,
  accountId: string,
  changes: { name?: string; limits?: LimitOverrides },
): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    `update accounts set name = coalesce($2, name), limits = limits || coalesce($3::jsonb, '{}')
     where account_id = $1::bigint returning *`,
    [accountId, changes.name ?? null, changes.limits ?? null],
  );
  return rows[0];
}

/** Locks the account's row until the transaction ends (a write of the account, which checks its foreign key, waits); false when there is none. */
export async function lockAccount(db: Queryable, accountId: string): Promise<boolean> {
  if (!/^\d{1,18}$/.test(accountId)) return false;
  const { rows } = await db.query('select 1 from accounts where account_id = $1::bigint for update', [accountId]);
  return rows.length > 0;
}

/** Which of `accountIds` are accounts. */
export async function existingAccounts(db: Queryable, accountIds: string[]): Promise<string[]> {
  const { rows } = await db.query<{ account_id: string }>(
    'select account_id::text from accounts where account_id = any($1::bigint[])',
    [accountIds],
  );
  return rows.map((row) => row.account_id);
}

export async function deleteAccount(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from accounts where account_id = $1::bigint', [accountId]);
}

export async function findAccountsByName(db: Queryable, name: string): Promise<AccountRow[]> {
  const { rows } = await db.query<AccountRow>('select * from accounts where name = $1 order by account_id', [name]);
  return rows;
}

import type { JWK } from 'jose';
import type { Queryable } from '../store/pool.ts';

export interface ApiKeyRow {
  account_id: string;
  client_id: string;
  secret_hash: Buffer;
  name: string;
  section_ids: string[] | null;
  created_at: Date;
  deleted_at: Date | null;
}

export async function insertApiKey(
  db: Queryable,
  key: { accountId: string; clientId: string; secretHash: Buffer; name: string; sectionIds: string[] | null },
): Promise<ApiKeyRow> {
  const { rows } = await db.query<ApiKeyRow>(
    `insert into api_keys (account_id, client_id, secret_hash, name, section_ids)
     values ($1::bigint, $2, $3, $4, $5::bigint[]) returning *`,
    [key.accountId, key.clientId, key.secretHash, key.name, key.sectionIds],
  );
  return rows[0];
}

export async function findApiKeyByClientId(db: Queryable, clientId: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>('select * from api_keys where client_id = $1', [clientId]);
  return rows[0];
}

export async function listApiKeysByAccount(db: Queryable, accountId: string): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    'select * from api_keys where account_id = $1::bigint and deleted_at is null order by created_at, client_id',
    [accountId],
  );
  return rows;
}

export async function markApiKeyDeleted(db: Queryable, accountId: string, clientId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'update api_keys set deleted_at = now() where account_id = $1::bigint and client_id = $2 and deleted_at is null',
    [accountId, clientId],
  );
  return rowCount === 1;
}

export interface SigningKeyRow {
  kid: string;
  /** Only in keys stored before private halves were sealed, until a program seals them. */
  private_jwk: JWK | null;
  private_key_sealed: Buffer | null;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

/** The keys that still verify tokens: not retired, or retired in the future. Newest first. */
export async function listVerifyingSigningKeys(db: Queryable): Promise<SigningKeyRow[]> {
  const { rows } = await db.query<SigningKeyRow>(
    'select * from signing_keys where retired_at is null or retired_at > now() order by created_at desc, kid',
  );
  return rows;
}

export async function insertSigningKey(
  db: Queryable,
  key: { kid: string; privateKeySealed: Buffer; publicJwk: JWK },
): Promise<void> {
  await db.query('insert into signing_keys (kid, private_key_sealed, public_jwk) values ($1, $2, $3)', [
    key.kid,
    key.privateKeySealed,
    key.publicJwk,
  ]);
}

/** Signing keys whose private half is still in plain text (stored before sealing). */
export async function listUnsealedSigningKeys(db: Queryable): Promise<{ kid: string; private_jwk: JWK }[]> {
  const { rows } = await db.query<{ kid: string; private_jwk: JWK }>(
    'select kid, private_jwk from signing_keys where private_jwk is not null',
  );
  return rows;
}

/** Replaces a key's plain private half by its sealed form. */
export async function sealSigningKey(db: Queryable, kid: string, privateKeySealed: Buffer): Promise<void> {
  await db.query('update signing_keys set private_key_sealed = $2, private_jwk = null where kid = $1', [
    kid,
    privateKeySealed,
  ]);
}

/** Stops every signing key but `kid` from signing; they keep verifying for `graceSeconds`. */
export async function retireSigningKeysExcept(db: Queryable, kid: string, retiredAt: Date): Promise<void> {
  await db.query(`update signing_keys set retired_at = $2 where kid <> $1 and retired_at is null`, [kid, retiredAt]);
}

/** Removes every signing key but `kid`: the tokens they signed stop verifying in every process, whatever its clock. */
export async function deleteSigningKeysExcept(db: Queryable, kid: string): Promise<void> {
  await db.query('delete from signing_keys where kid <> $1', [kid]);
}

/** Serialises first-time key creation between processes. */
export async function lockSigningKeys(db: Queryable): Promise<void> {
  await db.query('lock table signing_keys in share row exclusive mode');
}

/** Erases the API keys of a deleted account, deleted ones included; answers their client ids. */
export async function deleteAccountKeys(db: Queryable, accountId: string): Promise<string[]> {
  const { rows } = await db.query<{ client_id: string }>(
    'delete from api_keys where account_id = $1::bigint returning client_id',
    [accountId],
  );
  return rows.map((r) => r.client_id);
}

import type { SqlValues } from '../aql/compile-sql.ts';
import { clusterMembersSql, clusterProfilesSql } from '../profiles/relations.ts';
import { idArray } from '../store/arrays.ts';
import { coalescePerPool } from '../store/coalesce.ts';
import type { Queryable } from '../store/pool.ts';

export interface ConsentRow {
  profile_id: string;
  topic_id: string;
  channel_id: string;
  section_id: string;
  type: string;
  reason: string;
  source: string;
  address: string | null;
  modified_at: Date;
}

/** What a cluster shows: per topic and channel, its members' most recently modified consent. */
export async function listClusterConsents(
  db: Queryable,
  accountId: string,
  memberIds: string[],
  sectionId: string | null,
): Promise<ConsentRow[]> {
  const { rows } = await db.query<ConsentRow>(
    `select distinct on (topic_id, channel_id) profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at
     from consents where account_id = $1::bigint and profile_id = any($2::bigint[]) and ($3::bigint is null or section_id = $3::bigint)
     order by topic_id, channel_id, modified_at desc, profile_id`,
    [accountId, memberIds, sectionId],
  );
  return rows;
}

export interface ConsentWrite {
  topicId: string;
  channelId: string;
  sectionId: string;
  type: string;
  reason: string;
  source: string;
  address: string | null;
  modifiedAt: Date;
}

/** Writes consents on one profile and appends them to the history. */
export async function upsertConsents(
  db: Queryable,
  accountId: string,
  profileId: string,
  consents: ConsentWrite[],
): Promise<void> {
  await upsertConsentsBulk(
    db,
    accountId,
    consents.map((c) => ({ ...c, profileId })),
  );
}

/**
 * Writes consents of many profiles and appends them to the history. `fresh`: the profiles were
 * created in the caller's transaction and have no consents yet, so a plain insert (an upsert checks
 * the key before each row and confirms each insert: a fifth of an import's consent writes).
 */
export async function upsertConsentsBulk(
  db: Queryable,
  accountId: string,
  consents: (ConsentWrite & { profileId: string })[],
  fresh = false,
): Promise<void> {
  if (consents.length === 0) return;
  const columns = [
    idArray(consents.map((c) => c.profileId)),
    idArray(consents.map((c) => c.topicId)),
    idArray(consents.map((c) => c.channelId)),
    idArray(consents.map((c) => c.sectionId)),
    JSON.stringify(consents.map((c) => [c.type, c.reason, c.source, c.address, c.modifiedAt])),
  ];
  await db.query(
    `with given as (
       select g.profile_id, g.topic_id, g.channel_id, g.section_id, g.c->>0 as type, g.c->>1 as reason, g.c->>2 as source, g.c->>3 as address, (g.c->>4)::timestamptz as modified_at
       from rows from (unnest($2::bigint[]), unnest($3::bigint[]), unnest($4::bigint[]), unnest($5::bigint[]), jsonb_array_elements($6::jsonb))
         as g(profile_id, topic_id, channel_id, section_id, c)
     ), written as (
       insert into consents (account_id, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at)
       select $1::bigint, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at from given
       ${
         fresh
           ? ''
           : `on conflict (account_id, profile_id, topic_id, channel_id) do update set
         type = excluded.type, reason = excluded.reason, source = excluded.source, address = excluded.address, modified_at = excluded.modified_at`
       }
     )
     insert into consent_history (account_id, profile_id, topic_id, channel_id, section_id, type, reason, source, address, changed_at)
     select $1::bigint, profile_id, topic_id, channel_id, section_id, type, reason, source, address, modified_at from given`,
    [accountId, ...columns],
  );
}

/** What many clusters show: canonical profile id → their consents (per topic and channel, the latest). */
export async function listClusterConsentsBulk(
  db: Queryable,
  accountId: string,
  canonicalIds: string[],
): Promise<(ConsentRow & { canonical_id: string })[]> {
  const { rows } = await db.query<ConsentRow & { canonical_id: string }>(
    `select distinct on (m.canonical_id, c.topic_id, c.channel_id)
       m.canonical_id, c.profile_id, c.topic_id, c.channel_id, c.section_id, c.type, c.reason, c.source, c.address, c.modified_at
     from consents c join (${clusterProfilesSql('$1::bigint', '$2::bigint[]')}) m on m.profile_id = c.profile_id
     where c.account_id = $1::bigint
     order by m.canonical_id, c.topic_id, c.channel_id, c.modified_at desc, c.profile_id`,
    [accountId, canonicalIds],
  );
  return rows;
}

/** Points a cluster's consents given for `from` on some channels of a section at the address `to`. */
/** Moves the consents of a cluster's section on some channels from one address to another. */
/** Deletes the consent history of profiles being deleted (their consents go by their foreign key). */
export async function deleteConsentHistory(db: Queryable, accountId: string, profileIds: string[]): Promise<void> {
  await db.query('delete from consent_history where account_id = $1::bigint and profile_id = any($2::bigint[])', [
    accountId,
    profileIds,
  ]);
}

export async function updateConsentAddress(
  db: Queryable,
  accountId: string,
  move: { memberIds: string[]; sectionId: string; channelIds: string[]; from: string; to: string },
): Promise<void> {
  const { memberIds, sectionId, channelIds, from, to } = move;
  await db.query(
    `update consents set address = $6 where account_id = $1::bigint and profile_id = any($2::bigint[])
       and section_id = $3::bigint and channel_id = any($4::bigint[]) and address = $5`,
    [accountId, memberIds, sectionId, channelIds, from, to],
  );
}

export interface SuppressionRow {
  channel_id: string;
  address: string;
  reason: string;
  created_at: Date;
}

export async function listSuppressionsByAddresses(
  db: Queryable,
  accountId: string,
  channelIds: string[],
  addresses: string[],
): Promise<SuppressionRow[]> {
  const { rows } = await db.query<SuppressionRow>(
    `select s.channel_id, s.address, s.reason, s.created_at from suppressions s
     join unnest($2::bigint[], $3::text[]) as w(channel_id, address) on w.channel_id = s.channel_id and w.address = s.address
     where s.account_id = $1::bigint order by s.channel_id, s.address`,
    [accountId, channelIds, addresses],
  );
  return rows;
}

/** The shared look-ups of each pool (or client), by account: those of one turn of the event loop go as one statement. */
const sharedLookups = coalescePerPool(
  async (db: Queryable, account: string, items: { channelId: string; address: string }[]) => {
    const found = new Set(
      (
        await listSuppressionsByAddresses(
          db,
          account,
          items.map((i) => i.channelId),
          items.map((i) => i.address),
        )
      ).map((r) => `${r.channel_id}\n${r.address}`),
    );
    return items.map((i) => found.has(`${i.channelId}\n${i.address}`));
  },
);

/** Whether an address (normalised) is suppressed on a channel, in one statement shared with the other such look-ups of the same turn. */
export function isSuppressedShared(
  db: Queryable,
  accountId: string,
  channelId: string,
  address: string,
): Promise<boolean> {
  return sharedLookups(db, accountId, { channelId, address });
}

export async function listSuppressionsByAccount(db: Queryable, accountId: string): Promise<SuppressionRow[]> {
  const { rows } = await db.query<SuppressionRow>(
    'select channel_id, address, reason, created_at from suppressions where account_id = $1::bigint order by channel_id, address',
    [accountId],
  );
  return rows;
}

export async function upsertSuppression(
  db: Queryable,
  accountId: string,
  s: { channelId: string; address: string; reason: string },
): Promise<void> {
  await db.query(
    `insert into suppressions (account_id, channel_id, address, reason) values ($1::bigint, $2::bigint, $3, $4)
     on conflict (account_id, channel_id, address) do update set reason = excluded.reason`,
    [accountId, s.channelId, s.address, s.reason],
  );
}

export async function deleteSuppression(
  db: Queryable,
  accountId: string,
  channelId: string,
  address: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    'delete from suppressions where account_id = $1::bigint and channel_id = $2::bigint and address = $3',
    [accountId, channelId, address],
  );
  return rowCount === 1;
}

/** What String.prototype.trim removes (white space and line terminators), for btrim. */
const TRIMMED =
  '\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff';

/**
 * The SQL of an address held by a profile as suppressions are written (comparableAddress in
 * consents.ts): email trimmed and lower-cased; a mobile number in international form (+ or 00)
 * reduced to + and its digits, which is its E.164 form when written with spaces, dashes, dots or
 * parentheses; anything else as it is.
 */
function comparableAddressSql(values: SqlValues, address: string, kind: string | undefined): string {
  switch (kind) {
    case 'email':
    case 'transactional-email':
      return `lower(btrim(${address}, ${values.add(TRIMMED, 'text')}))`;
    case 'mobile':
    case 'sms': {
      const trimmed = `btrim(${address}, ${values.add(TRIMMED, 'text')})`;
      return `case when ${trimmed} ~ '^(\\+|00)' then '+' || regexp_replace(regexp_replace(${trimmed}, '^00', ''), '[^0-9]', '', 'g') else ${address} end`;
    }
    default:
      return address;
  }
}

/**
 * maySend (consents.ts) for statements over many profiles (exports), in two parts:
 * `permitting`, a relation (profile_id) of the canonical profiles that show an opt-in or
 * confirmed-opt-in for one of the topics on the channel (per topic, the most recently modified
 * consent of any member of the cluster), in the order of profile_id, for the statement to join
 * with its profiles; and `sendable(address)`, which holds when an address on the channel (SQL of
 * the section's address attribute value) is not empty and not suppressed on the channel.
 * `account` is the placeholder of the account id; `addressKind` the kind of the keyspace of the
 * channel's addresses. (One pass over the consents, rather than a look-up per profile.)
 */
export function maySendRelation(
  values: SqlValues,
  target: {
    account: string;
    sectionId: string;
    topicIds: string[];
    channelId: string;
    addressKind: string | undefined;
    permitting: string[];
  },
): { permitting: string; sendable: (address: string) => string } {
  const { account } = target;
  const channel = values.add(target.channelId, 'bigint');
  const profile = 'coalesce(m.canonical_id, c.profile_id)';
  return {
    permitting: `select shown.profile_id from (
        select distinct on (${profile}, c.topic_id) ${profile} as profile_id, c.type
        from consents c left join (${clusterMembersSql(account)}) m on m.profile_id = c.profile_id
        where c.account_id = ${account} and c.section_id = ${values.add(target.sectionId, 'bigint')} and c.channel_id = ${channel}
          and c.topic_id = any(${values.add(target.topicIds, 'bigint[]')})
        order by ${profile}, c.topic_id, c.modified_at desc, c.profile_id
      ) shown where shown.type = any(${values.add(target.permitting, 'text[]')}) group by shown.profile_id order by shown.profile_id`,
    sendable: (
      address,
    ) => `(coalesce(${address}, '') <> '' and not exists (select 1 from suppressions s where s.account_id = ${account} and s.channel_id = ${channel}
      and s.address = ${comparableAddressSql(values, address, target.addressKind)}))`,
  };
}

/** Erases the consents, their history and the suppressions of a deleted account. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from consent_history where account_id = $1::bigint', [accountId]);
  await db.query('delete from consents where account_id = $1::bigint', [accountId]);
  await db.query('delete from suppressions where account_id = $1::bigint', [accountId]);
}

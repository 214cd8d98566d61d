import type { Queryable } from '../store/pool.ts';

/** The statements of webhooks (docs/webhooks.md), one function each. */

export interface EndpointRow {
  endpoint_id: string;
  url: string;
  event_types: string[];
  description: string;
  enabled: boolean;
  paused_at: Date | null;
  consecutive_failures: number;
  previous_secret_until: Date | null;
  created_at: Date;
}

// No now() here: these columns are also a RETURNING list, where Citus refuses a function that is
// not immutable. The end of a past overlap is dropped when the row is shown (webhooks.ts view()).
const ENDPOINT_COLUMNS = `endpoint_id::text, url, event_types, description, enabled, paused_at, consecutive_failures,
  previous_secret_until, created_at`;

export async function isSubscribed(db: Queryable, accountId: string, type: string): Promise<boolean> {
  const { rows } = await db.query(
    'select 1 from webhook_endpoints where account_id = $1::bigint and enabled and $2::text = any(event_types) limit 1',
    [accountId, type],
  );
  return rows.length > 0;
}

/** Inserts events in order, with a delivery to each enabled endpoint subscribed to `type`; answers how many deliveries. */
export async function insertEvents(
  db: Queryable,
  accountId: string,
  type: string,
  events: { event_id: string; ordering_key: string | null; data: Record<string, unknown> }[],
): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `with e as (
       insert into webhook_events (account_id, event_id, type, ordering_key, data)
       select $1::bigint, x.event_id, $2::text, x.ordering_key, x.data
       from jsonb_to_recordset($3::jsonb) as x(n int, event_id text, ordering_key text, data jsonb)
       order by x.n
       returning event_seq, ordering_key, created_at
     ), d as (
       insert into webhook_deliveries (account_id, endpoint_id, event_seq, ordering_key, retry_until)
       select $1::bigint, ep.endpoint_id, e.event_seq, e.ordering_key, e.created_at + interval '1 day'
       from e join webhook_endpoints ep on ep.account_id = $1::bigint and ep.enabled and $2::text = any(ep.event_types)
       returning 1
     )
     select count(*)::int as n from d`,
    [accountId, type, JSON.stringify(events.map((e, n) => ({ n, ...e })))],
  );
  return rows[0].n;
}

export async function insertEndpoint(
  db: Queryable,
  accountId: string,
  e: { url: string; event_types: string[]; description: string; enabled: boolean; secret: Buffer },
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `insert into webhook_endpoints (account_id, url, event_types, description, enabled, secret)
     values ($1::bigint, $2, $3::text[], $4, $5, $6) on conflict (account_id, url) do nothing
     returning ${ENDPOINT_COLUMNS}`,
    [accountId, e.url, e.event_types, e.description, e.enabled, e.secret],
  );
  return rows[0];
}

export async function listEndpoints(db: Queryable, accountId: string): Promise<EndpointRow[]> {
  const { rows } = await db.query<EndpointRow>(
    `select ${ENDPOINT_COLUMNS} from webhook_endpoints where account_id = $1::bigint order by endpoint_id`,
    [accountId],
  );
  return rows;
}

export async function getEndpoint(
  db: Queryable,
  accountId: string,
  endpointId: string,
  lock = false,
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `select ${ENDPOINT_COLUMNS} from webhook_endpoints where account_id = $1::bigint and endpoint_id = $2::bigint${lock ? ' for update' : ''}`,
    [accountId, endpointId],
  );
  return rows[0];
}

export async function findEndpointByUrl(db: Queryable, accountId: string, url: string): Promise<string | undefined> {
  const { rows } = await db.query<{ endpoint_id: string }>(
    'select endpoint_id::text from webhook_endpoints where account_id = $1::bigint and url = $2',
    [accountId, url],
  );
  return rows[0]?.endpoint_id;
}

/** Sets the fields given; enabling clears a pause and its failures. */
export async function updateEndpoint(
  db: Queryable,
  accountId: string,
  endpointId: string,
  e: { url?: string; event_types?: string[]; description?: string; enabled?: boolean },
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `update webhook_endpoints set url = coalesce($3, url), event_types = coalesce($4::text[], event_types),
       description = coalesce($5, description), enabled = coalesce($6, enabled),
       paused_at = case when $6 then null else paused_at end,
       consecutive_failures = case when $6 then 0 else consecutive_failures end
     where account_id = $1::bigint and endpoint_id = $2::bigint
     returning ${ENDPOINT_COLUMNS}`,
    [accountId, endpointId, e.url ?? null, e.event_types ?? null, e.description ?? null, e.enabled ?? null],
  );
  return rows[0];
}

/** The pending deliveries of an endpoint due now (it was enabled again). */
export async function dueNow(db: Queryable, accountId: string, endpointId: string): Promise<void> {
  await db.query(
    `update webhook_deliveries set next_attempt_at = now()
     where account_id = $1::bigint and endpoint_id = $2::bigint and status = 'pending' and next_attempt_at > now()`,
    [accountId, endpointId],
  );
}

export async function deleteEndpoint(db: Queryable, accountId: string, endpointId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'delete from webhook_endpoints where account_id = $1::bigint and endpoint_id = $2::bigint',
    [accountId, endpointId],
  );
  return (rowCount ?? 0) > 0;
}

/** The sealed current secret of an endpoint. */
export async function endpointSecret(
  db: Queryable,
  accountId: string,
  endpointId: string,
): Promise<Buffer | undefined> {
  const { rows } = await db.query<{ secret: Buffer }>(
    'select secret from webhook_endpoints where account_id = $1::bigint and endpoint_id = $2::bigint',
    [accountId, endpointId],
  );
  return rows[0]?.secret;
}

/** A new secret; the current one keeps signing beside it until `previousUntil`. */
export async function rotateSecret(
  db: Queryable,
  accountId: string,
  endpointId: string,
  secret: Buffer,
  previousUntil: Date,
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `update webhook_endpoints set previous_secret = secret, previous_secret_until = $4, secret = $3
     where account_id = $1::bigint and endpoint_id = $2::bigint
     returning ${ENDPOINT_COLUMNS}`,
    [accountId, endpointId, secret, previousUntil],
  );
  return rows[0];
}

export interface LeasedDelivery {
  endpoint_id: string;
  event_seq: string;
  attempts: number;
  retries: number;
  retry_until: Date;
  /** The lease's end: it tells this run's lease from a later one (a replay ends a lease). */
  leased_until: Date;
  event_id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: Date;
  url: string;
  secret: Buffer;
  previous_secret: Buffer | null;
}

/**
 * Leases up to `max` deliveries due now, each the oldest pending one of its ordering key on its
 * endpoint (so that a key's events go one after the other), of enabled endpoints not paused.
 */
export async function leaseDue(
  db: Queryable,
  accountId: string,
  max: number,
  leaseSeconds: number,
): Promise<LeasedDelivery[]> {
  // Two statements, since Citus would plan a subquery with a LIMIT inside the update on its own,
  // over every shard. No FOR UPDATE either: the update checks the lease again on each row it takes,
  // after any concurrent lease of it committed, so two workers never lease one delivery.
  const { rows: due } = await db.query<{ key: string; event_seq: string }>(
    `select u.endpoint_id::text || '/' || u.event_seq::text as key, u.event_seq::text
     from webhook_deliveries u
     join webhook_endpoints ep on ep.account_id = $1::bigint and ep.endpoint_id = u.endpoint_id
     where u.account_id = $1::bigint and u.status = 'pending' and u.next_attempt_at <= now()
       and (u.leased_until is null or u.leased_until < now()) and ep.enabled and ep.paused_at is null
       and (u.ordering_key is null or not exists (
         select 1 from webhook_deliveries p
         where p.account_id = $1::bigint and p.endpoint_id = u.endpoint_id and p.status = 'pending'
           and p.ordering_key = u.ordering_key and p.event_seq < u.event_seq))
     order by u.event_seq limit $2`,
    [accountId, max],
  );
  if (due.length === 0) return [];
  const { rows } = await db.query<LeasedDelivery>(
    `with leased as (
       update webhook_deliveries d set leased_until = date_trunc('milliseconds', now() + make_interval(secs => $2))
       where d.account_id = $1::bigint and d.status = 'pending' and (d.leased_until is null or d.leased_until < now())
         and d.event_seq = any($3::bigint[]) and d.endpoint_id::text || '/' || d.event_seq::text = any($4::text[])
       returning d.endpoint_id, d.event_seq, d.attempts, d.retries, d.retry_until, d.leased_until
     )
     select l.endpoint_id::text, l.event_seq::text, l.attempts, l.retries, l.retry_until, l.leased_until, e.event_id, e.type, e.data,
       e.created_at, ep.url, ep.secret, case when ep.previous_secret_until > now() then ep.previous_secret end as previous_secret
     from leased l
     join webhook_events e on e.account_id = $1::bigint and e.event_seq = l.event_seq
     join webhook_endpoints ep on ep.account_id = $1::bigint and ep.endpoint_id = l.endpoint_id
     order by l.event_seq`,
    [accountId, leaseSeconds, due.map((d) => d.event_seq), due.map((d) => d.key)],
  );
  return rows;
}

export interface AttemptResult {
  endpoint_id: string;
  event_seq: string;
  attempt: number;
  attempted_at: Date;
  status: number | null;
  latency_ms: number;
  error: string | null;
  /** What the delivery becomes. */
  state: 'pending' | 'delivered' | 'failed';
  retries: number;
  next_attempt_at: Date | null;
  leased_until: Date;
}

/**
 * Records attempts and the state each leaves its delivery in, releasing their leases: a delivery
 * whose lease is no longer this run's (replayed meanwhile) keeps the state the replay gave it.
 */
export async function recordAttempts(db: Queryable, accountId: string, results: AttemptResult[]): Promise<void> {
  await db.query(
    `with r as (
       select * from jsonb_to_recordset($2::jsonb) as r(endpoint_id bigint, event_seq bigint, attempt int,
         attempted_at timestamptz, status int, latency_ms int, error text, state text, retries int, next_attempt_at timestamptz,
         leased_until timestamptz)
     ), u as (
       update webhook_deliveries d set status = r.state, attempts = r.attempt, retries = r.retries,
         next_attempt_at = coalesce(r.next_attempt_at, d.next_attempt_at), leased_until = null,
         delivered_at = case when r.state = 'delivered' then r.attempted_at else d.delivered_at end
       from r where d.account_id = $1::bigint and d.endpoint_id = r.endpoint_id and d.event_seq = r.event_seq
         and d.leased_until = r.leased_until
       returning 1
     )
     insert into webhook_attempts (account_id, endpoint_id, event_seq, attempt, attempted_at, status, latency_ms, error)
     select $1::bigint, r.endpoint_id, r.event_seq, r.attempt, r.attempted_at, r.status, r.latency_ms, r.error from r
     on conflict do nothing`,
    [accountId, JSON.stringify(results)],
  );
}

/**
 * Counts failures on endpoints: a success clears the count; an endpoint whose count reaches
 * `pauseAfter` (null: never) is paused at `at`. Answers the endpoints this paused, with their counts.
 */
export async function countFailures(
  db: Queryable,
  accountId: string,
  counts: { endpoint_id: string; failures: number; succeeded: boolean }[],
  pauseAfter: number | null,
  at: Date,
): Promise<{ endpoint_id: string; consecutive_failures: number }[]> {
  const { rows } = await db.query<{ endpoint_id: string; consecutive_failures: number; paused_now: boolean }>(
    `update webhook_endpoints ep set
       consecutive_failures = case when x.succeeded then 0 else ep.consecutive_failures + x.failures end,
       paused_at = case when ep.paused_at is null and not x.succeeded and $3::int is not null
         and ep.consecutive_failures + x.failures >= $3::int then $4::timestamptz else ep.paused_at end
     from jsonb_to_recordset($2::jsonb) as x(endpoint_id bigint, failures int, succeeded boolean)
     where ep.account_id = $1::bigint and ep.endpoint_id = x.endpoint_id
     returning ep.endpoint_id::text, ep.consecutive_failures, ep.paused_at = $4::timestamptz as paused_now`,
    [accountId, JSON.stringify(counts), pauseAfter, at],
  );
  return rows.filter((r) => r.paused_now);
}

/** When the account's next pending delivery on an active endpoint is due (its lease's end, if leased); undefined for none. */
export async function nextDue(db: Queryable, accountId: string): Promise<Date | undefined> {
  const { rows } = await db.query<{ due: Date | null }>(
    `select min(greatest(d.next_attempt_at, d.leased_until)) as due from webhook_deliveries d
     join webhook_endpoints ep on ep.account_id = d.account_id and ep.endpoint_id = d.endpoint_id
     where d.account_id = $1::bigint and d.status = 'pending' and ep.enabled and ep.paused_at is null`,
    [accountId],
  );
  return rows[0].due ?? undefined;
}

export interface DeliveryRow {
  event_id: string;
  event_type: string;
  created_at: Date;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  delivered_at: Date | null;
  data: Record<string, unknown>;
  last_attempt: AttemptRow | null;
}

export interface AttemptRow {
  attempt: number;
  attempted_at: string;
  status: number | null;
  latency_ms: number;
  error: string | null;
}

// Every table names the account ($1), the subquery's too: Citus routes a statement to one node
// only when each of its tables is pinned to the account, and refuses a correlated subquery otherwise.
const DELIVERY_SELECT = `select e.event_id, e.type as event_type, e.created_at, d.status, d.attempts, d.next_attempt_at,
    d.delivered_at, e.data, e.event_seq,
    (select json_build_object('attempt', a.attempt, 'attempted_at', a.attempted_at, 'status', a.status,
       'latency_ms', a.latency_ms, 'error', a.error)
     from webhook_attempts a where a.account_id = $1::bigint and a.endpoint_id = d.endpoint_id and a.event_seq = d.event_seq
     order by a.attempt desc limit 1) as last_attempt
  from webhook_deliveries d join webhook_events e on e.account_id = $1::bigint and e.event_seq = d.event_seq`;

/** The deliveries of an endpoint, newest first. */
export async function listDeliveries(
  db: Queryable,
  accountId: string,
  endpointId: string,
  filter: { status?: string; since?: string; until?: string; limit: number },
): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `${DELIVERY_SELECT}
     where d.account_id = $1::bigint and d.endpoint_id = $2::bigint and ($3::text is null or d.status = $3)
       and ($4::timestamptz is null or e.created_at >= $4) and ($5::timestamptz is null or e.created_at < $5)
     order by d.event_seq desc limit $6`,
    [accountId, endpointId, filter.status ?? null, filter.since ?? null, filter.until ?? null, filter.limit],
  );
  return rows;
}

export async function getDelivery(
  db: Queryable,
  accountId: string,
  endpointId: string,
  eventId: string,
): Promise<(DeliveryRow & { attempt_log: AttemptRow[] }) | undefined> {
  const { rows } = await db.query<DeliveryRow & { attempt_log: AttemptRow[] }>(
    `select x.*, coalesce((select json_agg(json_build_object('attempt', a.attempt, 'attempted_at', a.attempted_at,
         'status', a.status, 'latency_ms', a.latency_ms, 'error', a.error) order by a.attempt)
       from webhook_attempts a where a.account_id = $1::bigint and a.endpoint_id = $2::bigint and a.event_seq = x.event_seq), '[]') as attempt_log
     from (${DELIVERY_SELECT} where d.account_id = $1::bigint and d.endpoint_id = $2::bigint and e.event_id = $3) x`,
    [accountId, endpointId, eventId],
  );
  return rows[0];
}

/**
 * Makes deliveries of an endpoint pending again, due now, with a day of retries from now: the one
 * of `eventId`, or those of events written in [since, until) (failed ones only, with `failedOnly`).
 * Answers how many.
 */
export async function replay(
  db: Queryable,
  accountId: string,
  endpointId: string,
  which: { eventId: string } | { since: string; until: string; failedOnly: boolean },
): Promise<number> {
  const one = 'eventId' in which;
  const { rowCount } = await db.query(
    `update webhook_deliveries d set status = 'pending', next_attempt_at = now(), retries = 0, leased_until = null,
       retry_until = now() + interval '1 day'
     from webhook_events e
     where d.account_id = $1::bigint and d.endpoint_id = $2::bigint and e.account_id = d.account_id and e.event_seq = d.event_seq
       and ${one ? 'e.event_id = $3' : "e.created_at >= $3::timestamptz and e.created_at < $4::timestamptz and (not $5 or d.status = 'failed')"}`,
    one ? [accountId, endpointId, which.eventId] : [accountId, endpointId, which.since, which.until, which.failedOnly],
  );
  return rowCount ?? 0;
}

/**
 * Removes up to `max` events of the account written before `before` none of whose deliveries is
 * pending, oldest first, with their deliveries and attempts (the foreign keys cascade); answers how many.
 */
export async function sweepEvents(db: Queryable, accountId: string, before: Date, max: number): Promise<number> {
  const { rowCount } = await db.query(
    `delete from webhook_events e
     where e.account_id = $1::bigint and e.event_seq in (
       select o.event_seq from webhook_events o
       where o.account_id = $1::bigint and o.created_at < $2::timestamptz
         and not exists (select 1 from webhook_deliveries d
           where d.account_id = $1::bigint and d.event_seq = o.event_seq and d.status = 'pending')
       order by o.created_at limit $3)`,
    [accountId, before, max],
  );
  return rowCount ?? 0;
}

/** When the account's oldest event none of whose deliveries is pending was written; undefined for none. */
export async function oldestSettledEvent(db: Queryable, accountId: string): Promise<Date | undefined> {
  const { rows } = await db.query<{ created_at: Date }>(
    `select o.created_at from webhook_events o
     where o.account_id = $1::bigint and not exists (select 1 from webhook_deliveries d
       where d.account_id = $1::bigint and d.event_seq = o.event_seq and d.status = 'pending')
     order by o.created_at limit 1`,
    [accountId],
  );
  return rows[0]?.created_at;
}

/** Erases the webhooks of an account being deleted: endpoints with their deliveries and attempts, and events. */
export async function deleteAccountRows(db: Queryable, accountId: string): Promise<void> {
  await db.query('delete from webhook_endpoints where account_id = $1::bigint', [accountId]);
  await db.query('delete from webhook_events where account_id = $1::bigint', [accountId]);
}

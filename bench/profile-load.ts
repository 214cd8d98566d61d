/**
 * The set-based bulk load of profiles the benches share (bench/profiles.ts, bench/citus.ts): an
 * account's definitions, and `count` profiles in one INSERT … SELECT generate_series with
 * data-modifying CTEs, straight into the tables (profiles, profile_identifiers in the email
 * keyspace, profile_sections with the Shop section's email, first and last name, city, loyalty
 * points and newsletter flag), in one transaction. The statement runs unchanged on a Citus
 * coordinator (the rows go through it to the shards).
 */
import type pg from 'pg';
import { setTimes } from '../src/profiles/queries.ts';

export interface Ids {
  ns: string;
  emailKeyspace: { id: string; discriminator: string };
  webKeyspace: string;
  shop: { id: string; discriminator: string };
  /** Attribute discriminator → its current version id in the Shop section. */
  versions: Map<string, string>;
  pageView: string;
}

/** The key of the n-th loaded profile of a load with `prefix` in the email keyspace. */
export const loadedEmail = (n: number | string, prefix = 'p') => `${prefix}${n}@bench.example.com`;

/** An account's keyspaces, Shop section, attribute versions and page-view event version (the demo manifest's). */
export async function definitionsOf(db: Pick<pg.ClientBase, 'query'>, accountId: string): Promise<Ids> {
  const keyspaces = (
    await db.query<{ keyspace_id: string; kind: string; discriminator: string }>(
      'select keyspace_id, kind, discriminator from keyspaces where account_id = $1',
      [accountId],
    )
  ).rows;
  const ks = (kind: string) => {
    const k = keyspaces.find((r) => r.kind === kind);
    if (!k) throw new Error(`the account has no ${kind} keyspace`);
    return { id: k.keyspace_id, discriminator: k.discriminator };
  };
  const email = ks('email');
  const ns = email.discriminator.replace(/\.keyspaces\.email$/, '');
  const shopDiscriminator = `${ns}.sections.user-created.shop`;
  const shop = (
    await db.query<{ section_id: string }>(
      'select section_id from sections where account_id = $1 and discriminator = $2',
      [accountId, shopDiscriminator],
    )
  ).rows[0];
  if (!shop) throw new Error(`the account has no section ${shopDiscriminator}`);
  const versions = new Map(
    (
      await db.query<{ discriminator: string; version_id: string }>(
        `select distinct on (a.discriminator) a.discriminator, v.version_id from attributes a join attribute_versions v using (account_id, attribute_id)
     where a.account_id = $1 and a.section_id = $2 and v.deprecated_at is null order by a.discriminator, v.ordinal desc`,
        [accountId, shop.section_id],
      )
    ).rows.map((r) => [r.discriminator, r.version_id]),
  );
  const pageView = (
    await db.query<{ version_id: string }>(
      `select v.version_id from events e join event_versions v using (account_id, event_id)
     where e.account_id = $1 and e.section_id = $2 and e.discriminator = $3 order by v.ordinal desc limit 1`,
      [accountId, shop.section_id, `${ns}.events.page-view`],
    )
  ).rows[0];
  if (!pageView) throw new Error('the Shop section has no page-view event');
  return {
    ns,
    emailKeyspace: email,
    webKeyspace: ks('web').discriminator,
    shop: { id: shop.section_id, discriminator: shopDiscriminator },
    versions,
    pageView: pageView.version_id,
  };
}

export interface Loaded {
  loadS: number;
  analyzeS: number;
  rows: Record<string, number>;
  foreignKeyChecks: boolean;
}

/**
 * Loads `count` profiles (keys loadedEmail(1…count, prefix)) in one transaction, set-based; returns
 * the seconds it took (load, then VACUUM (ANALYZE) unless `vacuum` is false) and the account's rows.
 */
export async function loadProfiles(
  db: pg.ClientBase,
  accountId: string,
  ids: Ids,
  count: number,
  { prefix = 'p', vacuum = true } = {},
): Promise<Loaded> {
  const version = (name: string) => {
    const v = ids.versions.get(`${ids.ns}.attributes.${name}`);
    if (!v) throw new Error(`the Shop section has no attribute ${ids.ns}.attributes.${name}`);
    return v;
  };
  // The rows reference profiles created by the same statement, so the foreign key checks (row by
  // row triggers, about half the time) can be skipped, as in any bulk load: replica mode, which
  // needs a superuser (the embedded database's user is one). SET LOCAL ends with the transaction.
  const superuser =
    (await db.query<{ rolsuper: boolean }>('select rolsuper from pg_roles where rolname = current_user')).rows[0]
      ?.rolsuper === true;
  const started = performance.now();
  await db.query('begin');
  try {
    if (superuser) await db.query('set local session_replication_role = replica');
    const { rows } = await db.query<{ n: number }>(
      `with src as (
         -- Export keys are UUIDs derived from the prefix and n, so that the inserted rows can be matched to n.
         select n, md5('audience-bench-' || $11::text || n)::uuid::text as export_key from generate_series(1, $2::int) n
       ), p as (
         insert into profiles (account_id, export_key) select $1::bigint, export_key from src order by n
         returning profile_id, export_key
       ), m as (
         select src.n, p.profile_id, p.export_key from p join src using (export_key)
       ), i as (
         insert into profile_identifiers (account_id, keyspace_id, profile_key, profile_id)
         select $1::bigint, $3::bigint, $11::text || n || '@bench.example.com', profile_id from m
       ), s as (
         -- With the set times of the values, as written by the API (migration 0015).
         insert into profile_sections (account_id, profile_id, section_id, attributes, attribute_set_at)
         select $1::bigint, profile_id, $4::bigint, a, ${setTimes('null::jsonb', 'null::jsonb', 'a', 'now()')} from m cross join lateral jsonb_build_object(
           $5::text, $11::text || n || '@bench.example.com',
           $6::text, 'First' || n,
           $7::text, 'Last' || n,
           $8::text, (array['Oslo', 'Bergen', 'Trondheim', 'Stavanger'])[1 + n % 4],
           $9::text, round((n % 1000) * 1.5, 1),
           $10::text, n % 2 = 0) a
       )
       select count(*)::int as n from m`,
      [
        accountId,
        count,
        ids.emailKeyspace.id,
        ids.shop.id,
        version('email'),
        version('firstname'),
        version('lastname'),
        version('user-created.city'),
        version('user-created.loyalty-points'),
        version('user-created.newsletter-reader'),
        prefix,
      ],
    );
    await db.query('commit');
    if (rows[0].n !== count) throw new Error(`loaded ${rows[0].n} profiles, not ${count}`);
  } catch (err) {
    await db.query('rollback').catch(() => {});
    throw err;
  }
  const loaded = performance.now();
  // As after a real import, once autovacuum has run: hint bits and visibility map set, statistics
  // current. Otherwise autovacuum would do this during the measured runs.
  if (vacuum) await db.query('vacuum (analyze) profiles, profile_identifiers, profile_sections');
  const analyzed = performance.now();
  const counts = (
    await db.query<{ t: string; n: number }>(
      `select 'profiles' as t, count(*)::int as n from profiles where account_id = $1
     union all select 'profile_identifiers', count(*)::int from profile_identifiers where account_id = $1
     union all select 'profile_sections', count(*)::int from profile_sections where account_id = $1`,
      [accountId],
    )
  ).rows;
  return {
    loadS: (loaded - started) / 1000,
    analyzeS: (analyzed - loaded) / 1000,
    rows: Object.fromEntries(counts.map((c) => [c.t, c.n])),
    foreignKeyChecks: !superuser,
  };
}

// The distributed deployment on a real Citus cluster (docs/scaling.md): where an account's rows
// live, growing the cluster while it serves, and moving a single-node database onto a cluster.
// Runs under `npm run test:citus` only, which starts a coordinator, two workers and a spare node
// (CITUS_SPARE_NODE_URL); under `npm test` it is skipped.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SHOP, TestServer, testDatabase, type Response } from './app.ts';
import { createDatabase, dropDatabase, withClient, workerNodes } from './databases.ts';
import { builtIn, userCreated } from './names.ts';
import { withDatabase } from '../src/store/embedded.ts';
import { migrate } from '../src/store/migrate.ts';
import { createPool } from '../src/store/pool.ts';

const run = promisify(execFile);
const SPARE = process.env.CITUS_SPARE_NODE_URL;
const PG_BIN = '/usr/lib/postgresql/15/bin';

const EMAIL = builtIn('keyspaces', 'email');
const SHOP_S = userCreated('sections', 'shop');
const FIRST_NAME = builtIn('attributes', 'firstname');
const PAGE_VIEW = 'com.vendor1.events.page-view';
const WEEKLY = userCreated('topics', 'weekly-news');
const EMAIL_CH = builtIn('channels', 'email');
const NO_LIMITS = {
  requests_per_second: null,
  token_requests_per_minute: null,
  profile_key_operations_per_second: null,
};

const enc = encodeURIComponent;
const profilePath = (key: string) => `/audience/keyspaces/${EMAIL}/profiles/${enc(key)}/sections/${SHOP_S}`;

/** Host and port of a node URL, as Citus names nodes. */
function node(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 5432) };
}

/** A database migrated on `url`, served by a TestServer of its own. */
async function migrated(url: string): Promise<void> {
  const pool = createPool(url, 2);
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
}

/** One account of a server with its token, and the helpers of its profiles. */
class Account {
  readonly server: TestServer;
  readonly accountId: string;
  readonly token: string;
  constructor(server: TestServer, accountId: string, token: string) {
    this.server = server;
    this.accountId = accountId;
    this.token = token;
  }

  static async create(server: TestServer): Promise<Account> {
    const { accountId, token } = await server.login(SHOP, NO_LIMITS);
    return new Account(server, accountId, token);
  }

  createProfile(key: string): Promise<Response> {
    return this.server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP_S}/profiles`, {
      token: this.token,
      body: { profile_key: key },
    });
  }

  setFirstName(key: string, value: string): Promise<Response> {
    return this.server.request('PATCH', `/v2${profilePath(key)}/attributes`, {
      token: this.token,
      body: { [FIRST_NAME]: value },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
  }

  private versions: Map<string, string> | undefined;
  /** GET attributes of a profile, keyed by discriminator (the answer keys them by version id). */
  async attributes(key: string): Promise<{ status: number; values: Record<string, unknown> }> {
    if (!this.versions) {
      const r = await this.server.request('GET', `/audience/sections/${SHOP_S}/attributes`, { token: this.token });
      expect(r.status, r.text).toBe(200);
      this.versions = new Map(r.body.items.flatMap((a: any) => a.versions.map((v: any) => [v.id, a.discriminator])));
    }
    const r = await this.server.request('GET', `${profilePath(key)}/attributes`, { token: this.token });
    if (r.status !== 200) return { status: r.status, values: {} };
    return {
      status: 200,
      values: Object.fromEntries(
        Object.entries(r.body as Record<string, unknown>).map(([v, value]) => [this.versions!.get(v) ?? v, value]),
      ),
    };
  }
}

/** The shard of `table` that holds an account, and the node it is placed on. */
async function placement(
  db: pg.ClientBase | pg.Pool,
  table: string,
  accountId: string,
): Promise<{ shardid: string; shard: string; host: string; port: number }> {
  const { rows } = await db.query<{ shardid: string; shard: string; host: string; port: number }>(
    `select s.shardid::text, s.shard_name as shard, s.nodename as host, s.nodeport as port from citus_shards s
     where s.shardid = get_shard_id_for_distribution_column($1::regclass, $2::bigint)`,
    [table, accountId],
  );
  expect(rows).toHaveLength(1);
  return rows[0];
}

/** Two new accounts whose rows are on different workers, each with its placement. */
async function accountsOnTwoWorkers(
  app: TestServer,
  db: pg.ClientBase,
): Promise<[Account, Awaited<ReturnType<typeof placement>>][]> {
  // Accounts until two of them hash to shards placed on different workers.
  const first = await Account.create(app);
  const firstAt = await placement(db, 'profiles', first.accountId);
  for (let i = 0; i < 40; i++) {
    const candidate = await Account.create(app);
    const at = await placement(db, 'profiles', candidate.accountId);
    if (at.port !== firstAt.port || at.host !== firstAt.host)
      return [
        [first, firstAt],
        [candidate, at],
      ];
  }
  throw new Error('no account on the other worker after 40 accounts');
}

const ok = (status: number) => status >= 200 && status < 300;

/**
 * Starts a node again after it was killed, as scripts/citus.sh starts it (as the postgres user,
 * logging beside its data directory); nothing when it answers. (pg_ctl status would take the
 * killed postmaster, a zombie until reaped, for a running server.) A start right after the kill can
 * find the dead server's backends still going away: it is tried again until it starts.
 */
async function startNode(victim: { url: string; dataDir: string }): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    if (
      await withClient(victim.url, (c) => c.query('select 1')).then(
        () => true,
        () => false,
      )
    )
      return;
    try {
      await run('runuser', [
        '-u',
        'postgres',
        '--',
        `${PG_BIN}/pg_ctl`,
        '-D',
        victim.dataDir,
        '-l',
        `${victim.dataDir}.log`,
        '-w',
        '-t',
        '120',
        'start',
      ]);
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
    }
  }
}

/** Rows of every table of the public schema, by table name. */
/**
 * Every profile of the accounts reads back, and each one whose write was acknowledged (`lastValue`,
 * the value of its last 204) holds that value: no acknowledged write was lost.
 */
async function expectAcknowledgedWrites(
  accounts: Account[],
  keys: Map<Account, string[]>,
  lastValue: Map<string, string>,
): Promise<void> {
  let checked = 0;
  for (const account of accounts)
    for (const key of keys.get(account)!) {
      const { status, values } = await account.attributes(key);
      expect(status, key).toBe(200);
      if (lastValue.has(key)) {
        expect(values[FIRST_NAME], key).toBe(lastValue.get(key));
        checked++;
      }
    }
  expect(checked).toBeGreaterThan(0);
}

async function rowCounts(db: pg.ClientBase): Promise<Record<string, number>> {
  const { rows: tables } = await db.query<{ name: string }>(
    `select c.relname as name from pg_class c where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
       and not c.relispartition order by 1`,
  );
  const counts: Record<string, number> = {};
  for (const { name } of tables)
    counts[name] = (await db.query<{ n: number }>(`select count(*)::int as n from public."${name}"`)).rows[0].n;
  return counts;
}

describe.skipIf(!SPARE)('on a Citus cluster', () => {
  let server: string;
  beforeAll(() => {
    server = inject('databaseUrl');
  });

  describe('distribution by account', () => {
    let app: TestServer;
    let db: pg.Client;
    beforeAll(async () => {
      app = await TestServer.start({ LOG_LEVEL: 'error' });
      db = new pg.Client({ connectionString: await testDatabase() });
      await db.connect();
    });
    afterAll(async () => {
      await app?.close();
      await db?.end();
    });

    it('puts the rows of two accounts on different workers, each on the worker of its shard', async () => {
      const workers = await workerNodes(server);
      expect(workers).toHaveLength(2);
      const [[first, firstAt], [second, secondAt]] = await accountsOnTwoWorkers(app, db);

      const name = new URL(await testDatabase()).pathname.slice(1);
      for (const [account, at] of [
        [first, firstAt],
        [second, secondAt],
      ] as const) {
        const key = `${crypto.randomUUID()}@example.com`;
        expect((await account.createProfile(key)).status).toBe(201);
        const patched = await account.setFirstName(key, `Name of ${account.accountId}`);
        expect(patched.status, patched.text).toBe(204);
        expect((await account.attributes(key)).values[FIRST_NAME]).toBe(`Name of ${account.accountId}`);
        // The rows are in the shard table on that worker, and the other worker has no such shard.
        const here = workers.find((w) => node(w).port === at.port && node(w).host === at.host)!;
        const there = workers.find((w) => w !== here)!;
        expect(here, `placement ${at.host}:${at.port} is not a worker`).toBeDefined();
        const rows = await withClient(withDatabase(here, name), (w) =>
          w.query<{ n: number }>(`select count(*)::int as n from public."${at.shard}" where account_id = $1::bigint`, [
            account.accountId,
          ]),
        );
        expect(rows.rows[0].n).toBe(1);
        const sections = await placement(db, 'profile_sections', account.accountId);
        expect([sections.host, sections.port]).toEqual([at.host, at.port]);
        const elsewhere = await withClient(withDatabase(there, name), (w) =>
          w.query('select 1 from pg_class where relname = $1', [at.shard]),
        );
        expect(elsewhere.rows).toHaveLength(0);
      }
    });
  });
  describe('a worker that fails', () => {
    let app: TestServer;
    let db: pg.Client;
    let victim: { url: string; dataDir: string } | undefined;
    beforeAll(async () => {
      app = await TestServer.start({ LOG_LEVEL: 'fatal' });
      db = new pg.Client({ connectionString: await testDatabase() });
      await db.connect();
    });
    afterAll(async () => {
      // A failed run leaves no worker down for the tests after it.
      if (victim) await startNode(victim);
      await app?.close();
      await db?.end();
    });

    it('answers 503 with Retry-After for the accounts of a killed worker, serves the others, and all again once it is back', async () => {
      const [[hit, hitAt], [spared]] = await accountsOnTwoWorkers(app, db);
      const url = (await workerNodes(server)).find((w) => node(w).host === hitAt.host && node(w).port === hitAt.port)!;
      victim = {
        url,
        dataDir: await withClient(url, async (c) => (await c.query('show data_directory')).rows[0].data_directory),
      };
      const keys = new Map<Account, string[]>();
      for (const account of [hit, spared]) {
        keys.set(account, []);
        for (let i = 0; i < 4; i++) {
          const key = `${crypto.randomUUID()}@example.com`;
          expect((await account.createProfile(key)).status).toBe(201);
          keys.get(account)!.push(key);
        }
      }

      // What each account was answered, in the phase it was answered in; the last value each 204 set.
      type Phase = 'before' | 'down' | 'back';
      let phase: Phase = 'before';
      const answered = new Map<Account, Record<Phase, Map<number, number>>>(
        [hit, spared].map((a) => [a, { before: new Map(), down: new Map(), back: new Map() }]),
      );
      const count = (account: Account, p: Phase, ok: (status: number) => boolean) =>
        [...answered.get(account)![p]].reduce((n, [status, times]) => n + (ok(status) ? times : 0), 0);
      const failures: string[] = [];
      const lastValue = new Map<string, string>();
      const note = (account: Account, what: string, r: Response) => {
        const seen = answered.get(account)![phase];
        seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
        if (r.status === 503 && r.headers.get('retry-after') === null)
          failures.push(`${what}: 503 without Retry-After`);
        if (r.status >= 500 && r.status !== 503) failures.push(`${what}: ${r.status} ${r.text}`);
      };
      let running = true;
      const writer = async (account: Account) => {
        for (let n = 0; running; n++) {
          const key = keys.get(account)![n % 4];
          const value = `v${n}-${crypto.randomBytes(3).toString('hex')}`;
          lastValue.delete(key); // until answered, either value may be the one kept
          try {
            const r = await account.setFirstName(key, value);
            note(account, 'patch', r);
            if (r.status === 204) lastValue.set(key, value);
          } catch (err) {
            failures.push(`patch failed: ${(err as Error).message}`);
          }
        }
      };
      const reader = async (account: Account) => {
        for (let n = 0; running; n++) {
          try {
            const r = await account.server.request('GET', `${profilePath(keys.get(account)![n % 4])}/attributes`, {
              token: account.token,
            });
            note(account, 'read', r);
          } catch (err) {
            failures.push(`read failed: ${(err as Error).message}`);
          }
        }
      };
      const load = Promise.all([hit, spared].flatMap((a) => [writer(a), reader(a)]));
      const until = async (what: string, done: () => boolean) => {
        while (!done()) {
          if (!running) throw new Error(`stopped before ${what}`);
          await new Promise((r) => setImmediate(r));
        }
      };
      try {
        await until(
          'both accounts are served',
          () => count(hit, 'before', ok) > 10 && count(spared, 'before', ok) > 10,
        );
        // kill -9 of the worker's postmaster: its backends go with it, and its connections are refused.
        const pid = Number((await fs.readFile(path.join(victim.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
        process.kill(pid, 'SIGKILL');
        phase = 'down';
        await until('503 for the account on the killed worker, answers for the other', () => {
          return count(hit, 'down', (s) => s === 503) > 10 && count(spared, 'down', ok) > 20;
        });
        await startNode(victim);
        phase = 'back';
        await until('the account on the restarted worker is served again', () => count(hit, 'back', ok) > 20);
      } finally {
        running = false;
        await load;
      }

      expect(failures).toEqual([]);
      const statuses = (a: Account, p: Phase) => [...answered.get(a)![p].keys()].sort();
      // While its worker was down, the account answered 503 (and requests on their way as it died
      // their answers); the other account was served throughout, and both before and after.
      expect(
        statuses(hit, 'down').every((s) => [200, 204, 503].includes(s)),
        JSON.stringify(statuses(hit, 'down')),
      ).toBe(true);
      for (const p of ['before', 'down', 'back'] as const) expect(statuses(spared, p).every(ok), p).toBe(true);
      expect(statuses(hit, 'before').every(ok)).toBe(true);
      expect(count(hit, 'back', ok)).toBeGreaterThan(0);

      // Every acknowledged write reads back.
      await expectAcknowledgedWrites([hit, spared], keys, lastValue);
    }, 180_000);
  });
  describe('growing the cluster while it serves', () => {
    const name = `citus_grow_${crypto.randomBytes(4).toString('hex')}`;
    let url: string;
    let app: TestServer | undefined;
    let db: pg.Client;
    beforeAll(async () => {
      url = await createDatabase(server, name);
      // Six shards per table (two workers hold three each): a third node then takes two of them.
      await withClient(server, (c) => c.query(`alter database ${name} set citus.shard_count = 6`));
      await migrated(url);
      app = await TestServer.start({}, { database: url });
      db = new pg.Client({ connectionString: url });
      await db.connect();
    });
    afterAll(async () => {
      await app?.close();
      await db?.end();
      await dropDatabase(server, name);
      await withClient(SPARE!, (c) => c.query(`drop database if exists ${name} with (force)`));
    });

    it('answers every request while a new node joins and shards move to it, and keeps every acknowledged write', async () => {
      // Accounts until every shard group holds one, so that whichever shards move, writes go to them.
      const {
        rows: [{ shards }],
      } = await db.query<{ shards: number }>(
        `select count(*)::int as shards from pg_dist_shard where logicalrelid = 'profiles'::regclass`,
      );
      expect(shards).toBe(6);
      const accounts: Account[] = [];
      const covered = new Set<string>();
      for (let i = 0; i < 60 && covered.size < shards; i++) {
        const account = await Account.create(app!);
        const shard = (await placement(db, 'profiles', account.accountId)).shardid;
        if (covered.has(shard)) continue;
        covered.add(shard);
        accounts.push(account);
      }
      expect(covered.size).toBe(shards);

      // What each writer was told: the profiles created (201), and the last value a 204 PATCH set.
      const statuses = new Map<number, number>();
      const failures: string[] = [];
      const created = new Map<Account, string[]>(accounts.map((a) => [a, []]));
      const lastValue = new Map<string, string>();
      const note = (what: string, r: { status: number; text?: string }) => {
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status >= 500) failures.push(`${what}: ${r.status} ${r.text ?? ''}`);
      };
      for (const account of accounts) {
        for (let i = 0; i < 3; i++) {
          const key = `${crypto.randomUUID()}@example.com`;
          const r = await account.createProfile(key);
          expect(r.status, r.text).toBe(201);
          created.get(account)!.push(key);
        }
      }

      let moving = true;
      let writes = 0;
      // One writer per account (each profile is written by one writer, one request at a time, so
      // its last acknowledged value is the one it must keep), two in flight per account, and readers.
      const writer = async (account: Account, lane: number) => {
        let n = 0;
        while (moving) {
          n++;
          try {
            if (n % 4 === 0) {
              const key = `${crypto.randomUUID()}@example.com`;
              const r = await account.createProfile(key);
              note('create', r);
              if (r.status === 201) created.get(account)!.push(key);
            } else {
              const keys = created.get(account)!.filter((_, i) => i % 2 === lane);
              const key = keys[n % keys.length];
              const value = `v${lane}-${n}-${crypto.randomBytes(3).toString('hex')}`;
              lastValue.delete(key); // until answered, either value may be the one kept
              const r = await account.setFirstName(key, value);
              note('patch', r);
              if (r.status === 204) lastValue.set(key, value);
            }
            writes++;
          } catch (err) {
            failures.push(`request failed: ${(err as Error).message}`);
          }
        }
      };
      const reader = async () => {
        while (moving) {
          for (const account of accounts) {
            const keys = created.get(account)!;
            try {
              note('read', await account.attributes(keys[Math.floor(Math.random() * keys.length)]));
            } catch (err) {
              failures.push(`read failed: ${(err as Error).message}`);
            }
          }
        }
      };
      const load = Promise.all([...accounts.flatMap((a) => [writer(a, 0), writer(a, 1)]), reader(), reader()]);

      // The spare node joins: the database and the extension on it, then the coordinator adds it and
      // rebalances (shard_transfer_mode auto: logical replication while the shards take writes).
      const spare = node(SPARE!);
      try {
        await withClient(SPARE!, (c) => c.query(`create database ${name}`));
        await withClient(withDatabase(SPARE!, name), (c) => c.query('create extension citus'));
        const before = writes;
        await db.query('select citus_add_node($1, $2)', [spare.host, spare.port]);
        await db.query('select citus_rebalance_start()');
        for (;;) {
          const {
            rows: [status],
          } = await db.query<{ state: string; details: unknown }>(
            'select state::text, details from citus_rebalance_status() order by job_id desc limit 1',
          );
          if (status.state === 'finished') break;
          // DEBUG_REBALANCE=1 shows the moves as they go.
          if (process.env.DEBUG_REBALANCE) console.log(writes, status.state, JSON.stringify(status.details));
          if (['failed', 'cancelled'].includes(status.state))
            throw new Error(`rebalance ${status.state}: ${JSON.stringify(status.details)}`);
          await new Promise((r) => setTimeout(r, process.env.DEBUG_REBALANCE ? 3000 : 200));
        }
        expect(writes, 'no write was answered while the shards moved').toBeGreaterThan(before);
      } finally {
        moving = false;
        await load;
      }

      expect(failures).toEqual([]);
      expect(
        [...statuses.keys()].filter((s) => s >= 300),
        JSON.stringify(Object.fromEntries(statuses)),
      ).toEqual([]);

      // Shards of the distributed tables sit on the new node, and some of our accounts with them.
      const { rows: onSpare } = await db.query<{ table: string; shards: number }>(
        `select table_name::text as table, count(*)::int as shards from citus_shards
         where citus_table_type = 'distributed' and nodename = $1 and nodeport = $2 group by 1`,
        [spare.host, spare.port],
      );
      expect(onSpare.map((r) => r.table)).toEqual(
        expect.arrayContaining(['profiles', 'profile_sections', 'attribute_history', 'consents']),
      );
      const moved = [];
      for (const account of accounts) {
        const at = await placement(db, 'profile_sections', account.accountId);
        if (at.port === spare.port && at.host === spare.host) moved.push(account);
      }
      expect(moved.length).toBeGreaterThan(0);

      // Every acknowledged write reads back through HTTP.
      await expectAcknowledgedWrites(accounts, created, lastValue);
    }, 180_000);
  });
  describe('moving a single-node database to the cluster', () => {
    const suffix = crypto.randomBytes(4).toString('hex');
    const plain = `citus_plain_${suffix}`;
    const moved = `citus_moved_${suffix}`;
    let dir: string;
    afterAll(async () => {
      await withClient(server, (c) => c.query(`drop database if exists ${plain} with (force)`));
      await dropDatabase(server, moved);
      if (dir) await fs.rm(dir, { recursive: true, force: true });
    });

    it('restores a pg_dump of a plain database into a Citus database, which migrate distributes with its rows', async () => {
      // A database without the citus extension, on the coordinator alone: plain PostgreSQL.
      await withClient(server, (c) => c.query(`create database ${plain}`));
      const plainUrl = withDatabase(server, plain);
      await migrated(plainUrl);
      const keys: string[] = [];
      let account: Account;
      const single = await TestServer.start({}, { database: plainUrl });
      try {
        account = await Account.create(single);
        await Account.create(single);
        for (let i = 0; i < 5; i++) {
          const key = `moved-${i}@example.com`;
          expect((await account.createProfile(key)).status).toBe(201);
          expect((await account.setFirstName(key, `First ${i}`)).status).toBe(204);
          expect((await account.setFirstName(key, `Name ${i}`)).status).toBe(204);
          const consent = await single.request(
            'POST',
            `/v2/audience/keyspaces/${EMAIL}/profiles/${enc(key)}/sections/${SHOP_S}/consents`,
            {
              token: account.token,
              body: { topic_discriminator: WEEKLY, channel_discriminator: EMAIL_CH, type: 'opt-in', reason: 'moved' },
            },
          );
          expect(consent.status, consent.text).toBeLessThan(300);
          keys.push(key);
        }
        const events = await single.request('GET', `/audience/sections/${SHOP_S}/events`, { token: account.token });
        const version = events.body.items.find((e: any) => e.discriminator === PAGE_VIEW).versions[0].id;
        const posted = await single.request('POST', `${profilePath(keys[0])}/events`, {
          token: account.token,
          body: { items: [{ event_time: '2026-01-02T03:04:05Z', version_id: version, data: { title: 'Home' } }] },
        });
        expect(posted.status, posted.text).toBe(204);
      } finally {
        await single.close();
      }
      const before = await withClient(plainUrl, rowCounts);
      for (const table of [
        'accounts',
        'profiles',
        'profile_sections',
        'attribute_history',
        'consents',
        'profile_events',
      ]) {
        expect(before[table], table).toBeGreaterThan(0);
      }

      // pg_dump of the plain database, restored with psql into a database with citus on every node.
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-move-'));
      const dump = path.join(dir, 'dump.sql');
      const at = node(server);
      const connection = ['-h', at.host, '-p', String(at.port), '-U', 'postgres'];
      await run(`${PG_BIN}/pg_dump`, [...connection, '--no-owner', '--no-privileges', '-f', dump, plain]);
      const movedUrl = await createDatabase(server, moved);
      await run(`${PG_BIN}/psql`, [...connection, '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', dump, moved]);
      await migrated(movedUrl);
      // Citus copied the rows to the shards and left the coordinator's own copy on disk, unseen.
      const { rows: local } = await withClient(movedUrl, (c) =>
        c.query<{ table: string }>(
          `select truncate_local_data_after_distributing_table(logicalrelid), logicalrelid::regclass::text as table
         from pg_dist_partition order by 2`,
        ),
      );
      expect(local.length).toBeGreaterThan(20);

      const after = await withClient(movedUrl, async (c) => {
        const { rows } = await c.query<{ table: string; method: string }>(
          `select logicalrelid::regclass::text as table, partmethod as method from pg_dist_partition`,
        );
        const distributed = Object.fromEntries(rows.map((r) => [r.table, r.method]));
        expect(distributed.accounts).toBe('n');
        for (const table of ['profiles', 'profile_sections', 'attribute_history', 'consents', 'profile_events'])
          expect(distributed[table], table).toBe('h');
        expect(distributed.jobs).toBeUndefined();
        const counts = await rowCounts(c);
        // The rows sit in the shards on the workers, not only in the coordinator's tables.
        const {
          rows: [{ n }],
        } = await c.query<{ n: number }>(
          `select count(*)::int as n from citus_shards where table_name = 'profiles'::regclass and nodeport <> $1 and shard_size > 0`,
          [at.port],
        );
        expect(n).toBeGreaterThan(0);
        return counts;
      });
      expect(after).toEqual(before);

      // The service on the new database reads what the old one wrote.
      const distributed = await TestServer.start({}, { database: movedUrl });
      try {
        const there = new Account(
          distributed,
          account!.accountId,
          await distributed.token(await distributed.createKey(account!.accountId)),
        );
        for (const [i, key] of keys.entries()) {
          const { status, values } = await there.attributes(key);
          expect(status).toBe(200);
          expect(values[FIRST_NAME]).toBe(`Name ${i}`);
        }
        const consents = await distributed.request(
          'GET',
          `/v2/audience/keyspaces/${EMAIL}/profiles/${enc(keys[0])}/sections/${SHOP_S}/consents`,
          { token: there.token },
        );
        expect(consents.status, consents.text).toBe(200);
        expect(consents.body.items.map((c: any) => [c.topic_discriminator, c.type])).toContainEqual([WEEKLY, 'opt-in']);
        const events = await distributed.request('GET', `${profilePath(keys[0])}/events`, { token: there.token });
        expect(events.status, events.text).toBe(200);
        expect(events.body.items).toHaveLength(1);
        // And it writes on.
        expect((await there.setFirstName(keys[1], 'After the move')).status).toBe(204);
        expect((await there.attributes(keys[1])).values[FIRST_NAME]).toBe('After the move');
        expect((await there.createProfile('new-after-move@example.com')).status).toBe(201);
      } finally {
        await distributed.close();
      }
    }, 120_000);
  });
});

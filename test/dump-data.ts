import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { SHOP, TestServer } from './app.ts';
import { withClient } from './databases.ts';
import { transactionalActivity } from './transactional-http.ts';
import { sendImportFile } from './imports-http.ts';

// What the tests of `audience dump` and `audience restore` share (test/dump.test.ts, and the hops
// through PostgreSQL 15 and Citus of test/dump-hops.test.ts): a database filled through the API with
// a bit of everything, the digest of every table, the answers of a fixed set of reads, and the
// commands run as the real program.

const ROOT = path.resolve(import.meta.dirname, '..');
const execFileAsync = promisify(execFile);

const V = 'com.vendor1';
const S = `${V}.sections.user-created.shop`;
const EMAIL = `${V}.keyspaces.email`;
const WEB = `${V}.keyspaces.web`;
const WEEKLY = `${V}.topics.user-created.weekly-news`;
const SEGMENT = `${V}.segments.user-created.big-spenders`;
const enc = encodeURIComponent;
const profile = (key: string, keyspace = EMAIL) => `/audience/keyspaces/${keyspace}/profiles/${enc(key)}/sections/${S}`;

export interface Filled {
  accountId: string;
  /** A token issued before the dump: it must work after the restore (its signing key is in the dump). */
  token: string;
  credentials: { clientId: string; clientSecret: string };
  /** GET requests whose answers must be the same on every copy. */
  reads: string[];
}

async function ok(
  pending: Promise<{ status: number; text: string; body: any }>,
  status: number | number[] = [200, 201, 204],
): Promise<any> {
  const res = await pending;
  expect([status].flat(), res.text).toContain(res.status);
  return res.body;
}

/** Polls `path` until `done` holds of its answer (an export answers 404 while it is being written). */
async function until(
  server: TestServer,
  token: string,
  path: string,
  done: (res: { status: number; body: any }) => boolean,
): Promise<void> {
  while (!done(await server.request('GET', path, { token }))) await new Promise((r) => setTimeout(r, 50));
}

/**
 * An account with profiles, attribute history, consents, a merge, events, an import, an export,
 * an activity and a transactional send (through `server`, which needs its worker), and a second
 * API key: every area's tables get rows.
 */
export async function fillThroughApi(server: TestServer): Promise<Filled> {
  const limits = {
    requests_per_second: null,
    token_requests_per_minute: null,
    profile_key_operations_per_second: null,
  };
  const { accountId, token, clientId, clientSecret } = await server.login(SHOP, limits);
  await server.createKey(accountId, { name: 'second' });
  const attributes = (await ok(server.request('GET', `/audience/sections/${S}/attributes`, { token }), 200)).items;
  const version = (d: string) => attributes.find((a: any) => a.discriminator === d).versions.at(-1).id;
  const keys = ['ann@example.com', 'bo@example.com', 'cat@example.com'];
  for (const [i, key] of keys.entries()) {
    await ok(
      server.request('POST', `/audience/keyspaces/${EMAIL}/sections/${S}/profiles`, {
        token,
        body: { profile_key: key },
      }),
    );
    for (const body of [
      { [`${V}.attributes.firstname`]: `First ${i}` },
      { [`${V}.attributes.firstname`]: `Name ${i}`, [`${V}.attributes.user-created.points`]: 60 * i },
    ])
      await ok(
        server.request('PATCH', `/v2${profile(key)}/attributes`, {
          token,
          body,
          headers: { 'content-type': 'application/merge-patch+json' },
        }),
      );
    await ok(
      server.request('POST', `/v2${profile(key)}/consents`, {
        token,
        body: {
          topic_discriminator: WEEKLY,
          channel_discriminator: `${V}.channels.email`,
          type: 'opt-in',
          reason: 'dump',
        },
      }),
    );
  }
  await ok(
    server.request('PUT', '/audience/profiles/merges', {
      token,
      body: {
        profiles: [
          { keyspace_discriminator: EMAIL, profile_key: keys[0] },
          { keyspace_discriminator: WEB, profile_key: 'cookie-1' },
        ],
      },
    }),
  );
  const events = (await ok(server.request('GET', `/audience/sections/${S}/events`, { token }), 200)).items;
  await ok(
    server.request('POST', `${profile('cookie-1', WEB)}/events`, {
      token,
      body: {
        items: [
          { event_time: '2026-01-02T03:04:05Z', version_id: events[0].versions[0].id, data: { url: 'https://x' } },
        ],
      },
    }),
  );
  // An import of two rows.
  const created = await ok(
    server.request('POST', `/v2/audience/sections/${S}/imports`, {
      token,
      body: {
        keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
        attribute_mappings: [{ field_selector: 'first', attribute_version_id: version(`${V}.attributes.firstname`) }],
      },
    }),
    201,
  );
  const upload = await sendImportFile(
    server.url,
    created,
    'email;first\r\ndan@example.com;Dan\r\neve@example.com;Eve\r\n',
  );
  expect(upload.status, await upload.text()).toBe(204);
  const importPath = `/audience/sections/${S}/imports/${created.import_id}`;
  await until(server, token, importPath, (r) => r.body.result?.status === 'completed');
  // An export, produced by the worker.
  const exported = await ok(
    server.request('POST', '/audience/profiles/exports', {
      token,
      body: { attributes: [{ section_discriminator: S, attribute_version_id: version(`${V}.attributes.firstname`) }] },
    }),
    201,
  );
  const exportPath = new URL(exported.file_download_url).pathname;
  await until(server, token, exportPath, (r) => r.status === 200);
  // An activity and a transactional send, which the worker puts in the outbox (no SMTP_URL).
  const activity = await ok(
    server.admin('PUT', `/admin/accounts/${accountId}/activities/order-confirmation`, transactionalActivity()),
    201,
  );
  const send = await ok(
    server.request('POST', `/emails/sections/${S}/activities/transactional/${activity.id}/transactions`, {
      token,
      body: {
        keyspace_discriminator: EMAIL,
        profile_key: keys[1],
        to_name: 'Bo',
        to_email_address: keys[1],
        variables: { order: 'A-1' },
      },
    }),
    201,
  );
  const sendPath = `/emails/sections/${S}/activities/${activity.id}/transactions/${send.id}`;
  await until(server, token, sendPath, (r) => r.status === 200 && r.body.status !== 'queued');
  return {
    accountId,
    token,
    credentials: { clientId, clientSecret },
    reads: [
      `/audience/sections`,
      `/audience/sections/${S}/attributes`,
      ...keys.map((k) => `${profile(k)}/attributes`),
      `${profile(keys[0])}/events`,
      `${profile('cookie-1', WEB)}/attributes`,
      `/v2${profile(keys[1])}/consents`,
      `${profile('dan@example.com')}/attributes`,
      importPath,
      sendPath,
      `/admin/accounts/${accountId}/keys`,
      `/admin/accounts/${accountId}/activities`,
      `/admin/accounts/${accountId}/outbox`,
    ],
  };
}

/** The status and body of each read, with the token of the data (operator reads with the server's operator token). */
export async function answers(
  server: TestServer,
  filled: Filled,
): Promise<{ path: string; status: number; body: unknown }[]> {
  const out = [];
  for (const path of filled.reads) {
    const res = path.startsWith('/admin/')
      ? await server.admin('GET', path)
      : await server.request('GET', path, { token: filled.token });
    out.push({ path, status: res.status, body: res.body });
  }
  // A segment count reads every profile of the section.
  const count = await server.request('POST', '/audience/profiles/reports/segments/count', {
    token: filled.token,
    body: {
      section_discriminator: S,
      segment: { timezone: 'UTC', segment_discriminator: SEGMENT },
      known_profiles: true,
    },
  });
  out.push({ path: 'segment count', status: count.status, body: count.body });
  return out;
}

/** Every table of the schema (but the migrations applied, which a restore makes itself): its rows' count and the digest of their text, in order; and the definitions of the indexes and constraints. */
export async function tableDigests(url: string): Promise<Record<string, string>> {
  return withClient(url, async (db) => {
    // Timestamps as text in one time zone, whatever the server's.
    await db.query(`set timezone = 'UTC'`);
    const { rows: tables } = await db.query<{ name: string }>(
      `select relname as name from pg_class where relnamespace = current_schema()::regnamespace and relkind in ('r', 'p')
         and relname <> 'schema_migrations' order by 1`,
    );
    const digests: Record<string, string> = {};
    for (const { name } of tables) {
      const { rows } = await db.query<{ digest: string }>(
        `select count(*) || ' ' || md5(coalesce(string_agg(t::text, ',' order by t::text), '')) as digest from "${name}" t`,
      );
      digests[name] = rows[0].digest;
    }
    // The indexes and constraints, which a restore drops while it loads and makes again.
    const { rows: schema } = await db.query<{ definition: string }>(
      `select indexdef as definition from pg_indexes where schemaname = current_schema()
       union all
       select conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) from pg_constraint
       where contype <> 'n' -- PostgreSQL 18 lists NOT NULL as constraints, 15 does not
         -- The tables pg_class lists: on a Citus coordinator, not the shards of the reference tables it holds.
         and conrelid in (select oid from pg_class where relnamespace = current_schema()::regnamespace)
       order by 1`,
    );
    digests['(indexes and constraints)'] = schema.map((r) => r.definition).join('\n');
    return digests;
  });
}

/** The tables of the current schema of `url`: none in a database that a refused restore left alone. */
export async function tablesIn(url: string): Promise<string[]> {
  return withClient(url, async (db) =>
    (
      await db.query<{ name: string }>(
        `select relname as name from pg_class where relnamespace = current_schema()::regnamespace and relkind in ('r', 'p')`,
      )
    ).rows.map((r) => r.name),
  );
}

/** `bin/audience ARGS` on the database of `url`: its exit code, standard output and error. */
export async function audience(
  url: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  return execFileAsync(path.join(ROOT, 'bin', 'audience'), args, {
    env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );
}

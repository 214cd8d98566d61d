import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { expectProblem, serverWithPool, type TestServer } from '../../test/app.ts';
import { activityEvent, EMAIL } from '../../test/activities.ts';
import { userCreated } from '../../test/names.ts';
import { BIG, CH_EMAIL, exportHelpers, MANIFEST, NEWS, SHOP, type Account } from '../../test/exports.ts';
import { sendImportFile } from '../../test/imports-http.ts';

// Deleting an account through the operator API (DELETE /admin/accounts/{id}): every row of the
// account in every table, found generically so that a table added later is covered, and its files.

let server: TestServer;
let db: pg.Pool;
serverWithPool({ worker: true, env: { LOG_LEVEL: 'error' } }, (s, pool) => {
  server = s;
  db = pool;
});
const { account, person, suppress, requestExport, whenReady } = exportHelpers(() => ({ server, db }));

/** Rows of the account in every table of the schema that has an account_id column. */
async function rowsByTable(accountId: string): Promise<Record<string, number>> {
  const { rows: tables } = await db.query<{ table_name: string }>(
    `select c.table_name from information_schema.columns c join information_schema.tables t using (table_schema, table_name)
     where c.table_schema = 'public' and c.column_name = 'account_id' and t.table_type = 'BASE TABLE' order by 1`,
  );
  const counts: Record<string, number> = {};
  for (const { table_name } of tables) {
    const { rows } = await db.query<{ n: number }>(
      `select count(*)::int as n from "${table_name}" where account_id = $1::bigint`,
      [accountId],
    );
    counts[table_name] = rows[0].n;
  }
  return counts;
}

/** The account with something in every area: profiles with values, tags, consents and events, a locked one, a suppression, an export and an import with their files, an activity with events, a transactional send in the outbox. */
async function populated(): Promise<Account> {
  const a = await account(undefined, {
    ...MANIFEST,
    sections: MANIFEST.sections!.map((s, i) => (i === 0 ? { ...s, topic_folders: [{ name: 'Offers' }] } : s)),
  });
  const admin = (method: string, p: string, body?: unknown) =>
    server.admin(method, `/admin/accounts/${a.accountId}${p}`, body);
  // A webhook endpoint: the lock below is an event, delivered (to an address the filter refuses) with an attempt.
  const hook = await admin('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', event_types: ['profile.deleted'] });
  expect(hook.status, hook.text).toBe(201);
  // A live segment: its state, its members (ann) and their recorded entries.
  const live = await server.request('PUT', `/audience/segments/${BIG}/live`, {
    token: a.token,
    body: { time_zone: 'UTC' },
  });
  expect(live.status, live.text).toBe(200);
  await person(a, 'ann@example.com', { points: 200, vip: true, consents: [[NEWS, CH_EMAIL, 'opt-in']] });
  await person(a, 'bob@example.com', { points: 50 });
  // A replaced value is kept in the history, with the time it was set and replaced.
  server.clock.advance(1000);
  const patched = await server.request(
    'PATCH',
    `/v2/audience/keyspaces/${EMAIL}/profiles/bob@example.com/sections/${SHOP}/attributes`,
    {
      token: a.token,
      body: { [userCreated('attributes', 'points')]: 60 },
      headers: { 'content-type': 'application/merge-patch+json' },
    },
  );
  expect(patched.status, patched.text).toBe(204);
  await suppress(a, CH_EMAIL, 'carl@example.com');
  const auth = { token: a.token };
  await person(a, 'eve@example.com');
  const locked = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/eve@example.com/locks`, auth);
  expect(locked.status, locked.text).toBeLessThan(300);
  await whenReady(
    a,
    await requestExport(a, {
      section_discriminator: SHOP,
      topic_discriminators: [NEWS],
      channel_discriminator: CH_EMAIL,
    }),
  );
  const imported = await server.request('POST', `/v2/audience/sections/${SHOP}/imports`, {
    ...auth,
    body: {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [{ field_selector: 'points', attribute_version_id: a.v.points }],
    },
  });
  expect(imported.status, imported.text).toBe(201);
  const uploaded = await sendImportFile(
    server.url,
    imported.body,
    'email,points\ndan@example.com,5\nnot-an-address,6\n',
  );
  expect(uploaded.status, await uploaded.text()).toBe(204);
  const activity = await admin('PUT', '/activities/spring', {
    kind: 'email',
    section_discriminator: SHOP,
    name: 'Spring',
    status: 'sent',
    email_subject: 'Spring',
  });
  expect(activity.status, activity.text).toBe(201);
  const events = await admin('POST', '/activity-events', [activityEvent('spring', 'SENT', 'ann@example.com', 's-1')]);
  expect(events.status, events.text).toBe(200);
  const mail = await admin('PUT', '/activities/receipt', {
    kind: 'email',
    section_discriminator: SHOP,
    name: 'Receipt',
    status: 'active',
    transactional: true,
    email_subject: 'Receipt',
    sender_email_address: 'shop@example.com',
    html: '<p>Thanks</p>',
  });
  expect(mail.status, mail.text).toBe(201);
  const sent = await server.request('POST', `/emails/sections/${SHOP}/activities/transactional/receipt/transactions`, {
    ...auth,
    body: {
      keyspace_discriminator: EMAIL,
      profile_key: 'ann@example.com',
      to_name: 'Ann',
      to_email_address: 'ann@example.com',
      variables: {},
    },
  });
  expect(sent.status, sent.text).toBe(201);
  // The worker does the import and the send (its message in the outbox, its SENT event beside the ingested one).
  for (let i = 0; i < 400; i++) {
    const counts = await rowsByTable(a.accountId);
    if (
      counts.transactional_outbox > 0 &&
      counts.activity_events > 1 &&
      counts.import_failures > 0 &&
      counts.webhook_attempts > 0 &&
      counts.segment_member_changes > 0
    )
      break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // A write's mark that the live segments job has not taken yet (the writes above may have left it).
  await db.query(
    'insert into profile_changes (account_id, profile_id) select account_id, min(profile_id) from profiles where account_id = $1::bigint group by account_id on conflict do nothing',
    [a.accountId],
  );
  // What an upload cut short by a killed process leaves behind.
  await server.services.files.put(`imports/${a.accountId}/cut-short.csv.1.2.partial`, Readable.from(['email\n']));
  return a;
}

/**
 * The tables the worker changes in the background: its queue, what the live segments job keeps,
 * and the attempts of webhook deliveries (it tries a failed one again).
 */
const BACKGROUND_TABLES = ['jobs', 'profile_changes', 'segment_members', 'segment_member_changes', 'webhook_attempts'];

describe('DELETE /admin/accounts/{id}', () => {
  it('erases every row of the account in every table and its files, ends its tokens, and leaves another account as it was', async () => {
    const doomed = await populated();
    const other = await populated();
    const before = await rowsByTable(doomed.accountId);
    // The account reaches (nearly) every table, so that "none left" below means something (the
    // worker may already have taken the pending mark of profile_changes).
    const empty = Object.entries(before)
      .filter(([t, n]) => n === 0 && !BACKGROUND_TABLES.includes(t))
      .map(([t]) => t);
    expect(empty).toEqual([]);
    const files = path.join(server.services.config.dataDir, 'files');
    const folders = [path.join(files, 'imports', doomed.accountId), path.join(files, 'exports', doomed.accountId)];
    for (const folder of folders) expect((await fs.readdir(folder)).length, folder).toBeGreaterThan(0);
    const otherBefore = await rowsByTable(other.accountId);

    const deleted = await server.admin('DELETE', `/admin/accounts/${doomed.accountId}`);
    expect(deleted.status, deleted.text).toBe(204);

    const after = await rowsByTable(doomed.accountId);
    expect(Object.entries(after).filter(([, n]) => n > 0)).toEqual([]);
    expect(Object.keys(after)).toEqual(Object.keys(before));
    for (const folder of folders) await expect(fs.stat(folder)).rejects.toThrow();
    // The worker may still run the other account's jobs meanwhile (its live segments): their tables aside.
    const settled = (rows: Record<string, number>) =>
      Object.fromEntries(Object.entries(rows).filter(([t]) => !BACKGROUND_TABLES.includes(t)));
    expect(settled(await rowsByTable(other.accountId))).toEqual(settled(otherBefore));
    expect((await fs.readdir(path.join(files, 'exports', other.accountId))).length).toBeGreaterThan(0);
    // Its token stops at once; the other account's still serves.
    expect((await server.request('GET', '/audience/sections', { token: doomed.token })).status).toBe(401);
    expect((await server.request('GET', '/audience/sections', { token: other.token })).status).toBe(200);
    expectProblem(await server.admin('GET', `/admin/accounts/${doomed.accountId}`), 404, 'AUD-1110');
    expectProblem(await server.admin('DELETE', `/admin/accounts/${doomed.accountId}`), 404, 'AUD-1110');
  });
});

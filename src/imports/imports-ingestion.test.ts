import { describe, expect, it } from 'vitest';
import { BATCH_ROWS } from './ingest.ts';
import {
  CRM,
  EMAIL,
  MOBILE,
  S,
  STAFF,
  VIP,
  account,
  attr,
  attributesOf,
  db,
  importsServer,
  runImport,
  server,
  v2,
} from '../../test/imports-http.ts';

/** Ingestion of an uploaded file by the worker: CSV forms, order, report, dates, updates, clears and tags. */

importsServer();

describe('ingestion', () => {
  it('CSV with a header row: quoted fields, UTF-8 BOM, CRLF or LF, comma or semicolon; keys normalised', async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('first', a.v.firstname), attr('last', a.v.lastname), attr('points', a.v.points)],
    });
    // BOM, CRLF, semicolons, quoted cells holding the delimiter, quotes and a line break; decimal commas unquoted.
    const semi = await runImport(
      a,
      2,
      body,
      '\ufeffemail;first;last;points\r\n' +
        ' Semi@X.io ;"Ann; Marie";"O""Brien";1,5\r\n' +
        'two@x.io;"Two\r\nLines";Plain;2\r\n' +
        '\r\n' +
        'THREE@x.io;Three;"";3,25\r\n',
    );
    expect(semi.result).toEqual({ status: 'completed', profiles_found: 3, profiles_processed: 3, profiles_failed: 0 });
    const semiAnn = (await attributesOf(a, EMAIL, 'semi@x.io')).body;
    expect(semiAnn).toMatchObject({
      [a.v.email]: 'semi@x.io',
      [a.v.firstname]: 'Ann; Marie',
      [a.v.lastname]: 'O"Brien',
      [a.v.points]: 1.5,
    });
    expect((await attributesOf(a, EMAIL, 'two@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Two\r\nLines',
      [a.v.points]: 2,
    });
    expect((await attributesOf(a, EMAIL, 'three@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Three',
      [a.v.points]: 3.25,
    });
    // LF and commas, columns in another order, a semicolon inside an unquoted cell.
    const comma = await runImport(
      a,
      2,
      body,
      'points,last,first,email\n4,"Smith, Jr.",Bo; Bob,comma@x.io\n"5.5",Doe,"Cy",CY@X.IO',
    );
    expect(comma.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect((await attributesOf(a, EMAIL, 'comma@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Bo; Bob',
      [a.v.lastname]: 'Smith, Jr.',
      [a.v.points]: 4,
    });
    expect((await attributesOf(a, EMAIL, 'cy@x.io')).body).toMatchObject({ [a.v.firstname]: 'Cy', [a.v.points]: 5.5 });
    // Mobile keys in international form are stored in E.164; the same key twice is one profile.
    const mobile = await runImport(
      a,
      2,
      v2(MOBILE, 'phone', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'phone,first\n+47 912 34 567,Mo\n004791234567,Mona\n12345,Bad\n',
    );
    expect(mobile.result).toEqual({
      status: 'completed',
      profiles_found: 3,
      profiles_processed: 2,
      profiles_failed: 1,
    });
    expect(mobile.report).toMatchObject({ profiles_new: 1, profiles_updated: 1 });
    expect((await attributesOf(a, MOBILE, '+4791234567')).body).toMatchObject({
      [a.v.mobile]: '+4791234567',
      [a.v.firstname]: 'Mona',
    });
    const { rows } = await db.query(
      'select count(*)::int as n from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where i.account_id = $1 and k.discriminator = $2',
      [a.accountId, MOBILE],
    );
    expect(rows[0].n).toBe(1);
  });

  it("IMP-27 a key's rows apply in file order across batches and parallel lanes, whatever form the key is written in", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)] });
    // Each of the two lanes takes about half the rows, BATCH_ROWS at a time: the repeated key, in
    // three spellings, is in three batches of its lane. (Within one batch, history keeps a key's
    // last value: its rows share one instant.)
    const rows = Array.from({ length: 5 * BATCH_ROWS }, (_, i) => `k${i}@order.io,Person ${i},${i}`);
    rows[1] = 'same@order.io,First,1';
    rows[Math.floor(2.5 * BATCH_ROWS)] = ' SAME@Order.io,Second,2';
    rows[rows.length - 1] = 'Same@ORDER.io,Third,3';
    const analyzed = () =>
      db.query<{ n: string }>("select analyze_count as n from pg_stat_user_tables where relname = 'profiles'");
    const analyzedBefore = Number((await analyzed()).rows[0]?.n ?? 0);
    const s = await runImport(a, 2, body, `email,first,points\n${rows.join('\n')}\n`);
    // An import of 10,000 rows or more refreshes the profile tables' statistics (ANALYZE): on one
    // node, where the server's statistics count it (a Citus coordinator analyzes the shards on the workers).
    const { rows: nodes } = await db.query("select to_regclass('citus_stat_activity') is null as single");
    if (nodes[0].single) expect(Number((await analyzed()).rows[0].n)).toBeGreaterThan(analyzedBefore);
    expect(s.result).toEqual({
      status: 'completed',
      profiles_found: rows.length,
      profiles_processed: rows.length,
      profiles_failed: 0,
    });
    expect(s.report).toMatchObject({ profiles_new: rows.length - 2, profiles_updated: 2, profiles_not_changed: 0 });
    expect((await attributesOf(a, EMAIL, 'same@order.io')).body).toMatchObject({
      [a.v.firstname]: 'Third',
      [a.v.points]: 3,
    });
    // The values replaced are in the history, in the order they were written.
    const { rows: history } = await db.query(
      `select h.value from attribute_history h join profile_identifiers i on i.account_id = h.account_id and i.profile_id = h.profile_id
       join keyspaces k on k.account_id = i.account_id and k.keyspace_id = i.keyspace_id
       where h.account_id = $1 and k.discriminator = $2 and i.profile_key = 'same@order.io' and h.version_id = $3 order by h.set_at, h.ctid`,
      [a.accountId, EMAIL, a.v.firstname],
    );
    expect(history.map((r) => r.value)).toEqual(['First', 'Second']);
    // The import ran in two lanes.
    const {
      rows: [imported],
    } = await db.query('select lanes_done from imports where account_id = $1 and import_id = $2', [
      a.accountId,
      s.import_id,
    ]);
    expect(imported.lanes_done).toHaveLength(2);
  });

  it("IMP-27 the report counts profiles as new, updated, not changed and failed, with each failed row's line and reason", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)] });
    await runImport(a, 2, body, 'email,first,points\nsame@x.io,Same,1\nold@x.io,Old,1\n');
    const csv =
      'email,first,points\r\n' +
      'same@x.io,Same,1\r\n' + // line 2: not changed
      'old@x.io,"New\r\nName",2\r\n' + // lines 3-4: updated
      'not-an-email,X,1\r\n' + // line 5: failed
      'fresh@x.io,Fresh,1\r\n' + // line 6: new
      'pts@x.io,Pts,lots\r\n' + // line 7: failed
      ',Nobody,1\r\n'; // line 8: failed (no key)
    const s = await runImport(a, 2, body, csv);
    expect(s.result).toEqual({ status: 'completed', profiles_found: 6, profiles_processed: 3, profiles_failed: 3 });
    expect(s.report).toMatchObject({
      profiles_new: 1,
      profiles_updated: 1,
      profiles_not_changed: 1,
      profiles_failed: 3,
    });
    expect(s.report.failures.map((f: { line: number }) => f.line)).toEqual([5, 7, 8]);
    expect(s.report.failures[0].reason).toMatch(/not-an-email/);
    expect(s.report.failures[1].reason).toMatch(/points.*lots/);
    expect(s.report.failures[2].reason).toMatch(/key|empty/);
    expect((await attributesOf(a, EMAIL, 'old@x.io')).body[a.v.firstname]).toBe('New\r\nName');
  });

  it("IMP-26 date cells in the formats users send are stored converted to the mapped attribute's type", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('birthday', a.v.birthday), attr('seen', a.v['last-seen']), attr('member', a.v.member)],
    });
    const noon = Date.parse('2024-03-05T12:00:00Z');
    const midnight = Date.parse('2024-03-05T00:00:00Z');
    const rows: [string, string, string, string, unknown][] = [
      ['d1@x.io', '2024-03-05', '2024-03-05T12:00:00Z', 'true', noon],
      ['d2@x.io', '05.03.2024', String(noon), 'yes', noon],
      ['d3@x.io', '2024/3/5', '2024-03-05', '1', midnight],
      ['d4@x.io', '20240305', '05.03.2024', 'no', midnight],
      ['d5@x.io', '05/03/2024', '2024-03-05 12:00:00', 'false', noon],
      ['d6@x.io', '5-3-2024', '2024-03-05T14:00:00+02:00', '0', noon],
      ['d7@x.io', '2024-03-05T23:30:00+02:00', '2024/03/05', 'TRUE', midnight],
    ];
    const csv =
      'email;birthday;seen;member\n' +
      rows.map((r) => r.slice(0, 4).join(';')).join('\n') +
      '\nbad@x.io;31.02.2024;2024-03-05;true\nbad2@x.io;2024-03-05;someday;true\n';
    // A date-time without an offset is UTC (SPEC §1.2), whatever the zone of the server.
    const zone = process.env.TZ;
    process.env.TZ = 'America/New_York';
    let s;
    try {
      s = await runImport(a, 2, body, csv);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
    expect(s.result).toEqual({ status: 'completed', profiles_found: 9, profiles_processed: 7, profiles_failed: 2 });
    expect(s.report.failures).toEqual([
      { line: 9, reason: expect.stringMatching(/birthday.*31\.02\.2024/) },
      { line: 10, reason: expect.stringMatching(/seen.*someday/) },
    ]);
    for (const [key, , , member, seen] of rows) {
      const got = (await attributesOf(a, EMAIL, key)).body;
      expect(got[a.v.birthday], key).toBe('2024-03-05');
      expect(got[a.v['last-seen']], key).toBe(seen);
      expect(got[a.v.member], key).toBe(['true', 'yes', '1', 'TRUE'].includes(member));
    }
  });

  it('IMP-28 update_existing_profiles false leaves existing profiles unchanged and still creates new ones', async () => {
    const a = await account();
    const mapping = { attribute_mappings: [attr('first', a.v.firstname)], tag_mappings: [{ tag_discriminator: VIP }] };
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: mapping.attribute_mappings }),
      'email,first\nkeep@x.io,Kept\n',
    );
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { ...mapping, options: { update_existing_profiles: false } }),
      'email,first\nkeep@x.io,Changed\nnew@x.io,New\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 2, profiles_failed: 0 });
    expect(s.report).toMatchObject({ profiles_new: 1, profiles_updated: 0, profiles_not_changed: 1 });
    expect((await attributesOf(a, EMAIL, 'keep@x.io')).body[a.v.firstname]).toBe('Kept');
    expect(
      (
        await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/keep@x.io/sections/${S}/tags`, {
          token: a.token,
        })
      ).body[VIP],
    ).not.toBe(true);
    expect((await attributesOf(a, EMAIL, 'new@x.io')).body[a.v.firstname]).toBe('New');
    // The default (true) updates them.
    const u = await runImport(a, 2, v2(EMAIL, 'email', mapping), 'email,first\nkeep@x.io,Changed\n');
    expect(u.report).toMatchObject({ profiles_updated: 1 });
    expect((await attributesOf(a, EMAIL, 'keep@x.io')).body[a.v.firstname]).toBe('Changed');
  });

  it('IMP-29 clear_existing_attributes true lets an empty cell clear the mapped attribute; false leaves the stored value', async () => {
    const a = await account();
    const attributes = [attr('first', a.v.firstname), attr('points', a.v.points)];
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes }),
      'email,first,points\nc1@x.io,One,1\nc2@x.io,Two,2\n',
    );
    const kept = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes, options: { clear_existing_attributes: false } }),
      'email,first,points\nc1@x.io,,\n',
    );
    expect(kept.report).toMatchObject({ profiles_not_changed: 1 });
    expect((await attributesOf(a, EMAIL, 'c1@x.io')).body).toMatchObject({ [a.v.firstname]: 'One', [a.v.points]: 1 });
    const kept2 = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes }),
      'email,first,points\nc1@x.io,"",\n',
    );
    expect(kept2.report).toMatchObject({ profiles_not_changed: 1 });
    const cleared = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: attributes, options: { clear_existing_attributes: true } }),
      'email,first,points\nc1@x.io,,\nc2@x.io,Deux,\n',
    );
    expect(cleared.report).toMatchObject({ profiles_updated: 2 });
    const c1 = (await attributesOf(a, EMAIL, 'c1@x.io')).body;
    expect(c1[a.v.firstname]).toBeUndefined();
    expect(c1[a.v.points]).toBeUndefined();
    expect(c1[a.v.email]).toBe('c1@x.io');
    expect((await attributesOf(a, EMAIL, 'c2@x.io')).body).toMatchObject({ [a.v.firstname]: 'Deux' });
    expect((await attributesOf(a, EMAIL, 'c2@x.io')).body[a.v.points]).toBeUndefined();
  });

  it('tags are set on every imported profile', async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        tag_mappings: [{ tag_discriminator: VIP }],
      }),
      'email,first\nt1@x.io,T1\nt2@x.io,\n',
    );
    for (const key of ['t1@x.io', 't2@x.io']) {
      const tags = await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${S}/tags`, {
        token: a.token,
      });
      expect(tags.body[VIP], key).toBe(true);
    }
    const crm = await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('score', a.v.score)], tag_mappings: [{ tag_discriminator: STAFF }] }),
      'crm,score\nC-1,high\n',
    );
    expect(crm.result.profiles_processed).toBe(1);
    expect(
      (await server.request('GET', `/audience/keyspaces/${CRM}/profiles/C-1/sections/${S}/tags`, { token: a.token }))
        .body[STAFF],
    ).toBe(true);
    expect((await attributesOf(a, CRM, 'C-1')).body[a.v.score]).toBe('high');
  });
});

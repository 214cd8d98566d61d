import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  A_CRM,
  A_EMAIL,
  A_FIRST,
  A_MOBILE,
  CLUB_S,
  CRM,
  EMAIL,
  EXPORT,
  MOBILE,
  NS,
  SHOP_S,
  WEB,
  attrs,
  create,
  expectNoContent,
  exportKeyOf,
  getSection,
  id,
  mail,
  merge,
  patchV2,
  readAttributes,
  server,
  tags,
  token,
  uid,
  useProfileLifecycle,
} from '../../test/profile-lifecycle.ts';

/**
 * Creating profiles, their keys and identifiers, through real HTTP (PROF-01..09, COMP-09, COMP-10).
 */

useProfileLifecycle();

// ---- PROF: identity and lifecycle ----

describe('profiles: creation', () => {
  it('PROF-01 POST …/profiles → 201 {keyspace_discriminator, profile_key} in every keyspace that creates', async () => {
    for (const [ks, key, expected] of [
      [EMAIL, mail('p01'), undefined],
      [MOBILE, '+47 412 30 001', '+4741230001'],
      [CRM, ` ${uid('crm')} `, undefined],
      [WEB, uid('cookie'), undefined],
    ] as const) {
      const r = await create(ks, key);
      expect(r.status, r.text).toBe(201);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.body).toEqual({ keyspace_discriminator: ks, profile_key: expected ?? key.trim() });
      expect((await readAttributes(ks, r.body.profile_key)).r.status).toBe(200);
    }
  });

  it('PROF-02 creation sets the mapped attribute in that section only', async () => {
    const email = mail('p02');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_EMAIL]: email });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});

    expect((await create(MOBILE, '+4741230002', CLUB_S)).status).toBe(201);
    expect(await attrs(MOBILE, '+4741230002', CLUB_S)).toEqual({ [A_MOBILE]: '+4741230002' });
    expect(await attrs(MOBILE, '+4741230002', SHOP_S)).toEqual({});

    const crm = uid('crm');
    expect((await create(CRM, crm)).status).toBe(201);
    expect(await attrs(CRM, crm)).toEqual({ [A_CRM]: crm });

    // The web keyspace maps to no attribute.
    const cookie = uid('cookie');
    expect((await create(WEB, cookie)).status).toBe(201);
    expect(await attrs(WEB, cookie)).toEqual({});
  });

  it('PROF-03 creating an existing key → 409, also from another section', async () => {
    const email = mail('p03');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectProblem(await create(EMAIL, email), 409, 'AUD-1204');
    expectProblem(await create(EMAIL, email, CLUB_S), 409, 'AUD-1204');
    // The refused creation changed nothing.
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({});
  });

  it('PROF-04 an unknown keyspace or section → 404', async () => {
    expectProblem(await create(`${NS}.keyspaces.nope`, mail()), 404, 'AUD-1101');
    expectProblem(await create(EMAIL, mail(), `${NS}.sections.user-created.nope`), 404, 'AUD-1102');
  });

  it('PROF-05 a missing or non-string profile_key → 400', async () => {
    const path = `/audience/keyspaces/${EMAIL}/sections/${SHOP_S}/profiles`;
    expectProblem(await server.request('POST', path, { token, body: {} }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: 42 } }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: null } }), 400);
    expectProblem(await server.request('POST', path, { token, body: { profile_key: ['a@example.com'] } }), 400);
    expectProblem(
      await server.request('POST', path, { token, headers: { 'content-type': 'application/json' }, raw: '' }),
      400,
    );
    expectProblem(await create(WEB, ''), 400, 'AUD-1205');
  });

  it('PROF-06 an invalid email address or mobile number → 400 (invalid profile_key)', async () => {
    for (const bad of ['not-an-email', 'a@b', 'two@@example.com', 'sp ace@example.com', '@example.com']) {
      expectProblem(await create(EMAIL, bad), 400, 'AUD-1205');
    }
    for (const bad of ['12345', '41234567', '+47 123', '+999 1234567', 'phone']) {
      expectProblem(await create(MOBILE, bad), 400, 'AUD-1205');
    }
    // A path key is validated the same way.
    expectProblem(await getSection(EMAIL, 'not-an-email'), 400, 'AUD-1205');
  });

  it('PROF-07 spellings of one email address or mobile number reach one profile', async () => {
    const local = uid('p07');
    const r = await create(EMAIL, `  ${local.toUpperCase()}@Example.COM `);
    expect(r.status, r.text).toBe(201);
    expect(r.body.profile_key).toBe(`${local}@example.com`);
    expectProblem(await create(EMAIL, `${local}@example.com`), 409, 'AUD-1204');
    expect(await attrs(EMAIL, `${local.toUpperCase()}@EXAMPLE.com`)).toEqual({ [A_EMAIL]: `${local}@example.com` });

    const m = await create(MOBILE, '+47 412 34 567');
    expect(m.status, m.text).toBe(201);
    expect(m.body.profile_key).toBe('+4741234567');
    for (const spelling of ['004741234567', '+4741234567', '+47-412-34-567', ' +47 (412) 34567 ']) {
      expectProblem(await create(MOBILE, spelling), 409, 'AUD-1204');
      expect(await attrs(MOBILE, spelling)).toEqual({ [A_MOBILE]: '+4741234567' });
    }
  });

  it('COMP-09 percent-encoded and raw path segments address the same key', async () => {
    const email = mail('c09');
    expect((await create(EMAIL, email)).status).toBe(201);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Enc' })).status).toBe(204);
    const raw = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${email}/sections/${SHOP_S}/attributes`,
      { token },
    );
    const encoded = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${email.replace('@', '%40')}/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(raw.status, raw.text).toBe(200);
    expect(encoded.body).toEqual(raw.body);
    expect(Object.values(raw.body)).toContain('Enc');
  });

  it('COMP-10 a + in a path segment stays + (mobile keys and email tags)', async () => {
    expect((await create(MOBILE, '+4741230010')).status).toBe(201);
    const r = await server.request(
      'GET',
      `/audience/keyspaces/${MOBILE}/profiles/+4741230010/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(r.status, r.text).toBe(200);
    const tagged = `${uid('c10')}+tag@example.com`;
    expect((await create(EMAIL, tagged)).status).toBe(201);
    const raw = await server.request(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${tagged}/sections/${SHOP_S}/attributes`,
      { token },
    );
    expect(raw.status, raw.text).toBe(200);
    expect(Object.values(raw.body)).toEqual([tagged]);
    // A space is another key (and not a valid address).
    expectProblem(
      await server.request(
        'GET',
        `/audience/keyspaces/${EMAIL}/profiles/${tagged.replace('+', '%20')}/sections/${SHOP_S}/attributes`,
        { token },
      ),
      400,
      'AUD-1205',
    );
  });

  it('PROF-08 a profile holds several identifiers, one per keyspace, each locating it', async () => {
    const email = mail('p08');
    const crm = uid('crm');
    const cookie = uid('cookie');
    expect((await create(EMAIL, email)).status).toBe(201);
    expectNoContent(await merge(id(EMAIL, email), id(CRM, crm)));
    expectNoContent(await merge(id(WEB, cookie), id(CRM, crm)));
    expect((await patchV2(WEB, cookie, { [A_FIRST]: 'Eight' })).status).toBe(204);
    const exportKey = await exportKeyOf(EMAIL, email);
    const expected = { [A_EMAIL]: email, [A_FIRST]: 'Eight' };
    for (const [ks, key] of [
      [EMAIL, email],
      [CRM, crm],
      [WEB, cookie],
      [EXPORT, exportKey],
    ]) {
      expect(await attrs(ks, key)).toEqual(expected);
    }
  });

  it('PROF-09 one profile is reachable from every section; sections scope only its data', async () => {
    const email = mail('p09');
    expect((await create(EMAIL, email, CLUB_S)).status).toBe(201);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({});
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Shop name' }, SHOP_S)).status).toBe(204);
    expect((await patchV2(EMAIL, email, { [A_FIRST]: 'Club name' }, CLUB_S)).status).toBe(204);
    expect(await attrs(EMAIL, email, SHOP_S)).toEqual({ [A_FIRST]: 'Shop name' });
    expect(await attrs(EMAIL, email, CLUB_S)).toEqual({ [A_EMAIL]: email, [A_FIRST]: 'Club name' });
  });
});

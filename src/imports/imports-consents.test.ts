import { describe, expect, it } from 'vitest';
import { metric } from '../../test/app.ts';
import {
  CH_EMAIL,
  CH_SMS,
  CRM,
  EMAIL,
  MAIL_OFFERS,
  MOBILE,
  PLAIN,
  S,
  SMS_OFFERS,
  WEEKLY,
  account,
  attr,
  attributesOf,
  consentsOf,
  db,
  expectProblem,
  importsServer,
  jobsEnded,
  runImport,
  server,
  v2,
} from '../../test/imports-http.ts';

/** Ingestion of an uploaded file by the worker: consents, merges of keys, locked profiles and metrics. */

importsServer();

describe('ingestion', () => {
  it('IMP-30 consents are created from the consent column; an opted-out consent turns back only with resubscribe_if_opted_out', async () => {
    const a = await account();
    const body = (resubscribe: boolean) =>
      v2(EMAIL, 'email', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                topic_discriminator: WEEKLY,
                channel_discriminator: CH_EMAIL,
                type: 'opt-in',
                resubscribe_if_opted_out: resubscribe,
              },
            ],
          },
        ],
      });
    const s = await runImport(
      a,
      2,
      body(false),
      'email,first,news\nyes@x.io,Y,1\nno@x.io,N,0\nempty@x.io,E,\nout@x.io,O,yes\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 4, profiles_processed: 4, profiles_failed: 0 });
    expect(await consentsOf(a, EMAIL, 'yes@x.io')).toEqual([
      expect.objectContaining({ topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
    ]);
    expect(await consentsOf(a, EMAIL, 'no@x.io')).toEqual([]);
    expect(await consentsOf(a, EMAIL, 'empty@x.io')).toEqual([]);
    const optOut = await server.request(
      'POST',
      `/v2/audience/keyspaces/${EMAIL}/profiles/out@x.io/sections/${S}/consents`,
      {
        token: a.token,
        body: {
          topic_discriminator: WEEKLY,
          channel_discriminator: CH_EMAIL,
          type: 'opt-out',
          reason: 'Asked to stop',
        },
      },
    );
    expect(optOut.status, optOut.text).toBe(204);
    await runImport(a, 2, body(false), 'email,first,news\nout@x.io,O,1\n');
    expect((await consentsOf(a, EMAIL, 'out@x.io'))[0].type).toBe('opt-out');
    await runImport(a, 2, body(true), 'email,first,news\nout@x.io,O,1\n');
    expect((await consentsOf(a, EMAIL, 'out@x.io'))[0]).toMatchObject({ type: 'opt-in', source: 'Profile import' });
  });

  it("IMP-23 IMP-25 version 2 consents: the channel is inferred from a channel-specific topic, and the address is the profile's email or mobile attribute (a row without it fails)", async () => {
    const a = await account();
    const body = v2(EMAIL, 'email', {
      attribute_mappings: [attr('first', a.v.firstname), attr('phone', a.v.mobile)],
      consent_mappings: [
        { consents: [{ field_selector: 'sms', topic_discriminator: SMS_OFFERS, type: 'opt-in' }] },
        { consents: [{ field_selector: 'mail', topic_discriminator: MAIL_OFFERS, type: 'opt-in' }] },
      ],
    });
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nexisting@x.io,Before\n',
    );
    const s = await runImport(
      a,
      2,
      body,
      'email,first,phone,sms,mail\nphone@x.io,P,+47 912 34 567,1,1\nnophone@x.io,N,,1,0\nmailonly@x.io,M,,0,1\nexisting@x.io,After,,1,1\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 4, profiles_processed: 2, profiles_failed: 2 });
    expect(s.report).toMatchObject({ profiles_new: 2, profiles_updated: 0, profiles_not_changed: 0 });
    expect(s.report.failures).toEqual([
      { line: 3, reason: expect.stringMatching(/no address/i) },
      { line: 5, reason: expect.stringMatching(/no address/i) },
    ]);
    // A failed row changes nothing: no new profile, no update of an existing one, no consent.
    expectProblem(await attributesOf(a, EMAIL, 'nophone@x.io'), 404);
    expect((await attributesOf(a, EMAIL, 'existing@x.io')).body[a.v.firstname]).toBe('Before');
    expect(await consentsOf(a, EMAIL, 'existing@x.io')).toEqual([]);
    expect(await consentsOf(a, EMAIL, 'phone@x.io')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' }),
        expect.objectContaining({ topic_discriminator: MAIL_OFFERS, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
      ]),
    );
    expect(await consentsOf(a, EMAIL, 'mailonly@x.io')).toEqual([
      expect.objectContaining({ topic_discriminator: MAIL_OFFERS, channel_discriminator: CH_EMAIL }),
    ]);
    const { rows } = await db.query(
      `select t.discriminator as topic, c.address from consents c join topics t on t.account_id = c.account_id and t.topic_id = c.topic_id
       where c.account_id = $1 order by 1, 2`,
      [a.accountId],
    );
    expect(rows).toEqual([
      { topic: MAIL_OFFERS, address: 'mailonly@x.io' },
      { topic: MAIL_OFFERS, address: 'phone@x.io' },
      { topic: SMS_OFFERS, address: '+4791234567' },
    ]);
    // Through the mobile keyspace, the SMS address is the key itself.
    const m = await runImport(
      a,
      2,
      v2(MOBILE, 'mobile', {
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              { field_selector: 'sms', topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' },
            ],
          },
        ],
      }),
      'mobile,first,sms\n+4741234567,Mob,1\n',
    );
    expect(m.result.profiles_processed).toBe(1);
    expect(await consentsOf(a, MOBILE, '+4741234567')).toEqual([
      expect.objectContaining({ topic_discriminator: SMS_OFFERS, channel_discriminator: CH_SMS, type: 'opt-in' }),
    ]);
  });

  it('IMP-17 version 1 consents take the address from address_field_selector', async () => {
    const a = await account();
    const s = await runImport(
      a,
      1,
      {
        keyspace_mappings: [{ keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: false }],
        attribute_mappings: [attr('first', a.v.firstname)],
        consent_mappings: [
          {
            consents: [
              {
                field_selector: 'news',
                address_field_selector: 'mail',
                topic_discriminator: WEEKLY,
                channel_discriminator: CH_EMAIL,
                type: 'opt-in',
                resubscribe_if_opted_out: false,
              },
            ],
          },
        ],
      },
      'crm;first;mail;news\nK-1;Kay;Kay@X.io;1\nK-2;Nope;;1\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 1, profiles_failed: 1 });
    expect(s.report.failures).toEqual([{ line: 3, reason: expect.stringMatching(/no address/i) }]);
    expectProblem(await attributesOf(a, CRM, 'K-2'), 404);
    expect(await consentsOf(a, CRM, 'K-1')).toEqual([
      expect.objectContaining({ topic_discriminator: WEEKLY, channel_discriminator: CH_EMAIL, type: 'opt-in' }),
    ]);
    const { rows } = await db.query('select address from consents where account_id = $1', [a.accountId]);
    expect(rows).toEqual([{ address: 'kay@x.io' }]);
  });

  it('IMP-21 version 1 with merge_profiles true merges the profiles a row names in several keyspaces; false does not', async () => {
    const a = await account(PLAIN);
    const first = a.v.firstname;
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', first)] }),
      'email,first\nann@x.io,Ann\n',
    );
    await runImport(a, 2, v2(CRM, 'crm', { attribute_mappings: [attr('points', a.v.points)] }), 'crm,points\nA-1,7\n');
    const body = (merge: boolean) => ({
      keyspace_mappings: [
        { keyspace_discriminator: EMAIL, field_selector: 'email', merge_profiles: merge },
        { keyspace_discriminator: CRM, field_selector: 'crm', merge_profiles: merge },
      ],
      attribute_mappings: [attr('first', first)],
    });
    const merged = await runImport(a, 1, body(true), 'email,crm,first\nann@x.io,A-1,Annie\nbo@x.io,B-1,Bo\n');
    expect(merged.result).toEqual({
      status: 'completed',
      profiles_found: 2,
      profiles_processed: 2,
      profiles_failed: 0,
    });
    // Both keys of a row resolve to one profile that shows the data of both.
    expect((await attributesOf(a, CRM, 'A-1')).body).toMatchObject({
      [first]: 'Annie',
      [a.v.email]: 'ann@x.io',
      [a.v.points]: 7,
    });
    expect((await attributesOf(a, EMAIL, 'ann@x.io')).body).toMatchObject({ [first]: 'Annie', [a.v.points]: 7 });
    expect((await attributesOf(a, CRM, 'B-1')).body).toMatchObject({ [first]: 'Bo', [a.v.email]: 'bo@x.io' });
    const separate = await runImport(a, 1, body(false), 'email,crm,first\ncy@x.io,C-1,Cy\n');
    expect(separate.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, EMAIL, 'cy@x.io')).body[first]).toBe('Cy');
    const c1 = await attributesOf(a, CRM, 'C-1');
    expect(c1.status).toBe(200);
    expect(c1.body[first]).toBeUndefined();
    // A row whose profiles cannot be merged (different emails) fails and changes nothing.
    await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('mail', a.v.email)] }),
      'crm,mail\nQ-1,quinn@x.io\n',
    );
    const conflict = await runImport(a, 1, body(true), 'email,crm,first\nann@x.io,Q-1,Changed\neve@x.io,E-1,Eve\n');
    expect(conflict.result).toEqual({
      status: 'completed',
      profiles_found: 2,
      profiles_processed: 1,
      profiles_failed: 1,
    });
    expect(conflict.report.failures).toEqual([{ line: 2, reason: expect.stringMatching(/merged|different/) }]);
    expect((await attributesOf(a, EMAIL, 'ann@x.io')).body[first]).toBe('Annie');
    expect((await attributesOf(a, CRM, 'Q-1')).body[first]).toBeUndefined();
    expect((await attributesOf(a, CRM, 'E-1')).body).toMatchObject({ [first]: 'Eve', [a.v.email]: 'eve@x.io' });
    // A row with only its second key still names a profile.
    const secondOnly = await runImport(a, 1, body(true), 'email,crm,first\n,D-1,Dee\n');
    expect(secondOnly.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, CRM, 'D-1')).body[first]).toBe('Dee');
  });

  it("IMP-22 version 2 never merges profiles: a key attribute written by the import leaves the other keyspace's profile apart", async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(CRM, 'crm', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'crm,first\nZ-1,Crm\n',
    );
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname), attr('crm', a.v.crmid)] }),
      'email,first,crm\nzed@x.io,Mail,Z-1\n',
    );
    expect(s.result.profiles_processed).toBe(1);
    expect((await attributesOf(a, CRM, 'Z-1')).body[a.v.firstname]).toBe('Crm');
    expect((await attributesOf(a, EMAIL, 'zed@x.io')).body).toMatchObject({
      [a.v.firstname]: 'Mail',
      [a.v.crmid]: 'Z-1',
    });
    const { rows } = await db.query(
      'select count(*)::int as n from profiles where account_id = $1 and canonical_id is not null',
      [a.accountId],
    );
    expect(rows[0].n).toBe(0);
  });

  it('IMP-31 rows that match a locked profile fail, are counted as failed, and do not bring the profile back', async () => {
    const a = await account();
    await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nlocked@x.io,Lock\n',
    );
    const lock = await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/locked@x.io/locks`, {
      token: a.token,
    });
    expect(lock.status, lock.text).toBe(204);
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nfree@x.io,Free\nLOCKED@x.io,Again\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 2, profiles_processed: 1, profiles_failed: 1 });
    expect(s.report.failures).toEqual([{ line: 3, reason: expect.stringMatching(/locked/i) }]);
    expect((await attributesOf(a, EMAIL, 'locked@x.io')).status).not.toBe(200);
    const { rows } = await db.query(
      'select i.profile_key from profile_identifiers i join keyspaces k using (account_id, keyspace_id) where i.account_id = $1 and k.discriminator = $2 order by 1',
      [a.accountId, EMAIL],
    );
    expect(rows.map((r) => r.profile_key)).toEqual(['free@x.io']);
  });

  it('counts the rows it commits and its job run, for /metrics', async () => {
    const a = await account();
    const scrape = async () => (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    const completedRuns = (text: string) =>
      metric(text, 'audience_job_duration_seconds_count', { kind: 'import', outcome: 'completed' }) ?? 0;
    const before = await scrape();
    const s = await runImport(
      a,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }),
      'email,first\nm1@x.io,One\nm2@x.io,Two\nnot-an-address,Bad\n',
    );
    expect(s.result).toEqual({ status: 'completed', profiles_found: 3, profiles_processed: 2, profiles_failed: 1 });
    await jobsEnded(a);
    const after = await scrape();
    // Refused rows are rows read too.
    expect(metric(after, 'audience_import_rows_total')! - (metric(before, 'audience_import_rows_total') ?? 0)).toBe(3);
    expect(completedRuns(after) - completedRuns(before)).toBe(1);
  });
});

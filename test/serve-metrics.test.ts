import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { metric } from './app.ts';
import { ROOT, dataDir, program, run, serveProgram, tokenFor } from './serve-program.ts';
import { until } from './until.ts';

serveProgram();

describe('what an operator watches: the metrics and log lines of real work (issue 25)', () => {
  const EXAMPLES = path.join(ROOT, 'examples');
  const SHOP = 'com.vendor1.sections.user-created.shop';
  const EMAIL = 'com.vendor1.keyspaces.email';
  const LOYAL = 'com.vendor1.segments.user-created.loyal-customers';
  /** An account of the demo's definitions, with a key and its token, for the example files. */
  async function exampleAccount(name: string) {
    const account = await program.cli('account', 'create', '--name', name);
    await program.cli('apply', path.join(ROOT, 'manifests', 'demo.json'), '--account', account.id);
    const key = await program.cli('key', 'create', '--account', account.id, '--name', 'watched');
    const { access_token } = (await (await tokenFor(program, key.client_id, key.client_secret)).json()) as {
      access_token: string;
    };
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(program.url(p), {
        method,
        headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, text, body: text.startsWith('{') ? JSON.parse(text) : text };
    };
    return { id: account.id as string, key, token: access_token, call };
  }
  /** Imports examples/customers.csv (first name, city, loyalty points of three addresses) as a shop would. */
  async function importCustomers(call: Awaited<ReturnType<typeof exampleAccount>>['call']) {
    const attributes = (await call('GET', `/audience/sections/${SHOP}/attributes`)).body.items as {
      discriminator: string;
      versions: { id: string }[];
    }[];
    const version = (word: string) => attributes.find((a) => a.discriminator.endsWith(word))!.versions.at(-1)!.id;
    const created = await call('POST', `/v2/audience/sections/${SHOP}/imports`, {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [
        { field_selector: 'first_name', attribute_version_id: version('.firstname') },
        { field_selector: 'city', attribute_version_id: version('.city') },
        { field_selector: 'loyalty_points', attribute_version_id: version('.loyalty-points') },
      ],
    });
    expect(created.status, created.text).toBe(201);
    const form = new FormData();
    for (const [name, value] of Object.entries(created.body.file_upload_body as Record<string, string>))
      form.append(name, value);
    form.append('file', new Blob([await fs.readFile(path.join(EXAMPLES, 'customers.csv'))], { type: 'text/csv' }));
    expect((await fetch(created.body.file_upload_url, { method: 'POST', body: form })).status).toBe(204);
    let status: { body: any } | undefined;
    await until('the import to complete', async () => {
      status = await call('GET', `/audience/sections/${SHOP}/imports/${created.body.import_id}`);
      return status.body.result.status === 'completed';
    });
    return status!.body;
  }
  async function exportLoyalCustomers(call: Awaited<ReturnType<typeof exampleAccount>>['call']): Promise<string> {
    const requested = await call('POST', '/audience/profiles/reports/segments', {
      section_discriminator: SHOP,
      segment: { timezone: 'Europe/Paris', segment_discriminator: LOYAL },
    });
    expect(requested.status, requested.text).toBe(201);
    const poll = new URL(requested.body.file_download_url_v2).pathname;
    let res: { status: number; text: string } | undefined;
    await until('the export to become ready', async () => (res = await call('GET', poll)).status === 200);
    return res!.text;
  }
  const scrape = async () => {
    const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    return (await fetch(program.url('/metrics'), { headers: { authorization: `Bearer ${adminToken}` } })).text();
  };

  it('counts the version, authentication failures, ingested activity events, mail and exported rows; the sweep of an export, due in a day, is not a waiting job', async () => {
    const before = await scrape();
    const count = (text: string, name: string, labels: Record<string, string>) => metric(text, name, labels) ?? 0;
    const { id, key, call } = await exampleAccount('Watched shop');

    // Authentication failures: a bearer token that is none, a wrong client secret, a wrong operator token.
    expect((await fetch(program.url('/audience/sections'), { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );
    expect((await tokenFor(program, key.client_id, 'not-the-secret')).status).toBe(401);
    expect((await fetch(program.url('/admin/accounts'), { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );

    // The example activity and its events, twice: the second time every one is a duplicate.
    await program.cli('activity', 'put', path.join(EXAMPLES, 'newsletter.json'), '--account', id);
    expect(await program.cli('activity', 'events', path.join(EXAMPLES, 'events.jsonl'), '--account', id)).toMatchObject(
      {
        recorded: 8,
      },
    );
    expect(await program.cli('activity', 'events', path.join(EXAMPLES, 'events.jsonl'), '--account', id)).toMatchObject(
      {
        duplicates: 8,
      },
    );

    // A transactional message kept in the outbox, and one to a suppressed address.
    await fs.writeFile(
      path.join(dataDir, 'receipt.json'),
      JSON.stringify({
        id: 'receipt',
        kind: 'email',
        section_discriminator: SHOP,
        name: 'Receipt',
        transactional: true,
        email_subject: 'Your receipt',
        sender_email_address: 'shop@shop.example',
        html: '<p>Thanks.</p>',
      }),
    );
    await program.cli('activity', 'put', path.join(dataDir, 'receipt.json'), '--account', id);
    await program.cli(
      'suppression',
      'add',
      '--account',
      id,
      '--channel',
      'com.vendor1.channels.email',
      '--address',
      'bob@example.com',
      '--reason',
      'Hard bounce',
    );
    const sends: string[] = [];
    for (const who of ['ann', 'bob']) {
      const sent = await call('POST', `/emails/sections/${SHOP}/activities/transactional/receipt/transactions`, {
        keyspace_discriminator: EMAIL,
        profile_key: `${who}@example.com`,
        to_name: who,
        to_email_address: `${who}@example.com`,
      });
      expect(sent.status, sent.text).toBe(201);
      sends.push(sent.body.id);
    }
    const statusOf = async (transaction: string) =>
      (await call('GET', `/emails/sections/${SHOP}/activities/receipt/transactions/${transaction}`)).body.status;
    await until('the suppressed message', async () => (await statusOf(sends[1])) === 'suppressed');
    await until('the message sent', async () => (await statusOf(sends[0])) === 'sent');

    // Profiles from the example CSV, and the file of the demo's segment of loyal customers (over 100 points).
    await importCustomers(call);
    const file = await exportLoyalCustomers(call);
    expect(file.trim().split('\r\n')).toHaveLength(3);

    const after = await scrape();
    expect(
      metric(after, 'audience_build_info', {
        version: JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')).version,
      }),
    ).toBe(1);
    const grew = (name: string, labels: Record<string, string>) =>
      count(after, name, labels) - count(before, name, labels);
    expect(grew('audience_authentication_failures_total', { credential: 'bearer' })).toBe(1);
    expect(grew('audience_authentication_failures_total', { credential: 'client' })).toBe(1);
    expect(grew('audience_authentication_failures_total', { credential: 'operator' })).toBe(1);
    expect(grew('audience_activity_events_total', { outcome: 'recorded' })).toBe(8);
    expect(grew('audience_activity_events_total', { outcome: 'duplicate' })).toBe(8);
    expect(grew('audience_mail_total', { outcome: 'sent' })).toBe(1);
    expect(grew('audience_mail_total', { outcome: 'suppressed' })).toBe(1);
    expect(grew('audience_export_rows_total', { kind: 'segments' })).toBe(2);
    // The export's sweeper waits for its day, not for a worker: no alert on queue latency.
    expect(metric(after, 'audience_jobs', { kind: 'export-sweep', state: 'waiting' })).toBeGreaterThanOrEqual(1);
    expect(metric(after, 'audience_jobs_oldest_waiting_seconds', { kind: 'export-sweep' })).toBe(0);
  });

  it('logs known query parameters by name only, personal path values only, a 4xx with its code and account, and each job run; no personal data', async () => {
    const { id, call } = await exampleAccount('Logged shop');
    const profile = 'dora.private@example.com';
    // An unknown query parameter carrying an address, and a route word after profiles/.
    expect((await call('GET', `/audience/sections?email=${encodeURIComponent(profile)}`)).status).toBe(200);
    // A known query parameter beside an unknown one.
    expect(
      (
        await call(
          'GET',
          `/audience/sections/${SHOP}/tags?include_keyspace_permissions=true&contact=${encodeURIComponent(profile)}`,
        )
      ).status,
    ).toBe(200);
    // A 4xx of a known route: a profile that does not exist, by its address, with a known query parameter.
    const missing = await call(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(profile)}/sections/${SHOP}/attributes`,
    );
    expect(missing.status).toBe(404);
    await importCustomers(call);
    await exportLoyalCustomers(call);

    const lines = await program.logLinesWith(
      (l) => l.msg === 'job completed' && l.kind === 'export' && l.account === id,
    );
    // One line per request, with its request and its answer.
    const answered = lines.filter((l) => l.msg === 'request completed');
    const urlsOf = (route: string) => lines.filter((l) => l.req?.route === route).map((l) => l.req.url);
    expect(urlsOf('/audience/sections').at(-1)).toBe('/audience/sections');
    expect(urlsOf('/audience/sections/:section_discriminator/tags').at(-1)).toBe(
      `/audience/sections/${SHOP}/tags?include_keyspace_permissions=[redacted]`,
    );
    // Route words after profiles/ stay.
    expect(urlsOf('/audience/profiles/reports/segments').at(-1)).toBe('/audience/profiles/reports/segments');
    expect(urlsOf('/v2/audience/profiles/reports/:report_id').at(-1)).toMatch(
      /^\/v2\/audience\/profiles\/reports\/[\w-]+$/,
    );
    const attributesRoute =
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/attributes';
    expect(urlsOf(attributesRoute).at(-1)).toBe(
      `/audience/keyspaces/${EMAIL}/profiles/[redacted]/sections/${SHOP}/attributes`,
    );
    // The 404's line names its error code and the account.
    const refused = answered.find((l) => l.req.route === attributesRoute && l.res.statusCode === 404);
    expect(refused?.res).toMatchObject({ code: expect.stringMatching(/^AUD-\d+$/), account: id });
    // The jobs of the import and the export: start and end, kind, account, rows, duration, outcome.
    const jobs = lines.filter((l) => l.account === id && (l.kind === 'import' || l.kind === 'export'));
    expect(jobs.map((l) => [l.kind, l.outcome])).toEqual([
      ['import', 'started'],
      ['import', 'completed'],
      ['export', 'started'],
      ['export', 'completed'],
    ]);
    expect(jobs[1]).toMatchObject({
      msg: 'job completed',
      rows: 3,
      seconds: expect.any(Number),
      job: expect.any(String),
    });
    expect(jobs[3]).toMatchObject({ rows: 2, seconds: expect.any(Number) });
    // No address of the request or of the imported file anywhere in the output.
    for (const address of [profile, 'ann@example.com', 'cleo@example.com', 'dora.private', 'Lyon'])
      expect(program.output).not.toContain(address);
  });
});

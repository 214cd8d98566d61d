import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { expectProblem, TestServer } from '../../test/app.ts';
import { SmtpReceiver, type ReceivedMail } from '../../test/smtp.ts';
import type { Manifest } from '../definitions/schemas.ts';
import { withTransaction } from '../store/pool.ts';

// Transactional sends end to end (SPEC §2.15, §4.8, §6.3; docs/mail.md): the public routes, the
// worker, a real SMTP server on loopback, the tracking links and the events they record.

const NS = 'com.vendor1';
const EMAIL = `${NS}.keyspaces.email`;
const TX_KEYSPACE = `${NS}.keyspaces.transactional-email`;
const SHOP = `${NS}.sections.user-created.shop`;
const MANIFEST: Manifest = {
  sections: [{ name: 'Shop', attributes: [{ name: 'First name', versions: [{ type: ['Text'] }] }] }],
};
const FIRST_NAME = `${NS}.attributes.user-created.first-name`;

let server: TestServer;
let smtp: SmtpReceiver;
let accountId: string;
let token: string;
let activity: string;

const admin = (method: string, path: string, body?: unknown) =>
  server.admin(method, `/admin/accounts/${accountId}${path}`, body);
const sendPath = (id = activity, section = SHOP) =>
  `/emails/sections/${section}/activities/transactional/${id}/transactions`;
const send = (body: Record<string, unknown>, id = activity) => server.request('POST', sendPath(id), { token, body });
const statusOf = (transaction: string, id = activity) =>
  server.request('GET', `/emails/sections/${SHOP}/activities/${id}/transactions/${transaction}`, { token });
const eventsOf = async (key: string, keyspace = EMAIL) =>
  (await server.request('GET', `/audience/keyspaces/${keyspace}/profiles/${key}/sections/${SHOP}/events`, { token }))
    .body.items as {
    correlation_id: string;
    data: Record<string, unknown>;
  }[];

/** A send body with the required fields (TX-02). */
const body = (key: string, over: Record<string, unknown> = {}) => ({
  keyspace_discriminator: EMAIL,
  profile_key: key,
  to_name: 'Ann Example',
  to_email_address: key,
  variables: { order: 'A-17' },
  ...over,
});

/** The status once the worker has dealt with the send (it leaves queued). */
async function settled(transaction: string, id = activity, timeoutMs = 30_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await statusOf(transaction, id);
    expect(res.status, res.text).toBe(200);
    if (res.body.status !== 'queued' || Date.now() > until) return res.body.status;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The message the SMTP server received for a send. */
async function mailOf(transaction: string): Promise<ReceivedMail> {
  for (let n = 1; ; n++) {
    const mail = (await smtp.waitFor(n)).find((m) => m.parsed.messageId === `<${transaction}@shop.example>`);
    if (mail) return mail;
  }
}

/** Sends and waits until it is dealt with; answers the transaction id and its status. */
async function sendSettled(b: Record<string, unknown>, id = activity): Promise<{ id: string; status: string }> {
  const res = await send(b, id);
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, status: await settled(res.body.id, id) };
}

const transactionalActivity = (over: Record<string, unknown> = {}) => ({
  kind: 'email',
  section_discriminator: SHOP,
  name: 'Order confirmation',
  status: 'active',
  transactional: true,
  email_subject: 'Order {{ order }}',
  preheader: 'Thanks, {{ profile.first_name | default: "friend" }}',
  sender_name: 'The Shop',
  sender_email_address: 'orders@shop.example',
  reply_to: 'help@shop.example',
  html: '<html><body><p>Hello {{ profile.first_name }}, order {{ order }}.</p><a href="https://shop.example/orders/{{ order }}">Your order</a> <a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>',
  ...over,
});

beforeAll(async () => {
  smtp = await SmtpReceiver.start();
  server = await TestServer.start({ SMTP_URL: smtp.url(), TRACKING_URL: 'https://track.example' }, { worker: true });
  const login = await server.login(MANIFEST, {
    requests_per_second: null,
    token_requests_per_minute: null,
    profile_key_operations_per_second: null,
  });
  accountId = login.accountId;
  token = login.token;
  const created = await admin('PUT', '/activities/order-confirmation', transactionalActivity());
  expect(created.status, created.text).toBe(201);
  activity = created.body.id;
});
afterAll(async () => {
  await server?.close();
  await smtp?.close();
});

describe('sending', () => {
  it('TX-01 TX-09 TX-10 TX-12 answers 201 {id}; the worker renders and sends the message; the new profile gets SENT with the transaction id as correlation id; the status is sent', async () => {
    const key = 'new.customer@example.com';
    await server.request('PATCH', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/attributes`, {
      token,
      body: {},
    });
    const res = await send(body(key));
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    // TX-10: the profile exists as soon as the send is accepted.
    expect(
      (
        await server.request('GET', `/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/attributes`, {
          token,
        })
      ).status,
    ).toBe(200);
    expect(await settled(res.body.id)).toBe('sent');
    expect((await statusOf(res.body.id)).body).toEqual({ id: res.body.id, status: 'sent' });
    const mail = await mailOf(res.body.id);
    expect(mail.to).toEqual([key]);
    expect(mail.parsed.subject).toBe('Order A-17');
    expect(mail.parsed.from?.value).toEqual([{ name: 'The Shop', address: 'orders@shop.example' }]);
    expect(mail.parsed.replyTo?.value[0].address).toBe('help@shop.example');
    expect(mail.parsed.html).toContain('Thanks, friend');
    expect(mail.parsed.text).toContain('order A-17.');
    const events = await eventsOf(key);
    expect(events).toEqual([
      expect.objectContaining({ correlation_id: res.body.id, data: { activityId: activity, type: 'SENT' } }),
    ]);
    // The job was completed with SENT, in the same transaction.
    expect(
      (await server.admin('GET', '/admin/jobs?kind=transactional-send')).body.items.filter(
        (j: { payload: { transaction_id: string } }) => j.payload.transaction_id === res.body.id,
      ),
    ).toEqual([]);
  });

  it('sends accepted at once are all sent, each recorded SENT once, when the worker records them in batches', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `batch${i}@example.com`);
    const accepted = await Promise.all(keys.map((key) => send(body(key))));
    for (const res of accepted) expect(res.status, res.text).toBe(201);
    for (const res of accepted) expect(await settled(res.body.id)).toBe('sent');
    for (const [i, key] of keys.entries()) {
      expect((await eventsOf(key)).filter((e) => e.data.type === 'SENT')).toEqual([
        expect.objectContaining({ correlation_id: accepted[i].body.id }),
      ]);
    }
    const statistics = (
      await server.request('GET', `/emails/sections/${SHOP}/activities/${activity}?include_statistics=true`, { token })
    ).body.statistics;
    expect(statistics.sent).toBeGreaterThanOrEqual(keys.length);
  });

  it("renders the profile's attributes in the section (profile.<name>)", async () => {
    const key = 'named@example.com';
    await sendSettled(body(key));
    const patch = await server.request(
      'PATCH',
      `/v2/audience/keyspaces/${EMAIL}/profiles/${key}/sections/${SHOP}/attributes`,
      {
        token,
        body: { [FIRST_NAME]: 'Ann' },
        headers: { 'content-type': 'application/merge-patch+json' },
      },
    );
    expect([200, 204], patch.text).toContain(patch.status);
    const { id, status } = await sendSettled(body(key));
    expect(status).toBe('sent');
    expect((await mailOf(id)).parsed.text).toContain('Hello Ann, order A-17.');
  });

  it("TX-04 the sender, reply-to, subject and pre-header the send omits are the activity's; those it gives win", async () => {
    const { id } = await sendSettled(
      body('override@example.com', {
        from_name: 'Ops',
        from_email_address: 'ops@shop.example',
        reply_email_address: 'desk@shop.example',
        subject_line: 'Your {{ order }} has shipped',
        pre_header: 'On its way',
      }),
    );
    const mail = (await smtp.waitFor(1)).find((m) => m.parsed.messageId === `<${id}@shop.example>`)!;
    expect(mail.parsed.from?.value).toEqual([{ name: 'Ops', address: 'ops@shop.example' }]);
    expect(mail.parsed.replyTo?.value[0].address).toBe('desk@shop.example');
    expect(mail.parsed.subject).toBe('Your A-17 has shipped');
    expect(mail.parsed.html).toContain('>On its way</div>');
  });

  it('TX-06 TX-08 attachments arrive with their names and types, in a body above the general 100 KB', async () => {
    const big = Buffer.alloc(600 * 1024, 7);
    const res = await send(
      body('files@example.com', {
        attachments: [
          { name: 'invoice.pdf', content_type: 'application/pdf', content: big.toString('base64') },
          { name: 'terms.txt', content_type: 'text/plain', content: Buffer.from('Terms').toString('base64') },
        ],
      }),
    );
    expect(res.status, res.text).toBe(201);
    expect(await settled(res.body.id)).toBe('sent');
    const mail = (await smtp.waitFor(1)).find((m) => m.parsed.messageId === `<${res.body.id}@shop.example>`)!;
    expect(mail.parsed.attachments.map((a) => [a.filename, a.contentType, a.size])).toEqual([
      ['invoice.pdf', 'application/pdf', big.length],
      ['terms.txt', 'text/plain', 5],
    ]);
  });

  it('TX-11 the transactional-email keyspace may be used for sends', async () => {
    const res = await send(body('receipt@example.com', { keyspace_discriminator: TX_KEYSPACE }));
    expect(res.status, res.text).toBe(201);
    expect(await settled(res.body.id)).toBe('sent');
  });
});

describe('delivery reports (docs/mail.md "Delivery reports")', () => {
  const report = (type: string, key: string, transaction: string, over: Record<string, unknown> = {}) =>
    admin('POST', '/activity-events', [
      {
        activity_id: activity,
        type,
        keyspace_discriminator: EMAIL,
        profile_key: key,
        correlation_id: transaction,
        ...over,
      },
    ]);

  it('TX-12 a DELIVERED event with the transaction id as correlation id makes the status delivered; a later BOUNCED report, bounced', async () => {
    const key = 'reported@example.com';
    const { id, status } = await sendSettled(body(key));
    expect(status).toBe('sent');
    // A report of another send of the same activity changes nothing here.
    const other = await sendSettled(body('other.reported@example.com'));
    expect((await report('DELIVERED', 'other.reported@example.com', other.id)).status).toBe(200);
    expect((await statusOf(id)).body).toEqual({ id, status: 'sent' });

    const delivered = await report('DELIVERED', key, id);
    expect(delivered.status, delivered.text).toBe(200);
    expect((await statusOf(id)).body).toEqual({ id, status: 'delivered' });
    expect((await statusOf(other.id)).body).toEqual({ id: other.id, status: 'delivered' });

    expect((await report('BOUNCED', key, id, { bounce_code: 2001 })).status).toBe(200);
    expect((await statusOf(id)).body).toEqual({ id, status: 'bounced' });
    // Sent again, the delivery report changes nothing: the bounce stays.
    expect((await report('DELIVERED', key, id)).body).toMatchObject({ recorded: 0, duplicates: 1 });
    expect((await statusOf(id)).body).toEqual({ id, status: 'bounced' });
  });

  it('TX-12 a BOUNCED report without a delivery report makes a sent send bounced', async () => {
    const key = 'bounced.report@example.com';
    const { id } = await sendSettled(body(key));
    expect((await report('BOUNCED', key, id)).status).toBe(200);
    expect((await statusOf(id)).body).toEqual({ id, status: 'bounced' });
  });
});

describe('the body of a send (SPEC §4.8)', () => {
  it('TX-02 keyspace_discriminator, profile_key, to_name and to_email_address are required (400 naming the field)', async () => {
    for (const field of ['keyspace_discriminator', 'profile_key', 'to_name', 'to_email_address']) {
      const b: Record<string, unknown> = body('x@example.com');
      delete b[field];
      expect(expectProblem(await send(b), 400)).toContain(field);
    }
  });

  it('TX-03 to_email_address, from_email_address and reply_email_address must be addresses (400 naming the field)', async () => {
    for (const field of ['to_email_address', 'from_email_address', 'reply_email_address']) {
      expect(expectProblem(await send(body('x@example.com', { [field]: 'not an address' })), 400)).toContain(field);
    }
  });

  it('TX-05 variables over 200 KB in all are 413', async () => {
    expectProblem(await send(body('x@example.com', { variables: { big: 'x'.repeat(201 * 1024) } })), 413, 'AUD-2104');
    expect((await send(body('x@example.com', { variables: { big: 'x'.repeat(190 * 1024) } }))).status).toBe(201);
  });

  it('TX-06 TX-07 more than 5 attachments, or over 2 MB in all, are 413; content that is not base64 is 400', async () => {
    const small = { name: 'a.txt', content_type: 'text/plain', content: 'aGk=' };
    expect(expectProblem(await send(body('x@example.com', { attachments: Array(6).fill(small) })), 413)).toMatch(
      /at most 5/,
    );
    const half = Buffer.alloc(1100 * 1024).toString('base64');
    expectProblem(
      await send(
        body('x@example.com', {
          attachments: [
            { ...small, content: half },
            { ...small, content: half },
          ],
        }),
      ),
      413,
      'AUD-2105',
    );
    expect(
      expectProblem(
        await send(body('x@example.com', { attachments: [small, { ...small, content: 'not base64!' }] })),
        400,
        'AUD-2107',
      ),
    ).toContain('attachments/1/content');
  });

  it('a subject or pre-header template that does not parse is 400 at once (AUD-2101)', async () => {
    expect(
      expectProblem(await send(body('x@example.com', { subject_line: 'Order {{ order' })), 400, 'AUD-2101'),
    ).toMatch(/^subject_line/);
  });

  it('a keyspace that does not exist is 404, a read-only one 403, a key of the wrong form 400', async () => {
    expectProblem(await send(body('x@example.com', { keyspace_discriminator: `${NS}.keyspaces.nope` })), 404);
    expectProblem(await send(body('x@example.com', { keyspace_discriminator: `${NS}.keyspaces.export` })), 403);
    expectProblem(await send(body('not-an-address')), 400);
  });
});

describe('activities and transactions that do not exist', () => {
  it('TX-13 an unknown activity, a non-transactional one or an unknown transaction is 404', async () => {
    expectProblem(await send(body('x@example.com'), 'no-such-activity'), 404);
    const marketing = (await admin('PUT', '/activities/newsletter', transactionalActivity({ transactional: false })))
      .body.id;
    expectProblem(await send(body('x@example.com'), marketing), 404);
    const { id } = await sendSettled(body('status@example.com'));
    expectProblem(await statusOf(id, marketing), 404);
    expectProblem(await statusOf(id, 'no-such-activity'), 404);
    expectProblem(await statusOf('00000000-0000-4000-8000-000000000000'), 404, 'AUD-2106');
    expectProblem(await statusOf('not-a-uuid'), 404, 'AUD-2106');
  });

  it('a transactional activity is defined in the account manifest with its fields, and sends; one whose template does not parse refuses the manifest (400 naming it)', async () => {
    const manifest = {
      ...MANIFEST,
      activities: [
        {
          id: 'manifest-receipt',
          ...transactionalActivity({
            section_discriminator: 'com.{vendor}1.sections.user-created.shop',
            text: 'Order {{ order }}, text',
          }),
        },
      ],
    };
    const applied = await admin('PUT', '/manifest', manifest);
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body.created).toContain('activity manifest-receipt');
    expect((await admin('GET', '/activities/manifest-receipt')).body).toMatchObject({
      transactional: true,
      preheader: manifest.activities[0].preheader,
      reply_to: 'help@shop.example',
      html: manifest.activities[0].html,
      text: 'Order {{ order }}, text',
    });
    const { id, status } = await sendSettled(body('manifest@example.com'), 'manifest-receipt');
    expect(status).toBe('sent');
    expect((await mailOf(id)).parsed.text).toContain('Order A-17, text');

    const broken = {
      ...manifest,
      activities: [{ ...manifest.activities[0], id: 'manifest-broken', html: '<p>{% if order %}unclosed</p>' }],
    };
    expect(expectProblem(await admin('PUT', '/manifest', broken), 400, 'AUD-2101')).toMatch(
      /^activities\[0\]\.html is not a valid template/,
    );
    expectProblem(await admin('GET', '/activities/manifest-broken'), 404);
  });

  it('a transactional activity whose template does not parse is refused when saved (400 naming the field)', async () => {
    const res = await admin('PUT', '/activities/broken', transactionalActivity({ html: '<p>{% if %}</p>' }));
    expect(expectProblem(res, 400, 'AUD-2101')).toMatch(/^html is not a valid template/);
    expect(
      expectProblem(
        await admin('PUT', '/activities/broken', transactionalActivity({ email_subject: '{{ a | nope }}' })),
        400,
        'AUD-2101',
      ),
    ).toMatch(/^email_subject/);
  });
});

// Replays a migration's statements on the migrated schema: on a Citus cluster they would meet
// distributed tables, which no migration before 0020 ever met (a database is distributed after them).
describe.skipIf(inject('citus'))('jobs of sends queued before migration 0018', () => {
  it('get the send they serve (the worker reads no send row), the sends drop it; a job whose send is no longer queued goes', async () => {
    const source = await fs.readFile(new URL('../store/migrations/0018_send_jobs.sql', import.meta.url), 'utf8');
    // The part that moves data (the rest creates a function, which exists already); in a transaction
    // rolled back, so that the worker of the test server never sees these rows.
    const moveData = source.slice(0, source.indexOf('create function'));
    const request = {
      to_name: 'Ann',
      to_email_address: 'old@example.com',
      from_email_address: 'orders@shop.example',
      variables: { order: 'A-1' },
      attachments: [],
    };
    const rollback = new Error('rolled back');
    await withTransaction(server.services.pool, async (tx) => {
      // The column the migration moves the requests out of and drops, as it was before it.
      await tx.query('alter table transactional_sends add column request jsonb');
      const {
        rows: [section],
      } = await tx.query<{ section_id: string }>(
        'select section_id::text from sections where account_id = $1 and discriminator = $2',
        [accountId, SHOP],
      );
      const {
        rows: [keyspace],
      } = await tx.query<{ keyspace_id: string }>(
        'select keyspace_id::text from keyspaces where account_id = $1 and discriminator = $2',
        [accountId, EMAIL],
      );
      const { rows: sends } = await tx.query<{ transaction_id: string; status: string }>(
        `insert into transactional_sends (account_id, activity_id, section_id, keyspace_id, profile_key, to_address, status, request)
         values ($1, $2, $3, $4, 'old@example.com', 'old@example.com', 'queued', $5), ($1, $2, $3, $4, 'old@example.com', 'old@example.com', 'sent', null)
         returning transaction_id::text, status`,
        [accountId, activity, section.section_id, keyspace.keyspace_id, request],
      );
      const { rows: jobs } = await tx.query<{ job_id: string }>(
        `insert into jobs (account_id, kind, payload, run_at) select $1, 'transactional-send', jsonb_build_object('transaction_id', t), now() + interval '1 hour'
         from unnest($2::text[]) t returning job_id::text`,
        [accountId, sends.map((x) => x.transaction_id)],
      );
      await tx.query(moveData);
      const { rows: after } = await tx.query<{ job_id: string; payload: Record<string, unknown> }>(
        'select job_id::text, payload from jobs where account_id = $1 and job_id = any($2::bigint[])',
        [accountId, jobs.map((j) => j.job_id)],
      );
      expect(after).toEqual([
        {
          job_id: jobs[0].job_id,
          payload: {
            transaction_id: sends[0].transaction_id,
            activity_id: activity,
            section_id: section.section_id,
            keyspace_id: keyspace.keyspace_id,
            profile_key: 'old@example.com',
            request,
          },
        },
      ]);
      const { rows: columns } = await tx.query(
        "select 1 from information_schema.columns where table_name = 'transactional_sends' and column_name = 'request'",
      );
      expect(columns).toEqual([]);
      throw rollback;
    }).catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
  });
});

describe('sends that are not delivered', () => {
  it('a suppressed address is not sent to: suppressed', async () => {
    const key = 'suppressed@example.com';
    expect(
      (
        await admin('PUT', '/suppressions', {
          channel_discriminator: `${NS}.channels.email`,
          address: key,
          reason: 'complained',
        })
      ).status,
    ).toBe(204);
    const before = smtp.received.length;
    expect((await sendSettled(body(key))).status).toBe('suppressed');
    expect(smtp.received.length).toBe(before);
  });

  it('a locked profile is not sent to: suppressed', async () => {
    const key = 'locked@example.com';
    await send(body(key));
    expect((await server.request('PUT', `/audience/keyspaces/${EMAIL}/profiles/${key}/locks`, { token })).status).toBe(
      204,
    );
    expect((await sendSettled(body(key))).status).toBe('suppressed');
  });

  it('a 4xx answer is tried again with back-off, and the message sent once the server takes it', async () => {
    let refusals = 0;
    smtp.answer = (step, address) =>
      step === 'data' && address === 'busy@example.com' && refusals++ === 0 ? 451 : undefined;
    try {
      const { id, status } = await sendSettled(body('busy@example.com'));
      expect(status).toBe('sent');
      expect(refusals).toBe(2);
      expect((await mailOf(id)).to).toEqual(['busy@example.com']);
    } finally {
      smtp.answer = () => undefined;
    }
  });

  it('a 5xx answer to the message fails the send; to the recipient, bounces it (BOUNCED)', async () => {
    smtp.answer = (step, address) =>
      (step === 'data' && address === 'rejected@example.com') || (step === 'rcpt' && address === 'unknown@example.com')
        ? 550
        : undefined;
    try {
      expect((await sendSettled(body('rejected@example.com'))).status).toBe('failed');
      const bounced = await sendSettled(body('unknown@example.com'));
      expect(bounced.status).toBe('bounced');
      expect(await eventsOf('unknown@example.com')).toEqual([
        expect.objectContaining({ correlation_id: bounced.id, data: { activityId: activity, type: 'BOUNCED' } }),
      ]);
    } finally {
      smtp.answer = () => undefined;
    }
  });
});

describe('tracking links', () => {
  let id: string;
  let mail: ReceivedMail;
  const key = 'tracked@example.com';
  /** A tracking link of the message, on this server rather than TRACKING_URL. */
  const local = (url: string) => url.replace('https://track.example', '');
  const get = (url: string, headers: Record<string, string> = {}) =>
    fetch(server.url + local(url), { redirect: 'manual', headers });
  beforeAll(async () => {
    ({ id } = await sendSettled(body(key)));
    mail = await mailOf(id);
  });

  it('the open pixel answers a GIF and records OPENED once, with the device', async () => {
    const pixel = /<img src="([^"]+)"/.exec(mail.parsed.html as string)![1];
    for (let i = 0; i < 2; i++) {
      const res = await get(pixel, {
        'user-agent': 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148',
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/gif');
    }
    const opened = (await eventsOf(key)).filter((e) => e.data.type === 'OPENED');
    expect(opened).toEqual([
      expect.objectContaining({ correlation_id: id, data: { activityId: activity, type: 'OPENED', device: 'MOBILE' } }),
    ]);
  });

  it('a click link redirects to the link the message held and records CLICKED once, with the link', async () => {
    const click = /href="(https:\/\/track\.example\/mail\/click\/[^"]+)"/.exec(mail.parsed.html as string)![1];
    for (let i = 0; i < 2; i++) {
      const res = await get(click, { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('https://shop.example/orders/A-17');
    }
    const clicked = (await eventsOf(key)).filter((e) => e.data.type === 'CLICKED');
    expect(clicked).toEqual([
      expect.objectContaining({
        data: {
          activityId: activity,
          type: 'CLICKED',
          device: 'DESKTOP',
          linkId: '0',
          linkUrl: 'https://shop.example/orders/A-17',
          linkTitle: 'Your order',
        },
      }),
    ]);
  });

  it('a forged or altered link is refused (404) and records nothing', async () => {
    const click = /href="(https:\/\/track\.example\/mail\/click\/[^"]+)"/.exec(mail.parsed.html as string)![1];
    const altered = click.replace(/\.0\.([^.]+)$/, '.1.$1');
    const forged = `/mail/click/${accountId}.${id}.0.AAAAAAAAAAAAAAAAAAAAAA`;
    for (const url of [
      altered,
      forged,
      `/mail/open/${accountId}.${id}.AAAAAAAAAAAAAAAAAAAAAA`,
      '/mail/unsubscribe/nothing',
    ]) {
      const res = await get(url);
      expect(res.status).toBe(404);
      expect(res.headers.get('location')).toBeNull();
    }
    expect((await server.request('POST', `/mail/unsubscribe/${accountId}.${id}.AAAAAAAAAAAAAAAAAAAAAA`)).status).toBe(
      404,
    );
  });

  it('List-Unsubscribe-Post one-click (RFC 8058) records UNSUBSCRIBED once and suppresses the address: later sends to it are suppressed', async () => {
    const header = mail.parsed.headerLines.find((h) => h.key === 'list-unsubscribe')!.line;
    const url = /<([^>]+)>/.exec(header)![1];
    expect(mail.parsed.html).toContain(`href="${url}"`);
    // A GET (a mail scanner following the link) shows the page and changes nothing.
    const page = await get(url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post">');
    expect((await eventsOf(key)).filter((e) => e.data.type === 'UNSUBSCRIBED')).toEqual([]);
    for (let i = 0; i < 2; i++) {
      const res = await server.request('POST', local(url), {
        raw: 'List-Unsubscribe=One-Click',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(res.status, res.text).toBe(200);
    }
    expect((await eventsOf(key)).filter((e) => e.data.type === 'UNSUBSCRIBED')).toEqual([
      expect.objectContaining({ correlation_id: id }),
    ]);
    expect((await sendSettled(body(key))).status).toBe('suppressed');
  });
});

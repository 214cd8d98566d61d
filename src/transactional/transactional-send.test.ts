import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import {
  EMAIL,
  FIRST_NAME,
  NS,
  SHOP,
  TX_KEYSPACE,
  activity,
  admin,
  body,
  eventsOf,
  mailOf,
  send,
  sendSettled,
  server,
  settled,
  smtp,
  statusOf,
  token,
  transactionalServer,
} from '../../test/transactional-http.ts';

// Transactional sends end to end (SPEC §2.15, §4.8, §6.3; docs/mail.md): sending through the
// public route and the worker to a real SMTP server, delivery reports, and the body of a send.

transactionalServer();

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

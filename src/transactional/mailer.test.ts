import crypto from 'node:crypto';
import { simpleParser, type ParsedMail } from 'mailparser';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestServer, expectProblem } from '../../test/app.ts';
import { SmtpReceiver } from '../../test/smtp.ts';
import { createPool } from '../store/pool.ts';
import { testDatabase } from '../../test/app.ts';
import { DeliveryError, openMailer, type Mailer } from './mailer.ts';
import { composeMessage, type MessageInput } from './message.ts';
import * as q from './queries.ts';
import { readTracking, trackingKey } from './tracking.ts';

const key = trackingKey('test-server-secret');

/** A header of a parsed message as it was written, unfolded (mailparser structures some headers). */
function header(mail: ParsedMail, name: string): string | undefined {
  const line = mail.headerLines.find((h) => h.key === name)?.line;
  return line
    ?.slice(line.indexOf(':') + 1)
    .replace(/\r?\n[ \t]+/g, ' ')
    .trim();
}
const PDF = Buffer.from('%PDF-1.4 a small document');

/** A message with a bit of everything: variables, a profile attribute, links, an attachment. */
function input(overrides: Partial<MessageInput> = {}): MessageInput {
  return {
    templates: {
      subject: 'Order {{ order_id }} for {{ profile.first_name }}',
      preheader: 'Your order of {{ items | size }} items',
      html: '<html><body><p>Hello {{ name }},</p><p>Your order <b>{{ order_id }}</b>.</p><a href="https://shop.example/orders/{{ order_id }}?a=1&amp;b=2">See the order</a> <a href="mailto:help@shop.example">help</a> <a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>',
      text: null,
    },
    variables: { order_id: 'A-17', name: '<Ann & Bob>', items: [1, 2, 3] },
    profile: { first_name: 'Ann' },
    from: { name: 'The Shop', address: 'orders@shop.example' },
    to: { name: 'Ann Example', address: 'ann@example.com' },
    replyTo: 'help@shop.example',
    attachments: [
      { name: 'invoice.pdf', content_type: 'application/pdf', content: PDF.toString('base64') },
      { name: 'note.txt', content_type: 'text/plain', content: Buffer.from('thanks').toString('base64') },
    ],
    tracking: { base: 'https://t.example', key, target: { accountId: '7', transactionId: crypto.randomUUID() } },
    ...overrides,
  };
}

describe('delivery over SMTP (nodemailer to a loopback smtp-server, parsed back with mailparser)', () => {
  let smtp: SmtpReceiver;
  let mailer: Mailer;
  const auth = { user: 'relay', pass: 's3cret' };
  beforeAll(async () => {
    smtp = await SmtpReceiver.start({ auth, secure: true });
    mailer = openMailer({ smtpUrl: smtp.url(auth, true) }, undefined as unknown as pg.Pool);
  });
  afterAll(async () => {
    await mailer.close();
    await smtp.close();
  });

  it('sends the rendered message over TLS with auth: recipients, headers, variables, attachments, text alternative, List-Unsubscribe (RFC 8058)', async () => {
    const given = input();
    const { message, links } = await composeMessage(given);
    const answer = await mailer.send('7', given.tracking.target.transactionId, message);
    expect(answer.response).toMatch(/^250\b/);
    const [mail] = await smtp.waitFor(1);
    expect(mail.user).toBe('relay');
    expect(mail.from).toBe('orders@shop.example');
    expect(mail.to).toEqual(['ann@example.com']);
    const m = mail.parsed;
    expect(m.from?.value).toEqual([{ name: 'The Shop', address: 'orders@shop.example' }]);
    expect((m.to as { value: unknown[] }).value).toEqual([{ name: 'Ann Example', address: 'ann@example.com' }]);
    expect(m.replyTo?.value[0].address).toBe('help@shop.example');
    expect(m.subject).toBe('Order A-17 for Ann');
    expect(m.messageId).toBe(`<${given.tracking.target.transactionId}@shop.example>`);
    // Output of the HTML body is escaped; the pre-header is there, hidden; the pixel is last.
    expect(m.html).toContain('Hello &lt;Ann &amp; Bob&gt;,');
    expect(m.html).toContain('>Your order of 3 items</div>');
    expect(m.html).toMatch(/<img src="https:\/\/t\.example\/mail\/open\/[^"]+" width="1" height="1"[^>]*><\/body>/);
    // Links: the http one tracked, mailto and unsubscribe as they were.
    expect(links).toEqual([{ url: 'https://shop.example/orders/A-17?a=1&b=2', title: 'See the order' }]);
    const click = /href="https:\/\/t\.example\/mail\/click\/([^"]+)"/.exec(m.html as string)![1];
    expect(readTracking(key, 'click', click)).toEqual({ ...given.tracking.target, link: 0 });
    expect(m.html).toContain('href="mailto:help@shop.example"');
    const unsubscribe = /^<(https:\/\/t\.example\/mail\/unsubscribe\/[^>]+)>$/.exec(header(m, 'list-unsubscribe')!)![1];
    expect(m.html).toContain(`href="${unsubscribe}"`);
    expect(readTracking(key, 'unsubscribe', unsubscribe.split('/').pop()!)).toEqual(given.tracking.target);
    expect(header(m, 'list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
    // The text alternative, made from the HTML as rendered (its links untracked).
    expect(m.text).toBe(
      'Hello <Ann & Bob>,\n\nYour order A-17.\n\nSee the order (https://shop.example/orders/A-17?a=1&b=2) help (mailto:help@shop.example) Unsubscribe (' +
        unsubscribe +
        ')',
    );
    expect(m.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([
      ['invoice.pdf', 'application/pdf', PDF.toString()],
      ['note.txt', 'text/plain', 'thanks'],
    ]);
  });

  it('keeps a text body the activity gives, rendered', async () => {
    const given = input({
      templates: { ...input().templates, text: 'Hi {{ name }}, order {{ order_id }}' },
      attachments: [],
    });
    await mailer.send('7', given.tracking.target.transactionId, (await composeMessage(given)).message);
    const mail = (await smtp.waitFor(2))[1];
    expect(mail.parsed.text?.trim()).toBe('Hi <Ann & Bob>, order A-17');
  });
});

describe('the SMTP server refusing', () => {
  let smtp: SmtpReceiver;
  let mailer: Mailer;
  beforeAll(async () => {
    smtp = await SmtpReceiver.start();
    mailer = openMailer({ smtpUrl: smtp.url() }, undefined as unknown as pg.Pool);
  });
  afterAll(async () => {
    await mailer.close();
    await smtp.close();
  });

  const sendOne = async () =>
    mailer.send('7', crypto.randomUUID(), (await composeMessage(input({ attachments: [] }))).message);
  const refusal = async () =>
    sendOne().then(
      () => undefined,
      (err: unknown) => err as DeliveryError,
    );

  it('a 4xx answer may pass later: not permanent, and the same message is taken once the server takes it', async () => {
    smtp.answer = (step) => (step === 'data' ? 451 : undefined);
    const err = await refusal();
    expect(err).toBeInstanceOf(DeliveryError);
    expect(err).toMatchObject({ permanent: false, refused: false });
    expect(err!.message).toMatch(/^451\b/);
    smtp.answer = () => undefined;
    expect((await sendOne()).response).toMatch(/^250\b/);
  });

  it('a 5xx answer to the recipient is a permanent refusal of the recipient (a bounce); to the message, a permanent failure', async () => {
    smtp.answer = (step) => (step === 'rcpt' ? 550 : undefined);
    expect(await refusal()).toMatchObject({ permanent: true, refused: true });
    smtp.answer = (step) => (step === 'data' ? 554 : undefined);
    expect(await refusal()).toMatchObject({ permanent: true, refused: false });
  });

  it('a refusal does not carry the address in its reason (logs must not hold it)', async () => {
    smtp.answer = (step) => (step === 'rcpt' ? 550 : undefined);
    expect((await refusal())!.message).not.toContain('ann@example.com');
  });
});

describe('DKIM signing', () => {
  it('signs every message with the configured key, List-Unsubscribe and List-Unsubscribe-Post among the signed headers (RFC 8058 §4)', async () => {
    const smtp = await SmtpReceiver.start();
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    const mailer = openMailer(
      {
        smtpUrl: smtp.url(),
        dkim: {
          domainName: 'shop.example',
          keySelector: 'mail2026',
          privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
        },
      },
      undefined as unknown as pg.Pool,
    );
    try {
      await mailer.send('7', crypto.randomUUID(), (await composeMessage(input())).message);
      const [mail] = await smtp.waitFor(1);
      const signature = header(mail.parsed, 'dkim-signature')!;
      expect(signature).toMatch(/\bd=shop\.example;/);
      expect(signature).toMatch(/\bs=mail2026;/);
      const signed = /\bh=([^;]+)/.exec(signature)![1].replace(/\s+/g, '').toLowerCase().split(':');
      expect(signed).toEqual(
        expect.arrayContaining(['from', 'to', 'subject', 'list-unsubscribe', 'list-unsubscribe-post']),
      );
    } finally {
      await mailer.close();
      await smtp.close();
    }
  });
});

describe('the built-in outbox (SMTP_URL unset)', () => {
  let pool: pg.Pool;
  let server: TestServer;
  beforeAll(async () => {
    server = await TestServer.start();
    pool = createPool(await testDatabase(), 2);
  });
  afterAll(async () => {
    await pool.end();
    await server.close();
  });

  it('keeps each message whole, as it would have gone out', async () => {
    const { accountId } = await server.createAccount();
    const mailer = openMailer({}, pool);
    const given = input();
    const answer = await mailer.send(
      accountId,
      given.tracking.target.transactionId,
      (await composeMessage(given)).message,
    );
    expect(answer.response).toMatch(/^kept in the outbox as message \d+$/);
    const [row] = await q.listOutboxMessages(pool, accountId, 10);
    expect(row).toMatchObject({
      transaction_id: given.tracking.target.transactionId,
      sender: 'orders@shop.example',
      recipients: ['ann@example.com'],
      subject: 'Order A-17 for Ann',
    });
    const parsed = await simpleParser((await q.findOutboxMessage(pool, accountId, row.message_id))!.source);
    expect(parsed.subject).toBe('Order A-17 for Ann');
    expect(parsed.attachments).toHaveLength(2);
    expect(header(parsed, 'list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
  });

  it("the operator lists, reads and empties an account's outbox (/admin/accounts/{id}/outbox); another account's message is not found", async () => {
    const { accountId } = await server.createAccount();
    const other = await server.createAccount();
    expect(server.services.mailer.kind).toBe('outbox');
    const given = input();
    await server.services.mailer.send(
      accountId,
      given.tracking.target.transactionId,
      (await composeMessage(given)).message,
    );
    const list = await server.admin('GET', `/admin/accounts/${accountId}/outbox`);
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([
      {
        message_id: expect.any(String),
        transaction_id: given.tracking.target.transactionId,
        created_at: expect.any(String),
        sender: 'orders@shop.example',
        recipients: ['ann@example.com'],
        subject: 'Order A-17 for Ann',
        size: expect.any(Number),
      },
    ]);
    const id = list.body.items[0].message_id;
    const read = await server.admin('GET', `/admin/accounts/${accountId}/outbox/${id}`);
    expect(read.status).toBe(200);
    expect((await simpleParser(read.body.source)).subject).toBe('Order A-17 for Ann');
    expect(read.body.source.length).toBe(read.body.size);
    expectProblem(await server.admin('GET', `/admin/accounts/${other.accountId}/outbox/${id}`), 404, 'AUD-2103');
    expect((await server.request('GET', `/admin/accounts/${accountId}/outbox`)).status).toBe(401);
    expect((await server.admin('DELETE', `/admin/accounts/${accountId}/outbox`)).body).toEqual({ deleted: 1 });
    expect((await server.admin('GET', `/admin/accounts/${accountId}/outbox`)).body.items).toEqual([]);
  });
});

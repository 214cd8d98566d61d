import fs from 'node:fs/promises';
import { describe, expect, it, inject, vi } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { withTransaction } from '../store/pool.ts';
import {
  EMAIL,
  MANIFEST,
  NS,
  SHOP,
  accountId,
  activity,
  admin,
  body,
  eventsOf,
  mailOf,
  send,
  sendSettled,
  server,
  smtp,
  statusOf,
  token,
  transactionalActivity,
  transactionalServer,
} from '../../test/transactional-http.ts';

// Transactional sends end to end (SPEC §2.15, §4.8; docs/mail.md): activities and transactions
// that do not exist, jobs queued before migration 0018, and sends that are not delivered.

transactionalServer();

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

  it('a 4xx answer is tried again with back-off, and the message sent once the server takes it; the job error leaves out the address the answer names', async () => {
    let refusals = 0;
    smtp.answer = (step, address) =>
      step === 'data' && address === 'busy@example.com' && refusals++ === 0 ? 451 : undefined;
    // The worker hands each job's error to the process's log (here the console's).
    const jobErrors = vi.spyOn(console, 'error');
    try {
      const { id, status } = await sendSettled(body('busy@example.com'));
      expect(status).toBe('sent');
      expect(refusals).toBe(2);
      expect((await mailOf(id)).to).toEqual(['busy@example.com']);
      const logged = jobErrors.mock.calls.map((args) => args.map((a) => String((a as Error)?.message ?? a)).join(' '));
      expect(logged.some((line) => line.includes('451') && line.includes('[address]'))).toBe(true);
      expect(logged.join('\n')).not.toContain('busy@example.com');
    } finally {
      jobErrors.mockRestore();
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

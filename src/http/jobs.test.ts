import { describe, expect, it } from 'vitest';
import { expectProblem } from '../../test/app.ts';
import { enqueue, Worker } from '../jobs/queue.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

/** Runs a job of `kind` that always fails through its five attempts, so that it is kept as failed. */
async function failForGood(kind: string): Promise<void> {
  const worker = new Worker(
    server.services.pool,
    { [kind]: async () => Promise.reject(new Error('the mail server said no')) },
    () => {},
    server.services.metrics,
  );
  for (let attempt = 1; attempt <= 5; attempt++) {
    expect(await worker.runOne([kind])).toBe(true);
    await server.services.pool.query('update jobs set run_at = now() where kind = $1', [kind]);
  }
}

describe('the job queue for the operator', () => {
  it('GET /admin/jobs/figures counts jobs by kind and state; 401 without the operator token', async () => {
    const { accountId, token } = await server.login();
    const kind = `figures-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    await enqueue(server.services.pool, accountId, kind, { n: 2 });
    const res = await server.admin('GET', '/admin/jobs/figures');
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.filter((f: { kind: string }) => f.kind === kind)).toEqual([
      { kind, state: 'waiting', count: 2, overdue_seconds: expect.any(Number) },
    ]);
    expectProblem(await server.request('GET', '/admin/jobs/figures', { token }), 401, 'AUD-8');
  });

  it('POST /admin/accounts/{id}/jobs/{job}/retry runs a failed job again, attempts counted anew; 409 for a job not failed, 404 for none or another account', async () => {
    const { accountId } = await server.login();
    const kind = `retried-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    const waiting = (await server.admin('GET', `/admin/jobs?kind=${kind}`)).body.items[0];
    expectProblem(
      await server.admin('POST', `/admin/accounts/${accountId}/jobs/${waiting.job_id}/retry`),
      409,
      'AUD-1016',
    );
    await failForGood(kind);
    const failed = (await server.admin('GET', `/admin/jobs?kind=${kind}&state=failed`)).body.items[0];
    expect(failed).toMatchObject({ attempts: 5, last_error: 'the mail server said no' });

    const other = await server.login();
    expectProblem(
      await server.admin('POST', `/admin/accounts/${other.accountId}/jobs/${failed.job_id}/retry`),
      404,
      'AUD-1015',
    );
    expectProblem(await server.admin('POST', `/admin/accounts/${accountId}/jobs/999999999/retry`), 404, 'AUD-1015');
    expectProblem(await server.admin('POST', `/admin/accounts/${accountId}/jobs/x/retry`), 400, 'AUD-0');

    const retried = await server.admin('POST', `/admin/accounts/${accountId}/jobs/${failed.job_id}/retry`);
    expect(retried.status, retried.text).toBe(200);
    expect(retried.body).toMatchObject({ job_id: failed.job_id, state: 'waiting', attempts: 0, failed_at: null });
    expect((await server.admin('GET', `/admin/jobs?kind=${kind}&state=waiting`)).body.items).toHaveLength(1);
    // It runs again: a handler that now succeeds takes it, and the queue no longer holds it.
    const worker = new Worker(server.services.pool, { [kind]: async () => {} }, () => {}, server.services.metrics);
    expect(await worker.runOne([kind])).toBe(true);
    expect((await server.admin('GET', `/admin/jobs?kind=${kind}`)).body.items).toEqual([]);
  });
});

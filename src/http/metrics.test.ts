import { describe, expect, it } from 'vitest';
import { TestServer, expectProblem, metric } from '../../test/app.ts';
import { enqueue, Worker, type JobRun } from '../jobs/queue.ts';
import { server, httpServer } from '../../test/http-server.ts';

httpServer();

describe('operations', () => {
  it('GET /healthz and /readyz answer 200 without a token', async () => {
    const health = await server.request('GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ state: 'up' });
    const ready = await server.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ state: 'ready' });
  });

  it('GET /healthz answers 503 AUD-2 saying why once the process cannot serve, without asking the database', async () => {
    let down: string | undefined;
    const own = await TestServer.start({}, { down: () => down });
    try {
      expect((await own.request('GET', '/healthz')).status).toBe(200);
      down = 'its embedded database could not be started again';
      const detail = expectProblem(await own.request('GET', '/healthz'), 503, 'AUD-2');
      expect(detail).toBe('The process cannot serve: its embedded database could not be started again');
      // Readiness still asks the database, which answers.
      expect((await own.request('GET', '/readyz')).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  it('GET /metrics needs its token: METRICS_TOKEN when set, else the operator token; without it 401', async () => {
    expectProblem(await server.request('GET', '/metrics'), 401, 'AUD-8');
    expectProblem(await server.request('GET', '/metrics', { token: (await server.login()).token }), 401, 'AUD-8');
    expect((await server.request('GET', '/metrics', { token: server.services.adminToken })).status).toBe(200);
    const own = await TestServer.start({ METRICS_TOKEN: 'scraper-token' });
    try {
      expect((await own.request('GET', '/metrics', { token: 'scraper-token' })).status).toBe(200);
      expectProblem(await own.request('GET', '/metrics', { token: own.services.adminToken }), 401, 'AUD-8');
    } finally {
      await own.close();
    }
  });

  it('GET /metrics answers Prometheus text with http_request_duration_seconds', async () => {
    await server.request('GET', '/healthz');
    const res = await server.request('GET', '/metrics', { token: server.services.metricsToken });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toContain('# TYPE http_request_duration_seconds histogram');
    expect(res.text).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/healthz"[^}]*\} \d+/);
  });

  it('GET /metrics shows the use of the database pool', async () => {
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'total' })).toBeGreaterThan(0);
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'waiting' })).toBe(0);
  });

  it('GET /metrics and GET /admin/jobs show waiting jobs by kind, with how long the one due longest ago has waited, read from the database', async () => {
    const { accountId } = await server.createAccount();
    const kind = `waits-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    await enqueue(server.services.pool, accountId, kind, { n: 2 });
    await server.services.pool.query(
      `update jobs set created_at = now() - interval '90 seconds', run_at = now() - interval '90 seconds' where kind = $1 and payload->>'n' = '1'`,
      [kind],
    );
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_jobs', { kind, state: 'waiting' })).toBe(2);
    expect(metric(text, 'audience_jobs', { kind, state: 'failed' })).toBe(0);
    expect(metric(text, 'audience_jobs_oldest_waiting_seconds', { kind })).toBeGreaterThanOrEqual(90);
    const listed = await server.admin('GET', `/admin/jobs?state=waiting&kind=${kind}`);
    expect(listed.status, listed.text).toBe(200);
    expect(
      listed.body.items.map((j: { payload: unknown; state: string; attempts: number }) => [
        j.payload,
        j.state,
        j.attempts,
      ]),
    ).toEqual([
      [{ n: 1 }, 'waiting', 0],
      [{ n: 2 }, 'waiting', 0],
    ]);
  });

  it('a job that fails its last attempt is kept as failed: GET /admin/jobs?state=failed lists it, /metrics counts it and its runs, each run is reported for the log', async () => {
    const { accountId } = await server.createAccount();
    const kind = `always-fails-${accountId}`;
    await enqueue(server.services.pool, accountId, kind, { n: 1 });
    const runs: JobRun[] = [];
    const worker = new Worker(
      server.services.pool,
      { [kind]: async () => Promise.reject(new Error('the mail server said no')) },
      () => {},
      server.services.metrics,
      {},
      (run) => runs.push(run),
    );
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect(await worker.runOne()).toBe(true);
      // The wait before the next attempt, skipped.
      await server.services.pool.query('update jobs set run_at = now() where kind = $1', [kind]);
    }
    // No sixth attempt.
    expect(await worker.runOne()).toBe(false);
    // What the worker thread logs: each run's start, then its failure, the last one for good.
    expect(runs.map((r) => `${r.attempt} ${r.outcome}`)).toEqual([
      ...[1, 2, 3, 4].flatMap((n) => [`${n} started`, `${n} failed`]),
      '5 started',
      '5 failed for good',
    ]);
    expect(runs.at(-1)).toMatchObject({ kind, account: accountId, seconds: expect.any(Number) });
    const failed = await server.admin('GET', '/admin/jobs?state=failed');
    expect(failed.status, failed.text).toBe(200);
    expect(failed.body.items.filter((j: { kind: string }) => j.kind === kind)).toEqual([
      {
        account_id: accountId,
        job_id: expect.stringMatching(/^\d+$/),
        kind,
        state: 'failed',
        payload: { n: 1 },
        attempts: 5,
        last_error: 'the mail server said no',
        created_at: expect.any(String),
        run_at: expect.any(String),
        failed_at: expect.any(String),
      },
    ]);
    expect((await server.admin('GET', `/admin/jobs?state=waiting&kind=${kind}`)).body.items).toEqual([]);
    const text = (await server.request('GET', '/metrics', { token: server.services.metricsToken })).text;
    expect(metric(text, 'audience_jobs', { kind, state: 'failed' })).toBe(1);
    expect(metric(text, 'audience_jobs', { kind, state: 'waiting' })).toBe(0);
    expect(metric(text, 'audience_job_duration_seconds_count', { kind, outcome: 'failed' })).toBe(5);
    expectProblem(await server.admin('GET', '/admin/jobs?state=lost'), 400);
  });
});

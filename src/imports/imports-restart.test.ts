import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWhen, STATE_BOUND_MS } from '../../test/until.ts';
import { metric, startWorkerProcess, stopProcess, TestServer } from '../../test/app.ts';
import { freePort } from '../store/embedded.ts';
import {
  type Account,
  CH_EMAIL,
  EMAIL,
  MANIFEST,
  MB,
  NO_LIMITS,
  S,
  VIP,
  WEEKLY,
  account,
  attr,
  created,
  db,
  expectCountsAddUp,
  finished,
  importsServer,
  jobsEnded,
  server,
  status,
  upload,
  v2,
} from '../../test/imports-http.ts';

/** An import whose worker is killed in the middle resumes without losing or repeating a row. */

importsServer();

describe('a worker killed in the middle of an import', () => {
  const ROWS = 40_000;
  const BAD_EVERY = 5000;
  let api: TestServer;
  const children: ChildProcess[] = [];
  const output: string[] = [];

  beforeAll(async () => {
    // The worker of this test is a process of its own; the in-process one must not take the job.
    await server.worker?.stop();
    server.worker = undefined;
    api = await TestServer.start();
  });
  afterAll(async () => {
    for (const child of children) await stopProcess(child, 'SIGKILL');
    await api?.close();
  });

  async function startWorker(port: number): Promise<ChildProcess> {
    const child = await startWorkerProcess(api.services.config.dataDir, port, output);
    children.push(child);
    return child;
  }

  /** The import's state, and the rows it has found (read, in committed batches) so far. */
  async function progress(
    a: Account,
    importId: string,
  ): Promise<{ status: string; found: number; lanes: number[] | null }> {
    const { rows } = await db.query(
      'select status, profiles_found as found, lanes_done as lanes from imports where account_id = $1 and import_id = $2',
      [a.accountId, importId],
    );
    return rows[0];
  }

  it(
    'IMP-09 IMP-10 finishes the import after a restart without duplicating or losing a row (kill the process, start it again)',
    { timeout: 100_000 },
    async () => {
      const a = await account(MANIFEST, NO_LIMITS, api);
      const c = await created(
        a,
        2,
        v2(EMAIL, 'email', {
          attribute_mappings: [attr('first', a.v.firstname), attr('points', a.v.points)],
          tag_mappings: [{ tag_discriminator: VIP }],
          consent_mappings: [
            {
              consents: [
                {
                  field_selector: 'news',
                  topic_discriminator: WEEKLY,
                  channel_discriminator: CH_EMAIL,
                  type: 'opt-in',
                },
              ],
            },
          ],
        }),
        api,
      );
      const lines = ['email;first;points;news'];
      for (let i = 1; i <= ROWS; i++)
        lines.push(i % BAD_EVERY === 0 ? `broken-${i};Bad;1;1` : `p${i}@crash.io;"Person ${i}";"${i},5";1`);
      const csv = lines.join('\r\n') + '\r\n';
      expect(csv.length).toBeGreaterThan(1 * MB);
      const up = await upload(c, csv, { on: api });
      expect(up.status, up.text).toBe(204);
      // IMP-10: without a worker the import waits in the queue.
      expect((await status(a, c.import_id, S, api)).body.result.status).toBe('queued');
      expect(
        (await db.query(`select kind, payload from jobs where account_id = $1 and kind = 'import'`, [a.accountId]))
          .rows,
      ).toEqual([{ kind: 'import', payload: { import_id: c.import_id } }]);

      const first = await startWorker(await freePort());
      await readWhen(
        'the first batches written',
        () => progress(a, c.import_id),
        (seen) => seen.found > 0,
        STATE_BOUND_MS,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; the worker's output: ${output.join('')}`);
      });
      await stopProcess(first, 'SIGKILL');
      const atKill = await progress(a, c.import_id);
      // Killed in the middle: some batches committed, not all. The file's one keyspace gives two lanes.
      expect(atKill.found).toBeGreaterThan(0);
      expect(atKill.found).toBeLessThan(ROWS);
      expect(atKill.lanes).toHaveLength(2);
      expect(atKill.status).toBe('in_progress');
      const mid = (await status(a, c.import_id, S, api)).body;
      expect(mid.result.status).toBe('in_progress');
      expect(mid.result.profiles_found).toBe(atKill.found);

      const secondPort = await freePort();
      const second = await startWorker(secondPort);
      const done = await finished(a, c.import_id, api, 1200);
      expect(done.result.status, output.join('')).toBe('completed');
      // The worker process serves the counters of its worker thread: the rows it committed, after
      // the first one's, and the job's run.
      await jobsEnded(a);
      const metrics = await (
        await fetch(`http://127.0.0.1:${secondPort}/metrics`, { headers: { authorization: 'Bearer worker-metrics' } })
      ).text();
      expect(metric(metrics, 'audience_import_rows_total')).toBe(ROWS - atKill.found);
      expect(metric(metrics, 'audience_job_duration_seconds_count', { kind: 'import', outcome: 'completed' })).toBe(1);
      expect(metric(metrics, 'audience_db_pool_connections', { pool: 'worker', state: 'total' })).toBeGreaterThan(0);
      await stopProcess(second, 'SIGTERM');

      const bad = ROWS / BAD_EVERY;
      const good = ROWS - bad;
      expect(done.result).toEqual({
        status: 'completed',
        profiles_found: ROWS,
        profiles_processed: good,
        profiles_failed: bad,
      });
      expect(done.report).toMatchObject({
        profiles_new: good,
        profiles_updated: 0,
        profiles_not_changed: 0,
        profiles_failed: bad,
      });
      expect(done.report.failures.map((f: { line: number }) => f.line)).toEqual(
        Array.from({ length: bad }, (_, i) => (i + 1) * BAD_EVERY + 1),
      );
      expectCountsAddUp(done);

      const one = async (sql: string, params: unknown[] = [a.accountId]) => (await db.query(sql, params)).rows[0];
      // Every key of the file exists exactly once.
      const keys = await one(
        `select count(*)::int as n, count(distinct profile_key)::int as d from profile_identifiers i join keyspaces k using (account_id, keyspace_id)
      where i.account_id = $1 and k.discriminator = $2`,
        [a.accountId, EMAIL],
      );
      expect(keys).toEqual({ n: good, d: good });
      expect(await one('select count(*)::int as n from profiles where account_id = $1')).toEqual({ n: good });
      // No row was applied twice: first values replace none, so no attribute history; one consent change per consent.
      expect(await one('select count(*)::int as n from attribute_history where account_id = $1')).toEqual({ n: 0 });
      expect(
        await one(
          'select count(*)::int as n from profile_sections where account_id = $1 and attribute_set_at ?& $2::text[]',
          [a.accountId, [a.v.firstname, a.v.points, a.v.email]],
        ),
      ).toEqual({ n: good });
      expect(
        await one(
          'select count(*)::int as n, count(distinct profile_id)::int as d from consent_history where account_id = $1',
        ),
      ).toEqual({ n: good, d: good });
      expect(await one('select count(*)::int as n from consents where account_id = $1')).toEqual({ n: good });
      expect(await one('select count(*)::int as n from import_failures where account_id = $1')).toEqual({ n: bad });
      expect(await one(`select count(*)::int as n from jobs where account_id = $1 and kind = 'import'`)).toEqual({
        n: 0,
      });
      // Spot checks of values at both ends of the file.
      expect(
        (
          await api.request('GET', `/audience/keyspaces/${EMAIL}/profiles/p1@crash.io/sections/${S}/attributes`, {
            token: a.token,
          })
        ).body,
      ).toMatchObject({ [a.v.firstname]: 'Person 1', [a.v.points]: 1.5 });
      expect(
        (
          await api.request(
            'GET',
            `/audience/keyspaces/${EMAIL}/profiles/p${ROWS - 1}@crash.io/sections/${S}/attributes`,
            { token: a.token },
          )
        ).body,
      ).toMatchObject({ [a.v.points]: ROWS - 1 + 0.5 });
      expect(
        (
          await api.request('GET', `/audience/keyspaces/${EMAIL}/profiles/p${ROWS - 1}@crash.io/sections/${S}/tags`, {
            token: a.token,
          })
        ).body[VIP],
      ).toBe(true);
    },
  );
});

import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS } from '../jobs/queue.ts';
import { startWorker as startInProcessWorker } from '../worker/worker.ts';
import {
  type Created,
  EMAIL,
  MANIFEST,
  NO_LIMITS,
  account,
  attr,
  attributesOf,
  create,
  created,
  db,
  expectProblem,
  finished,
  importsServer,
  jobsEnded,
  runImport,
  server,
  sleep,
  status,
  storedFiles,
  upload,
  v2,
} from '../../test/imports-http.ts';
import { STATE_BOUND_MS, readWhen } from '../../test/until.ts';

/** Bad input to an import: bytes PostgreSQL cannot store, a file its import never took, a job that keeps failing. */

importsServer();

describe('bad bytes in a file and a job that keeps failing', () => {
  it('IMP-09 a NUL byte in a cell fails that row, naming its column; the other rows are written and the import completes at once', async () => {
    const a = await account(MANIFEST, NO_LIMITS);
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    const csv = 'email;first\nann@x.io;An\u0000n\nbo\u0000@x.io;Bo\ncat@x.io;Cat\n';
    const done = await runImport(a, 2, body, csv);
    expect(done.result).toMatchObject({
      status: 'completed',
      profiles_found: 3,
      profiles_processed: 1,
      profiles_failed: 2,
    });
    expect(done.report.failures).toEqual([
      { line: 2, reason: expect.stringMatching(/column "first".*NUL/) },
      { line: 3, reason: expect.stringMatching(/column "email".*NUL/) },
    ]);
    expect((await attributesOf(a, EMAIL, 'cat@x.io')).body[a.v.firstname]).toBe('Cat');
    expectProblem(await attributesOf(a, EMAIL, 'ann@x.io'), 404);
    // A NUL in a header name that the import does not read is no fault.
    const other = await runImport(a, 2, body, 'email;first;no\u0000te\ndan@x.io;Dan;x\n');
    expect(other.result).toMatchObject({ status: 'completed', profiles_processed: 1 });
    await jobsEnded(a);
    expect(await storedFiles(a.accountId)).toEqual([]);
    // A JSON cell whose text PostgreSQL cannot store, in a key or a value: its row fails, not its batch.
    const s = await account(
      {
        sections: [{ ...MANIFEST.sections![0], attributes: [{ name: 'Address', versions: [{ type: ['Struct'] }] }] }],
      },
      NO_LIMITS,
    );
    const json = await runImport(
      s,
      2,
      v2(EMAIL, 'email', { attribute_mappings: [attr('address', s.v.address)] }),
      'email;address\nann@x.io;"{""city"":""Oslo\\u0000""}"\nbo@x.io;"{""\\ud800"":1}"\ncat@x.io;"{""city"":""Bergen""}"\n',
    );
    expect(json.result).toMatchObject({ status: 'completed', profiles_processed: 1, profiles_failed: 2 });
    expect(json.report.failures.map((f: { reason: string }) => f.reason)).toEqual([
      expect.stringMatching(/column "address".*NUL/),
      expect.stringMatching(/column "address".*surrogate/),
    ]);
  });

  it('IMP-10 a file stored for an import that never took it (its process killed between the two) is removed once the upload window is long closed', async () => {
    const a = await account(MANIFEST, NO_LIMITS);
    const c = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    // What a process killed after storing the upload and before recording it leaves behind.
    await server.services.files.put(c.file_upload_body.key, Readable.from(['email;first\nann@x.io;Ann\n']));
    expect(await storedFiles(a.accountId)).toHaveLength(1);
    expect((await status(a, c.import_id)).body.result.status).toBe('waiting_for_file');
    // The window's job is due an hour after the window closes: brought forward here.
    const { rowCount } = await db.query(
      `update jobs set run_at = now() where account_id = $1 and kind = 'import-upload-window' and payload->>'import_id' = $2`,
      [a.accountId, c.import_id],
    );
    expect(rowCount).toBe(1);
    for (let i = 0; (await storedFiles(a.accountId)).length > 0; i++) {
      expect(i, 'the file stays').toBeLessThan(200);
      await sleep(50);
    }
    // An import that took its file keeps it until its job has read it; the window's job leaves it alone.
    const d = await created(a, 2, v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] }));
    await server.worker!.stop();
    try {
      expect((await upload(d, 'email;first\nbo@x.io;Bo\n')).status).toBe(204);
      await db.query(
        `update jobs set run_at = now() where account_id = $1 and kind = 'import-upload-window' and payload->>'import_id' = $2`,
        [a.accountId, d.import_id],
      );
      await server.worker!.runOne(['import-upload-window']);
      expect(await storedFiles(a.accountId)).toHaveLength(1);
    } finally {
      server.worker = await startInProcessWorker(server.services, () => {});
    }
    expect((await finished(a, d.import_id)).result.status).toBe('completed');
  });

  it('IMP-10 a job that fails its last attempt ends its import as failed, frees its pending place and removes its file', async () => {
    const a = await account(MANIFEST, { ...NO_LIMITS, pending_imports: 1 });
    const body = v2(EMAIL, 'email', { attribute_mappings: [attr('first', a.v.firstname)] });
    await server.worker!.stop();
    let c: Created;
    try {
      c = await created(a, 2, body);
      expect((await upload(c, 'email;first\nann@x.io;Ann\n')).status).toBe(204);
      expect(await storedFiles(a.accountId)).toHaveLength(1);
      // The job fails on every run: its import's request no longer makes sense to the worker.
      await db.query(`update imports set version = 1, request = '{}' where account_id = $1 and import_id = $2`, [
        a.accountId,
        c.import_id,
      ]);
      // Its earlier attempts are spent (each waits twice the one before: 30 s in all).
      await db.query(`update jobs set attempts = $2 - 1 where account_id = $1 and kind = 'import'`, [
        a.accountId,
        MAX_ATTEMPTS,
      ]);
      expectProblem(await create(a, 2, body), 429);
    } finally {
      server.worker = await startInProcessWorker(server.services, () => {});
    }
    const done = await finished(a, c.import_id);
    expect(done.result.status).toBe('error');
    expect(done.result.message).toMatch(/attempts/);
    // The worker removes the file after it records the import's end.
    const files = await readWhen(
      'the file removed',
      () => storedFiles(a.accountId),
      (fs) => fs.length === 0,
      STATE_BOUND_MS,
    );
    expect(files).toEqual([]);
    // The queue marks the job failed once its handler has thrown, after the file's removal.
    const rows = await readWhen(
      'the import job failed',
      async () =>
        (
          await db.query(`select failed_at is not null as failed from jobs where account_id = $1 and kind = 'import'`, [
            a.accountId,
          ])
        ).rows,
      (rs) => rs.length === 1 && rs[0].failed,
      STATE_BOUND_MS,
    );
    expect(rows).toEqual([{ failed: true }]);
    // Its pending place is free.
    expect((await create(a, 2, body)).status).toBe(201);
  });
});

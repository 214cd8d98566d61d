import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testDatabase } from '../../test/app.ts';
import { readConfig } from '../config.ts';
import { freePort } from '../store/embedded.ts';
import { startWorkerThread } from './thread.ts';

// The thread at work (an import through `audience worker`, killed and started again) is tested in
// src/imports/imports.test.ts; these are its start and stop.
describe('the worker thread', () => {
  const dirs: string[] = [];
  const secrets = { adminToken: 'thread-test-admin', serverSecret: 'thread-test-secret' };
  const configIn = async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-thread-'));
    dirs.push(dir);
    return readConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' });
  };
  afterAll(async () => {
    for (const dir of dirs) await fs.rm(dir, { recursive: true, force: true });
  });

  it('starts against the database, and stop() ends it', async () => {
    const logged: string[] = [];
    const thread = await startWorkerThread(
      { config: await configIn(), databaseUrl: await testDatabase(), secrets },
      (msg) => logged.push(msg),
    );
    await thread.stop();
    expect(logged).toEqual([]);
  });

  it('starts a thread that ended again, a second later, until it is stopped', async () => {
    const logged: string[] = [];
    const entry = new URL('../../test/fixtures/short-lived-thread.ts', import.meta.url);
    const thread = await startWorkerThread(
      { config: await configIn(), databaseUrl: 'unused', secrets },
      (msg) => logged.push(msg),
      entry,
    );
    const ended = () => logged.filter((m) => m === 'worker thread ended (exit code 3); starting it again').length;
    while (ended() < 3) await new Promise((r) => setTimeout(r, 50));
    await thread.stop();
    const after = ended();
    await new Promise((r) => setTimeout(r, 2500));
    // Stopped: no thread ends or starts any more.
    expect(ended()).toBe(after);
    expect(logged.every((m) => m.startsWith('worker thread ended (exit code 3)'))).toBe(true);
  });

  it('refuses to start when its database cannot be reached, with the reason', async () => {
    const databaseUrl = `postgres://nobody:nothing@127.0.0.1:${await freePort()}/none`;
    await expect(startWorkerThread({ config: await configIn(), databaseUrl, secrets }, () => {})).rejects.toThrow(
      /ECONNREFUSED/,
    );
  });
});

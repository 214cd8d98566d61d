import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { freePort } from '../src/store/embedded.ts';
import { metric, stopProcess } from './app.ts';
import { scratchFolder } from './scratch.ts';
import { NODE, Program, ROOT, dataDir, program, run, serveProgram, tokenFor } from './serve-program.ts';

serveProgram();

/** POSTs a JSON body with node:http through `agent`: the answer's status and Connection header, and whether the connection was one used before. */
function httpPost(
  url: string,
  token: string,
  body: string,
  agent: http.Agent,
): Promise<{ status?: number; connection?: string; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode, connection: res.headers.connection, reused: req.reusedSocket }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('audience serve (npm start)', () => {
  it('creates the demo account on first start, saves its credentials with mode 0600, and serves them a token and the definitions', async () => {
    const file = path.join(dataDir, 'demo-credentials.json');
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    const demo = JSON.parse(await fs.readFile(file, 'utf8'));
    // The log names the file; the secret stays in it.
    expect(program.output).not.toContain(demo.client_secret);
    expect(program.logLines().find((l) => l.msg.startsWith('demo account created'))).toMatchObject({
      account: demo.account_id,
      file,
    });
    const token = await tokenFor(program, demo.client_id, demo.client_secret);
    expect(token.status).toBe(200);
    const { access_token } = (await token.json()) as { access_token: string };
    const sections = await fetch(program.url('/audience/sections'), {
      headers: { authorization: `Bearer ${access_token}` },
    });
    const body = (await sections.json()) as any;
    expect(body.items.map((s: { name: string }) => s.name)).toEqual(['Shop', 'Magazine']);
    const segments = (await (
      await fetch(program.url('/audience/segments'), { headers: { authorization: `Bearer ${access_token}` } })
    ).json()) as any;
    expect(segments.items[0].versions[0].query).toMatch(/^section\(\d+\)\.attribute\(\d+\)\.gt\(100\)$/);
    // The emulator's control API is absent from serve (docs/emulator.md).
    expect((await fetch(program.url('/_emulator/reset'), { method: 'POST' })).status).toBe(404);
    // The launcher (what `npm start` runs) replaces itself with the program, with glibc's malloc arenas bounded.
    const environ = (await fs.readFile(`/proc/${program.child.pid}/environ`, 'utf8')).split('\0');
    expect(environ).toContain(`MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? 2}`);
  });

  it('preloads jemalloc where it is installed, into its own process alone, unless AUDIENCE_JEMALLOC=0', async () => {
    const jemalloc = `/usr/lib/${os.machine()}-linux-gnu/libjemalloc.so.2`;
    const installed = await fs.access(jemalloc).then(
      () => true,
      () => false,
    );
    const mapped = async (pid: number) => (await fs.readFile(`/proc/${pid}/maps`, 'utf8')).includes(jemalloc);
    expect(await mapped(program.child.pid!)).toBe(installed);
    // The embedded PostgreSQL keeps its own malloc.
    const postmaster = Number(
      (await fs.readFile(path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid'), 'utf8')).split('\n')[0],
    );
    expect(await mapped(postmaster)).toBe(false);
    expect((await fs.readFile(`/proc/${postmaster}/environ`, 'utf8')).split('\0')).not.toContain(
      `LD_PRELOAD=${jemalloc}`,
    );
    // The switch, seen in a command that waits for an answer from a server that never gives one.
    const silent = http.createServer();
    const asked = new Promise<void>((resolve) => silent.once('request', () => resolve()));
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const cli = spawn(path.join(ROOT, 'bin', 'audience'), ['account', 'list'], {
      env: {
        ...program.env,
        AUDIENCE_JEMALLOC: '0',
        AUDIENCE_URL: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
      },
      stdio: 'ignore',
    });
    try {
      await asked;
      expect(await mapped(cli.pid!)).toBe(false);
    } finally {
      cli.kill('SIGKILL');
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('logs where its database, files and secrets are, never a secret, and requests without profile keys or credentials', async () => {
    const messages = program.logLines().map((l) => l.msg);
    const started = program.logLines().find((l) => l.msg === 'starting');
    expect(started).toMatchObject({
      roles: ['api', 'worker'],
      database: `embedded, in ${path.join(dataDir, 'postgres')}`,
      files: path.join(dataDir, 'files'),
      adminToken: path.join(dataDir, 'admin-token'),
      serverSecret: path.join(dataDir, 'server-secret'),
      region: 'eu',
      vendor: 'vendor',
    });
    // First "starting", then what the start did: the demo account (the line names its file), listening.
    const demoLine = messages.findIndex((m) => m.startsWith('demo account created'));
    expect(messages.indexOf('starting')).toBeLessThan(demoLine);
    // Where the HTTP interface is described, and the console.
    const base = `http://localhost:${program.port}`;
    expect(program.logLines().find((l) => l.msg.startsWith('listening'))).toMatchObject({
      docs: `${base}/docs`,
      console: `${base}/console`,
      msg: `listening: the HTTP interface is described at ${base}/docs, the console is at ${base}/console`,
    });
    const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    expect(program.output).not.toContain(adminToken);

    const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
    const { access_token } = (await (await tokenFor(program, demo.client_id, demo.client_secret)).json()) as {
      access_token: string;
    };
    const headers = { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' };
    const keyspace = 'com.vendor1.keyspaces.email';
    const section = 'com.vendor1.sections.user-created.shop';
    const created = await fetch(program.url(`/audience/keyspaces/${keyspace}/sections/${section}/profiles`), {
      method: 'POST',
      headers,
      body: JSON.stringify({ profile_key: 'ann.logged@example.com' }),
    });
    expect(created.status).toBe(201);
    const read = await fetch(
      program.url(`/audience/keyspaces/${keyspace}/profiles/ann.logged@example.com/sections/${section}/attributes`),
      { headers },
    );
    expect(read.status).toBe(200);
    // The request was logged, by its route, with the key left out.
    const route =
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/attributes';
    const lines = (await program.logLinesWith((l) => l.req?.route === route && l.msg === 'request completed')).filter(
      (l) => l.req?.route === route,
    );
    expect(lines.map((l) => l.req.url)).toEqual([
      `/audience/keyspaces/${keyspace}/profiles/[redacted]/sections/${section}/attributes`,
    ]);
    expect(program.output).not.toContain('ann.logged');
    expect(program.output).not.toContain(access_token);
    expect(program.output).not.toContain(demo.client_secret);
  });

  it('serves on /metrics, behind the operator token by default, the counters of its worker thread with its own', async () => {
    expect((await fetch(program.url('/metrics'))).status).toBe(401);
    const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    const text = await (
      await fetch(program.url('/metrics'), { headers: { authorization: `Bearer ${adminToken}` } })
    ).text();
    expect(metric(text, 'audience_db_pool_connections', { pool: 'worker', state: 'total' })).toBeGreaterThan(0);
    expect(metric(text, 'audience_db_pool_connections', { pool: 'main', state: 'total' })).toBeGreaterThan(0);
    expect(text).toContain('# TYPE audience_job_duration_seconds histogram');
    // The process's own metrics stay, the start time among them.
    expect(metric(text, 'process_start_time_seconds')).toBeGreaterThan(0);
  });

  it('drives the operator API from the command line: account, key, manifest, signing key', async () => {
    const account = await program.cli('account', 'create', '--name', 'Shop two', '--region', 'eu');
    expect(account).toMatchObject({ name: 'Shop two', region: 'eu' });
    const manifest = path.join(dataDir, 'manifest.json');
    await fs.writeFile(
      manifest,
      JSON.stringify({ sections: [{ name: 'Outlet', tags: [{ name: 'Bargain hunter' }] }] }),
    );
    const applied = await program.cli('apply', manifest, '--account', account.id);
    expect(applied.account.id).toBe(account.id);
    // Applying twice changes nothing.
    await program.cli('apply', manifest, '--account', account.id);
    const key = await program.cli('key', 'create', '--account', account.id, '--name', 'ci');
    const token = await tokenFor(program, key.client_id, key.client_secret);
    const { access_token } = (await token.json()) as { access_token: string };
    const tags = (await (
      await fetch(program.url('/audience/sections/com.vendor1.sections.user-created.outlet/tags'), {
        headers: { authorization: `Bearer ${access_token}` },
      })
    ).json()) as any;
    expect(tags.items).toEqual([
      { discriminator: 'com.vendor1.tags.user-created.bargain-hunter', name: 'Bargain hunter', id: expect.any(String) },
    ]);
    expect(await program.cli('job', 'list', '--state', 'failed')).toEqual({ items: [] });
    // Mail kept in the outbox (SMTP_URL is unset): none yet for the new account, and an unknown message is an error naming it.
    expect(await program.cli('outbox', 'list', '--account', account.id)).toEqual({ items: [] });
    const none = await program.exec(['outbox', 'show', '--account', account.id, '--message', '999']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('holds no message 999');
    const rotated = await program.cli('signing-key', 'rotate');
    expect(rotated.kid).toEqual(expect.any(String));
    const again = await fetch(program.url('/audience/sections'), {
      headers: { authorization: `Bearer ${access_token}` },
    });
    expect(again.status).toBe(200);
    await program.cli('key', 'delete', '--account', account.id, '--client-id', key.client_id);
    expect((await tokenFor(program, key.client_id, key.client_secret)).status).toBe(401);
  });

  // Each start of the program costs seconds of CPU (Node, then PostgreSQL and its recovery after a
  // kill): the stops and starts below are shared by what they show, in this order.
  it('has written the line of every request it answered when it exits on SIGTERM, though its log is buffered, and stops its database', async () => {
    const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
    const { access_token } = (await (await tokenFor(program, demo.client_id, demo.client_secret)).json()) as {
      access_token: string;
    };
    // Past the demo account's 100 requests a second, a 429 would end the clients before the stop.
    await program.cli('account', 'update', '--account', demo.account_id, '--limit', 'requests_per_second=null');
    const sectionLines = () =>
      program.logLines().filter((l) => l.msg === 'request completed' && l.req.url === '/audience/sections');
    const before = sectionLines().length;
    // Requests keep coming while the program stops: each one answered has its line.
    let answered = 0;
    let stopping: Promise<number | null> | undefined;
    const closed = new Promise((resolve) => program.child.once('close', resolve));
    const client = async () => {
      for (;;) {
        const res = await fetch(program.url('/audience/sections'), {
          headers: { authorization: `Bearer ${access_token}` },
        }).catch(() => undefined);
        if (res?.status !== 200) return;
        await res.arrayBuffer();
        if (++answered === 200) stopping = program.stop('SIGTERM');
      }
    };
    await Promise.all(Array.from({ length: 8 }, client));
    expect(await stopping).toBe(0);
    await closed;
    expect(answered).toBeGreaterThanOrEqual(200);
    expect(
      sectionLines()
        .slice(before)
        .filter((l) => l.res.statusCode === 200),
    ).toHaveLength(answered);
    // Drained: its database stopped with it.
    await expect(fs.stat(path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid'))).rejects.toThrow();
  });

  it("names at start a VENDOR other than the accounts' word", async () => {
    program.settings = { VENDOR: 'acme' };
    try {
      await program.start();
      expect(program.logLines().find((l) => l.level === 40 && l.vendor === 'acme')).toMatchObject({
        accountsVendor: 'vendor',
        msg: expect.stringContaining('VENDOR is "acme" but the accounts were made with "vendor"'),
      });
      expect(await program.stop('SIGTERM')).toBe(0);
    } finally {
      program.settings = {};
    }
    await program.start();
    expect(program.logLines().filter((l) => l.level === 40)).toEqual([]);
  });

  describe('killed (SIGKILL) during an upload, after an account delete that died before its files', () => {
    const gone = ['exports/987654321/job.csv.gz', 'imports/987654321/upload.csv', 'imports/987654321/deep/part.csv'];
    const kept = () => [`exports/${demo.account_id}/kept.csv.gz`, 'exports/0987654321/kept.csv', 'exports/kept.csv'];
    const files = () => path.join(dataDir, 'files');
    const there = (key: string) =>
      fs.access(path.join(files(), key)).then(
        () => true,
        () => false,
      );
    let demo: { account_id: string; client_id: string; client_secret: string };
    let token: string;
    let section: string;
    let importId: string;
    let before: { items: { id: string }[] };
    let created: { id: string };
    let partial: string;
    const get = async (p: string): Promise<any> =>
      (await fetch(program.url(p), { headers: { authorization: `Bearer ${token}` } })).json();
    const partials = async () =>
      (await fs.readdir(path.join(files(), 'imports', demo.account_id)).catch(() => [] as string[])).filter((n) =>
        n.endsWith('.partial'),
      );

    // One kill and one start for the three checks below.
    beforeAll(async () => {
      demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
      ({ access_token: token } = (await (await tokenFor(program, demo.client_id, demo.client_secret)).json()) as {
        access_token: string;
      });
      before = await program.cli('account', 'list');
      created = await program.cli('account', 'create', '--name', 'Written before the kill');
      section = (await get('/audience/sections')).items[0].discriminator;
      const attribute = (await get(`/audience/sections/${section}/attributes`)).items.find(
        (a: { discriminator: string }) => a.discriminator.endsWith('.attributes.firstname'),
      );
      const form: any = await (
        await fetch(program.url(`/v2/audience/sections/${section}/imports`), {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            keyspace_mapping: {
              keyspace_discriminator: attribute.discriminator.replace(/attributes\.firstname$/, 'keyspaces.email'),
              field_selector: 'email',
            },
            attribute_mappings: [{ field_selector: 'first', attribute_version_id: attribute.versions[0].id }],
          }),
        })
      ).json();
      expect(form.import_id, JSON.stringify(form)).toEqual(expect.any(String));
      importId = form.import_id;
      // The form's fields, then the file part, sent slowly and never finished.
      const boundary = 'audience-kill-test';
      const fields = Object.entries(form.file_upload_body as Record<string, string>)
        .map(([k, v]) => `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
        .join('');
      const upload = http.request(program.url(new URL(form.file_upload_url).pathname), {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' },
      });
      upload.on('error', () => {});
      upload.write(
        `${fields}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="people.csv"\r\ncontent-type: text/csv\r\n\r\nemail;first\n`,
      );
      // Rows until the partial file is there (a state, not a time: each row is one more write).
      for (let i = 0; (await partials()).length === 0; i++) {
        expect(i, 'no partial file appeared').toBeLessThan(2000);
        upload.write(`person${i}@example.com;${'x'.repeat(1000)}\n`);
        await new Promise((r) => setTimeout(r, 50));
      }
      [partial] = await partials();
      await program.stop('SIGKILL');
      upload.destroy();
      // What a delete leaves when its process dies after its transaction: files of an account no row names.
      for (const key of [...gone, ...kept()]) {
        await fs.mkdir(path.dirname(path.join(files(), key)), { recursive: true });
        await fs.writeFile(path.join(files(), key), 'personal data', { mode: 0o600 });
      }
      expect(await partials()).toEqual([partial]);
      expect((await fs.stat(path.join(files(), 'imports', demo.account_id, partial))).mode & 0o777).toBe(0o600);
      await program.start();
    });
    afterAll(async () => {
      for (const key of kept()) await fs.rm(path.join(files(), key), { force: true });
    });

    it('keeps every account after the kill, and makes no second demo account', async () => {
      const after = await program.cli('account', 'list');
      expect(after.items.map((a: { id: string }) => a.id)).toEqual([...before.items.map((a) => a.id), created.id]);
      expect(after.items.filter((a: { name: string }) => a.name === 'Demo')).toHaveLength(1);
    });

    it('leaves a partial file (mode 0600) of the upload, which the next start removes; the import still waits for its file', async () => {
      expect(await partials()).toEqual([]);
      expect(program.logLines().find((l) => l.msg.startsWith('removed the partial files'))).toMatchObject({
        files: 1,
      });
      expect((await get(`/audience/sections/${section}/imports/${importId}`)).result.status).toBe('waiting_for_file');
    });

    it("removes at the next start the files of an account whose delete died before them, and no live account's", async () => {
      for (const key of gone) expect(await there(key), key).toBe(false);
      expect(await there('exports/987654321')).toBe(false);
      for (const key of kept()) expect(await there(key), key).toBe(true);
      expect(program.logLines().find((l) => l.msg === 'removed the files of deleted accounts')).toMatchObject({
        folders: 2,
      });
    });
  });

  it('answers a body far over the limit with its 413 every time, the connection not reset before the client reads it', async () => {
    const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
    const { access_token } = (await (await tokenFor(program, demo.client_id, demo.client_secret)).json()) as {
      access_token: string;
    };
    const tags = program.url('/audience/sections/com.vendor1.sections.user-created.shop/tags');
    // The answer keeps the connection, which serves the next request once the rest of the body is
    // read: closed while the client still sent the body, the connection was reset under it.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    onTestFinished(() => agent.destroy());
    const refused = await httpPost(tags, access_token, JSON.stringify({ name: 'x'.repeat(900 * 1024) }), agent);
    expect(refused).toMatchObject({ status: 413, reused: false });
    expect(refused.connection).not.toBe('close');
    expect(await httpPost(tags, access_token, JSON.stringify({ name: 'Kept' }), agent)).toMatchObject({
      status: 201,
      reused: true,
    });
    // A client of its own process, as the server's clients are: 100 POSTs of 900 KB, each answer
    // read. With the connection closed under the client, a few in a hundred lost their answer (EPIPE, ECONNRESET).
    const client = `
      const body = JSON.stringify({ name: 'x'.repeat(900 * 1024) });
      const answers = {};
      for (let i = 0; i < 100; i++) {
        const answer = await fetch(process.argv[1], {
          method: 'POST',
          headers: { authorization: 'Bearer ' + process.argv[2], 'content-type': 'application/json' },
          body,
        }).then(
          async (res) => res.status + ' ' + (await res.json()).type,
          (err) => err.message + ': ' + err.cause?.message,
        );
        answers[answer] = (answers[answer] ?? 0) + 1;
      }
      console.log(JSON.stringify(answers));`;
    const { stdout } = await run(NODE, ['--input-type=module', '-e', client, tags, access_token]);
    expect(JSON.parse(stdout)).toEqual({ '413 /errors/AUD-1001': 100 });
  });

  it('refuses to start when the file store cannot be used, naming it and the reason, before starting its database', async () => {
    const dir = await scratchFolder('audience-serve-files-');
    const closed = await freePort();
    const child = spawn(NODE, [path.join(ROOT, 'src', 'main.js'), 'serve'], {
      env: {
        ...process.env,
        DATA_DIR: dir,
        PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
        DATABASE_URL: '',
        FILES_URL: `http://key:secret@127.0.0.1:${closed}/uploads`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onTestFinished(() => stopProcess(child, 'SIGKILL'));
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toMatch(
      /The file store \(FILES_URL\) cannot be used: S3 PUT start-checks\/\S+ \(bucket uploads at http:\/\/127\.0\.0\.1:\d+\): connect ECONNREFUSED/,
    );
    expect(output).not.toContain('secret@');
    await expect(fs.stat(path.join(dir, 'postgres'))).rejects.toThrow();
  });
});

// The container image runs as a user of its own, not root. Tests run as root in CI, where the
// embedded database runs as a `postgres` user instead, so this path is tried as `nobody` there
// (when that user can read the checkout).
const NOBODY = { uid: 65534, gid: 65534 };
const asNobody =
  process.getuid?.() === 0 &&
  spawnSync(NODE, ['-e', `require('fs').accessSync(${JSON.stringify(path.join(ROOT, 'src', 'main.js'))})`], NOBODY)
    .status === 0;

describe.skipIf(!asNobody)('audience serve as an unprivileged user (as the container image runs it)', () => {
  it('initialises and starts its embedded database as that user, serves, and stops on SIGTERM', async () => {
    const dir = await scratchFolder('audience-serve-nobody-');
    await fs.chown(dir, NOBODY.uid, NOBODY.gid);
    const unprivileged = new Program(dir, await freePort(), NOBODY);
    try {
      await unprivileged.start();
      expect((await fs.stat(path.join(dir, 'postgres', 'cluster', 'PG_VERSION'))).uid).toBe(NOBODY.uid);
      expect((await fetch(unprivileged.url('/healthz'))).status).toBe(200);
      expect(await unprivileged.stop('SIGTERM')).toBe(0);
    } finally {
      if (unprivileged.child?.exitCode === null) await unprivileged.stop('SIGKILL');
    }
  });
});

import { spawn, spawnSync, execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../src/store/embedded.ts';
import { metric } from './app.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
// Every test here starts real programs (a server, command-line runs, each a Node process loading the
// program): on a machine busy with other work, a few of them overran the default 30 s.
vi.setConfig({ testTimeout: 90_000 });
const NODE = path.join(ROOT, 'node_modules', '.bin', 'node');
const run = promisify(execFile);

/** `audience serve` as `npm start` runs it, in its own process, on a data directory of its own. */
class Program {
  child!: ChildProcess;
  output = '';
  readonly dataDir: string;
  readonly port: number;
  /** The user and group to run as (the tests' own when absent). */
  readonly user: { uid: number; gid: number } | undefined;
  constructor(dataDir: string, port: number, user?: { uid: number; gid: number }) {
    this.dataDir = dataDir;
    this.port = port;
    this.user = user;
  }
  /** Settings of the next start beyond the data directory and port (VENDOR …). */
  settings: Record<string, string> = {};
  get env() {
    return {
      ...process.env,
      DATA_DIR: this.dataDir,
      PORT: String(this.port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DATABASE_URL: '',
      ...this.settings,
    };
  }
  /** Starts the program; `detached`: in a process group of its own, which a test can kill whole. */
  async start(options: { detached?: boolean } = {}): Promise<void> {
    this.output = '';
    this.child = spawn(path.join(ROOT, 'bin', 'audience'), ['serve'], {
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.detached ?? false,
      ...this.user,
    });
    this.child.stdout!.on('data', (d) => (this.output += d));
    this.child.stderr!.on('data', (d) => (this.output += d));
    for (let i = 0; i < 600; i++) {
      if (this.child.exitCode !== null) throw new Error(`serve exited: ${this.output}`);
      const ready = await fetch(`http://127.0.0.1:${this.port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`serve did not become ready: ${this.output}`);
  }
  stop(signal: NodeJS.Signals): Promise<number | null> {
    return new Promise((resolve) => {
      this.child.once('exit', (code) => resolve(code));
      this.child.kill(signal);
    });
  }
  /** The command line, against this server: what it prints as JSON; it fails on a non-zero exit. */
  async cli(...args: string[]): Promise<any> {
    const { stdout } = await run(path.join(ROOT, 'bin', 'audience'), args, { env: this.env });
    return JSON.parse(stdout);
  }
  /** The command line, against this server (or where `env` says), however it exits. */
  async exec(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(path.join(ROOT, 'bin', 'audience'), args, { env: { ...this.env, ...env } });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }
  /** The command line with `input` on its standard input, however it exits. */
  execWithInput(args: string[], input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(path.join(ROOT, 'bin', 'audience'), args, { env: this.env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.once('close', (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }
  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }
  /** The whole JSON lines of the output so far, parsed. */
  logLines(): Array<Record<string, any>> {
    return this.output
      .split('\n')
      .slice(0, -1)
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
  }
  /** The log lines, once one matches: the program's output arrives apart from its answers. */
  async logLinesWith(match: (line: Record<string, any>) => boolean): Promise<Array<Record<string, any>>> {
    for (let i = 0; i < 100 && !this.logLines().some(match); i++) await new Promise((r) => setTimeout(r, 50));
    return this.logLines();
  }
}

async function tokenFor(program: Program, clientId: string, clientSecret: string): Promise<Response> {
  return fetch(program.url('/oauth/token'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
}

let dataDir: string;
let program: Program;
beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-serve-'));
  program = new Program(dataDir, await freePort());
  await program.start();
});
afterAll(async () => {
  if (program?.child.exitCode === null) await program.stop('SIGTERM');
  await fs.rm(dataDir, { recursive: true, force: true });
});

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
    // The launcher (what `npm start` runs) replaces itself with the program, with glibc's malloc arenas bounded.
    const environ = (await fs.readFile(`/proc/${program.child.pid}/environ`, 'utf8')).split('\0');
    expect(environ).toContain(`MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? 2}`);
  });

  it('logs where its database, files and secrets are, never a secret, and requests without profile keys or credentials', async () => {
    const started = program.logLines().find((l) => l.msg === 'starting');
    expect(started).toMatchObject({
      roles: ['api', 'worker'],
      database: `embedded, in ${path.join(dataDir, 'postgres')}`,
      files: path.join(dataDir, 'files'),
      adminToken: path.join(dataDir, 'admin-token'),
      serverSecret: path.join(dataDir, 'server-secret'),
      demoCredentials: path.join(dataDir, 'demo-credentials.json'),
      region: 'eu',
      vendor: 'vendor',
    });
    // Where the HTTP interface is described.
    expect(program.logLines().find((l) => l.msg.startsWith('listening'))).toMatchObject({
      docs: `http://localhost:${program.port}/docs`,
      msg: `listening: the HTTP interface is described at http://localhost:${program.port}/docs`,
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
    const lines = (await program.logLinesWith((l) => l.req?.route === route && l.msg === 'incoming request')).filter(
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

  it('drains and stops its database on SIGTERM, and keeps every account after a SIGKILL', async () => {
    const before = await program.cli('account', 'list');
    expect(await program.stop('SIGTERM')).toBe(0);
    await expect(fs.stat(path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid'))).rejects.toThrow();

    // A VENDOR other than the accounts' word is named at start.
    program.settings = { VENDOR: 'acme' };
    await program.start();
    expect(program.logLines().find((l) => l.level === 40 && l.vendor === 'acme')).toMatchObject({
      accountsVendor: 'vendor',
      msg: expect.stringContaining('VENDOR is "acme" but the accounts were made with "vendor"'),
    });
    await program.stop('SIGTERM');
    program.settings = {};
    await program.start();
    expect(program.logLines().filter((l) => l.level === 40)).toEqual([]);
    const created = await program.cli('account', 'create', '--name', 'Written before the kill');
    await program.stop('SIGKILL');
    await program.start();
    const after = await program.cli('account', 'list');
    expect(after.items.map((a: { id: string }) => a.id)).toEqual([
      ...before.items.map((a: { id: string }) => a.id),
      created.id,
    ]);
    // No second demo account on a database that has accounts.
    expect(after.items.filter((a: { name: string }) => a.name === 'Demo')).toHaveLength(1);
  });

  it('a process killed during an upload leaves a partial file (mode 0600) that the next start removes', async () => {
    const demo = JSON.parse(await fs.readFile(path.join(dataDir, 'demo-credentials.json'), 'utf8'));
    const { access_token: token } = (await (await tokenFor(program, demo.client_id, demo.client_secret)).json()) as {
      access_token: string;
    };
    const get = async (p: string): Promise<any> =>
      (await fetch(program.url(p), { headers: { authorization: `Bearer ${token}` } })).json();
    const section = (await get('/audience/sections')).items[0].discriminator;
    const attribute = (await get(`/audience/sections/${section}/attributes`)).items.find(
      (a: { discriminator: string }) => a.discriminator.endsWith('.attributes.firstname'),
    );
    const created: any = await (
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
    expect(created.import_id, JSON.stringify(created)).toEqual(expect.any(String));
    // The form's fields, then the file part, sent slowly and never finished.
    const boundary = 'audience-kill-test';
    const fields = Object.entries(created.file_upload_body as Record<string, string>)
      .map(([k, v]) => `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join('');
    const upload = http.request(program.url(new URL(created.file_upload_url).pathname), {
      method: 'POST',
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' },
    });
    upload.on('error', () => {});
    upload.write(
      `${fields}--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="people.csv"\r\ncontent-type: text/csv\r\n\r\nemail;first\n`,
    );
    const folder = path.join(dataDir, 'files', 'imports', demo.account_id);
    const partials = async () =>
      (await fs.readdir(folder).catch(() => [] as string[])).filter((n) => n.endsWith('.partial'));
    for (let i = 0; (await partials()).length === 0; i++) {
      expect(i, 'no partial file appeared').toBeLessThan(200);
      upload.write(`person${i}@example.com;${'x'.repeat(1000)}\n`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const [partial] = await partials();
    expect((await fs.stat(path.join(folder, partial))).mode & 0o777).toBe(0o600);
    await program.stop('SIGKILL');
    upload.destroy();
    expect(await partials()).toEqual([partial]);

    await program.start();
    expect(await partials()).toEqual([]);
    expect(program.logLines().find((l) => l.msg.startsWith('removed the partial files'))).toMatchObject({ files: 1 });
    // The import still waits for its file; a new upload of the same form is taken.
    expect((await get(`/audience/sections/${section}/imports/${created.import_id}`)).result.status).toBe(
      'waiting_for_file',
    );
  });

  it('refuses to start when the file store cannot be used, naming it and the reason, before starting its database', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-serve-files-'));
    try {
      const closed = await freePort();
      const child = spawn(NODE, [path.join(ROOT, 'src', 'main.ts'), 'serve'], {
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
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the command line (bin/audience)', () => {
  it('shows the usage of every command and group with --help, exiting 0, and the version with --version', async () => {
    const all = await program.exec(['--help']);
    expect(all.code).toBe(0);
    const commands = [...all.stdout.matchAll(/^ {2}audience ([a-z-]+(?: [a-z]+)?)/gm)].map((m) => m[1]);
    expect(commands).toEqual(
      expect.arrayContaining([
        'serve',
        'migrate',
        'account create',
        'key list',
        'apply',
        'integration add',
        'integration list',
        'signing-key rotate',
      ]),
    );
    for (const command of [...commands, 'account', 'key', 'integration', 'suppression']) {
      const help = await program.exec([...command.split(' '), '--help']);
      expect(help.code, command).toBe(0);
      expect(help.stdout, command).toMatch(/^usage: audience /);
      expect(help.stdout, command).toMatch(new RegExp(`audience ${command}\\s`));
    }
    // A command without what it needs exits 2 with its usage.
    const missing = await program.exec(['key', 'list']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--account is required');
    expect(missing.stderr).toContain('usage: audience key list --account ID');
    const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8'));
    expect((await program.exec(['--version'])).stdout.trim()).toBe(pkg.version);
  });

  it('says where the server is and why it cannot be reached, which values an option takes, and which manifest file is broken and where', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const down = await program.exec(['account', 'list'], { AUDIENCE_URL: closed });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`connection refused at ${closed}`);
    expect(down.stderr).not.toContain('fetch failed');

    const region = await program.exec(['account', 'create', '--name', 'Elsewhere', '--region', 'us']);
    expect(region.code).toBe(1);
    expect(region.stderr).toContain('The body field "region" must be one of "eu", "apac"');
    expect(region.stderr).toContain(program.url(''));

    const broken = path.join(dataDir, 'broken.json');
    // A trailing comma where a value belongs: JSON.parse's own message would not say where.
    await fs.writeFile(broken, '{\n  "sections": [\n    { "name": "Shop" },\n  ]\n}\n');
    const parse = await program.exec(['apply', broken, '--account', '1']);
    expect(parse.code).toBe(1);
    expect(parse.stderr).toContain(`the manifest ${broken} is not valid JSON: unexpected "]" at line 4 column 3`);
  });

  it("lists an account's API keys without their secrets", async () => {
    const account = await program.cli('account', 'create', '--name', 'Keys');
    const key = await program.cli('key', 'create', '--account', account.id, '--name', 'connector');
    const { items } = await program.cli('key', 'list', '--account', account.id);
    expect(items).toEqual([
      { client_id: key.client_id, name: 'connector', section_ids: null, created_at: expect.any(String) },
    ]);
  });

  it('apply prints what it created, changed and left alone, and renames an existing account only with --rename', async () => {
    const account = await program.cli('account', 'create', '--name', 'Shop three');
    const file = path.join(dataDir, 'outlet.json');
    const manifest = {
      account: { name: 'Template' },
      sections: [{ name: 'Outlet', tags: [{ name: 'Bargain hunter' }] }],
    };
    await fs.writeFile(file, JSON.stringify(manifest));
    const outlet = 'com.vendor1.sections.user-created.outlet';
    const first = await program.cli('apply', file, '--account', account.id);
    expect(first.account).toMatchObject({ id: account.id, name: 'Shop three' });
    expect(first.created).toEqual(
      expect.arrayContaining([
        `section ${outlet}`,
        `tag com.vendor1.tags.user-created.bargain-hunter in section ${outlet}`,
        `attribute com.vendor1.attributes.email in section ${outlet}`,
      ]),
    );
    expect(first.unchanged).toEqual(
      expect.arrayContaining([`account ${account.id}`, 'keyspace com.vendor1.keyspaces.email']),
    );

    manifest.sections[0].tags.push({ name: 'Regular' });
    await fs.writeFile(file, JSON.stringify(manifest));
    const second = await program.cli('apply', file, '--account', account.id, '--rename');
    expect(second.account.name).toBe('Template');
    expect(second.created).toEqual([`tag com.vendor1.tags.user-created.regular in section ${outlet}`]);
    expect(second.changed).toEqual([`account ${account.id}`]);
    expect(second.unchanged).toContain(`section ${outlet}`);
  });

  it('writes activities from a manifest and from files, records events of a JSON lines file once, and archives', async () => {
    const account = await program.cli('account', 'create', '--name', 'Mailer');
    const shop = 'com.vendor1.sections.user-created.shop';
    const file = path.join(dataDir, 'mailer.json');
    await fs.writeFile(
      file,
      JSON.stringify({
        sections: [{ name: 'Shop' }],
        activities: [
          {
            id: 'welcome',
            kind: 'email',
            section_discriminator: 'com.{vendor}1.sections.user-created.shop',
            name: 'Welcome',
            email_subject: 'Hi',
          },
        ],
      }),
    );
    expect((await program.cli('apply', file, '--account', account.id)).created).toContain('activity welcome');
    expect((await program.cli('apply', file, '--account', account.id)).unchanged).toContain('activity welcome');
    const activityFile = path.join(dataDir, 'sale.json');
    await fs.writeFile(
      activityFile,
      JSON.stringify({
        id: 'sale',
        kind: 'email',
        section_discriminator: shop,
        name: 'Sale',
        status: 'sent',
        email_subject: 'Sale',
      }),
    );
    expect(await program.cli('activity', 'put', activityFile, '--account', account.id)).toMatchObject({
      id: 'sale',
      status: 'sent',
    });
    const events = path.join(dataDir, 'events.jsonl');
    const line = (type: string, key: string) =>
      JSON.stringify({
        activity_id: 'sale',
        type,
        keyspace_discriminator: 'com.vendor1.keyspaces.email',
        profile_key: key,
        correlation_id: `${type}-${key}`,
      });
    await fs.writeFile(
      events,
      [line('SENT', 'a@example.com'), line('SENT', 'b@example.com'), '', line('OPENED', 'a@example.com')].join('\n'),
    );
    expect(await program.cli('activity', 'events', events, '--account', account.id)).toEqual({
      received: 3,
      recorded: 3,
      duplicates: 0,
      skipped: [],
    });
    expect(await program.cli('activity', 'events', events, '--account', account.id)).toEqual({
      received: 3,
      recorded: 0,
      duplicates: 3,
      skipped: [],
    });
    await fs.appendFile(events, `\n${line('SHOUTED', 'a@example.com')}\n`);
    const bad = await program.exec(['activity', 'events', events, '--account', account.id]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('line 5.type');
    expect(
      (await program.cli('activity', 'list', '--account', account.id, '--section', shop)).items
        .map((a: { id: string }) => a.id)
        .sort(),
    ).toEqual(['sale', 'welcome']);
    expect((await program.cli('activity', 'archive', '--account', account.id, '--id', 'sale')).archived_at).toEqual(
      expect.any(String),
    );
  });

  it('connects an integration once per system, whose keyspace /audience/keyspaces lists and profiles are created in (COMP-17)', async () => {
    const account = await program.cli('account', 'create', '--name', 'Magento shop');
    const file = path.join(dataDir, 'shop.json');
    await fs.writeFile(file, JSON.stringify({ sections: [{ name: 'Shop' }] }));
    await program.cli('apply', file, '--account', account.id);
    const added = await program.cli('integration', 'add', '--account', account.id, '--system', 'magento');
    expect(added).toEqual({
      system: 'magento',
      discriminator: expect.stringMatching(/^com\.vendor1\.integrations\.keyspaces\.[0-9a-f]{8}\.magento$/),
    });
    expect(await program.cli('integration', 'add', '--account', account.id, '--system', 'magento')).toEqual(added);
    expect(await program.cli('integration', 'list', '--account', account.id)).toEqual({ items: [added] });
    // The manifest form names the same integration.
    await fs.writeFile(file, JSON.stringify({ integrations: [{ system: 'magento' }] }));
    expect((await program.cli('apply', file, '--account', account.id)).unchanged).toContain(
      `keyspace ${added.discriminator}`,
    );

    const key = await program.cli('key', 'create', '--account', account.id, '--name', 'magento');
    const { access_token } = (await (await tokenFor(program, key.client_id, key.client_secret)).json()) as {
      access_token: string;
    };
    const auth = { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' };
    const keyspaces = (await (await fetch(program.url('/audience/keyspaces'), { headers: auth })).json()) as {
      items: { discriminator: string }[];
    };
    expect(keyspaces.items.map((k) => k.discriminator)).toContain(added.discriminator);
    const section = 'com.vendor1.sections.user-created.shop';
    const created = await fetch(
      program.url(`/audience/keyspaces/${added.discriminator}/sections/${section}/profiles`),
      { method: 'POST', headers: auth, body: JSON.stringify({ profile_key: 'customer-7' }) },
    );
    expect(created.status).toBe(201);
    expect(await created.json()).toEqual({ keyspace_discriminator: added.discriminator, profile_key: 'customer-7' });
    const found = await fetch(
      program.url(`/audience/keyspaces/${added.discriminator}/profiles/customer-7/sections/${section}/attributes`),
      { headers: auth },
    );
    expect(found.status).toBe(200);
  });
});

describe("a new operator's first hour", () => {
  it("runs the README's walkthrough verbatim: a token for the demo account, then its sections", async () => {
    const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8');
    const block = /```sh\n(url=http[\s\S]*?)```/.exec(readme)![1];
    expect(block).toContain('bin/audience token');
    const walk = (env: Record<string, string>) =>
      run('bash', ['-c', block], { cwd: ROOT, env: { ...program.env, ...env } }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
    const ok = await walk({});
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).items.map((s: { name: string }) => s.name)).toEqual(['Shop', 'Magazine']);
    // Without the server's DATA_DIR it stops at the token, saying where it looked, rather than sending "undefined".
    const lost = await walk({ DATA_DIR: path.join(dataDir, 'elsewhere') });
    expect(lost.code).not.toBe(0);
    expect(lost.stderr).toContain(`no demo credentials at ${path.join(dataDir, 'elsewhere', 'demo-credentials.json')}`);
    expect(lost.stdout + lost.stderr).not.toMatch(/undefined|cannot be decoded/);
  });

  it('token --credentials: a token for the key of a file, and the rate limit named when the account has spent it', async () => {
    const account = await program.cli('account', 'create', '--name', 'Tokens');
    // The account's budget: one token request a minute, which the first spends.
    await program.cli('account', 'update', '--account', account.id, '--limit', 'token_requests_per_minute=1');
    const file = path.join(dataDir, 'key.json');
    const key = await program.exec(['key', 'create', '--account', account.id, '--name', 'ci']);
    await fs.writeFile(file, key.stdout);
    const first = await program.exec(['token', '--credentials', file]);
    expect(first.code, first.stderr).toBe(0);
    const sections = await fetch(program.url('/audience/sections'), {
      headers: { authorization: `Bearer ${first.stdout.trim()}` },
    });
    expect(sections.status).toBe(200);
    const last = await program.exec(['token', '--credentials', file]);
    expect(last.code).toBe(1);
    expect(last.stdout).toBe('');
    expect(last.stderr).toMatch(/POST \/oauth\/token at http:\/\/127\.0\.0\.1:\d+: 429 .*\(try again in \d+ s\)/);
  });

  it('apply without --account is atomic: a failing manifest leaves no account, and applying again finds the account it made', async () => {
    const name = `Broken ${Date.now()}`;
    const broken = path.join(dataDir, 'broken-named.json');
    await fs.writeFile(
      broken,
      JSON.stringify({ account: { name }, sections: [{ name: 'Shop', attributes: [{ name: 'A', versions: [] }] }] }),
    );
    for (let i = 0; i < 3; i++) expect((await program.exec(['apply', broken])).code).toBe(1);
    const named = async () =>
      (await program.cli('account', 'list')).items.filter((a: { name: string }) => a.name === name);
    expect(await named()).toEqual([]);

    const good = path.join(dataDir, 'good-named.json');
    await fs.writeFile(good, JSON.stringify({ account: { name }, sections: [{ name: 'Outlet' }] }));
    const first = await program.cli('apply', good);
    expect(first.account.name).toBe(name);
    expect(first.created).toEqual(
      expect.arrayContaining([`account ${first.account.id}`, expect.stringMatching(/^section /)]),
    );
    const second = await program.cli('apply', good);
    expect(second.account.id).toBe(first.account.id);
    expect(second.created).toEqual([]);
    expect(await named()).toHaveLength(1);
  });

  it('account update renames and changes limits; account delete asks for the name, or takes --yes, and erases the account', async () => {
    const account = await program.cli('account', 'create', '--name', 'Short lived');
    const updated = await program.cli(
      'account',
      'update',
      '--account',
      account.id,
      '--name',
      'Shorter lived',
      '--limit',
      'token_requests_per_minute=20',
      '--limit',
      'requests_per_second=null',
    );
    expect(updated).toMatchObject({
      name: 'Shorter lived',
      limit_overrides: { token_requests_per_minute: 20, requests_per_second: null },
    });
    const key = await program.cli('key', 'create', '--account', account.id);

    const refused = await program.execWithInput(['account', 'delete', '--account', account.id], 'Short lived\n');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Type its name');
    expect(refused.stderr).toContain('not deleted');
    expect((await program.cli('account', 'list')).items.map((a: { id: string }) => a.id)).toContain(account.id);

    const confirmed = await program.execWithInput(['account', 'delete', '--account', account.id], 'Shorter lived\n');
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(JSON.parse(confirmed.stdout)).toEqual({ deleted: account.id, name: 'Shorter lived' });
    expect((await program.cli('account', 'list')).items.map((a: { id: string }) => a.id)).not.toContain(account.id);
    expect((await tokenFor(program, key.client_id, key.client_secret)).status).toBe(401);

    const other = await program.cli('account', 'create', '--name', 'Scripted');
    expect(await program.cli('account', 'delete', '--account', other.id, '--yes')).toEqual({
      deleted: other.id,
      name: 'Scripted',
    });
    const gone = await program.exec(['account', 'delete', '--account', other.id, '--yes']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('404 Account not found');
  });

  it('names the values of job list --state, suggests the nearest command, takes help as a command, and lists the environment in serve --help', async () => {
    const state = await program.exec(['job', 'list', '--state', 'stuck']);
    expect(state.code).toBe(2);
    expect(state.stderr).toContain('--state must be one of waiting, running, failed; got "stuck"');

    const typo = await program.exec(['acount', 'list']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown command "acount"; did you mean "account"?');
    const sub = await program.exec(['key', 'lst']);
    expect(sub.stderr).toContain('did you mean "key list"?');

    const help = await program.exec(['help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: audience COMMAND/);
    const one = await program.exec(['help', 'account', 'delete']);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^usage: audience account delete --account ID \[--yes\]/);

    const serve = await program.exec(['serve', '--help']);
    expect(serve.code).toBe(0);
    for (const name of ['PORT', 'HOST', 'DATABASE_URL', 'DATA_DIR', 'VENDOR', 'ADMIN_TOKEN', 'FILES_URL', 'SMTP_URL'])
      expect(serve.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
  });
});

// The container image runs as a user of its own, not root. Tests run as root in CI, where the
// embedded database runs as a `postgres` user instead, so this path is tried as `nobody` there
// (when that user can read the checkout).
const NOBODY = { uid: 65534, gid: 65534 };
const asNobody =
  process.getuid?.() === 0 &&
  spawnSync(NODE, ['-e', `require('fs').accessSync(${JSON.stringify(path.join(ROOT, 'src', 'main.ts'))})`], NOBODY)
    .status === 0;

describe.skipIf(!asNobody)('audience serve as an unprivileged user (as the container image runs it)', () => {
  it('initialises and starts its embedded database as that user, serves, and stops on SIGTERM', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-serve-nobody-'));
    await fs.chown(dir, NOBODY.uid, NOBODY.gid);
    const unprivileged = new Program(dir, await freePort(), NOBODY);
    try {
      await unprivileged.start();
      expect((await fs.stat(path.join(dir, 'postgres', 'cluster', 'PG_VERSION'))).uid).toBe(NOBODY.uid);
      expect((await fetch(unprivileged.url('/healthz'))).status).toBe(200);
      expect(await unprivileged.stop('SIGTERM')).toBe(0);
    } finally {
      if (unprivileged.child?.exitCode === null) await unprivileged.stop('SIGKILL');
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

/** Runs `audience serve` until it exits (a start that must fail): its exit code and output. */
function failedStart(dataDir: string, port: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE, [path.join(ROOT, 'src', 'main.ts'), 'serve'], {
      env: new Program(dataDir, port).env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** Whether the embedded database of a data directory still runs (its postmaster's pid from postmaster.pid). */
async function databaseRuns(dataDir: string): Promise<boolean> {
  const pid = Number(
    (await fs.readFile(path.join(dataDir, 'postgres', 'cluster', 'postmaster.pid'), 'utf8').catch(() => '')).split(
      '\n',
    )[0],
  );
  if (!pid) return false;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat[stat.lastIndexOf(')') + 2] !== 'Z';
}

describe('what an operator watches: the metrics and log lines of real work (issue 25)', () => {
  const EXAMPLES = path.join(ROOT, 'examples');
  const SHOP = 'com.vendor1.sections.user-created.shop';
  const EMAIL = 'com.vendor1.keyspaces.email';
  const LOYAL = 'com.vendor1.segments.user-created.loyal-customers';
  /** An account of the demo's definitions, with a key and its token, for the example files. */
  async function exampleAccount(name: string) {
    const account = await program.cli('account', 'create', '--name', name);
    await program.cli('apply', path.join(ROOT, 'manifests', 'demo.json'), '--account', account.id);
    const key = await program.cli('key', 'create', '--account', account.id, '--name', 'watched');
    const { access_token } = (await (await tokenFor(program, key.client_id, key.client_secret)).json()) as {
      access_token: string;
    };
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(program.url(p), {
        method,
        headers: { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, text, body: text.startsWith('{') ? JSON.parse(text) : text };
    };
    return { id: account.id as string, key, token: access_token, call };
  }
  /** Imports examples/customers.csv (first name, city, loyalty points of three addresses) as a shop would. */
  async function importCustomers(call: Awaited<ReturnType<typeof exampleAccount>>['call']) {
    const attributes = (await call('GET', `/audience/sections/${SHOP}/attributes`)).body.items as {
      discriminator: string;
      versions: { id: string }[];
    }[];
    const version = (word: string) => attributes.find((a) => a.discriminator.endsWith(word))!.versions.at(-1)!.id;
    const created = await call('POST', `/v2/audience/sections/${SHOP}/imports`, {
      keyspace_mapping: { keyspace_discriminator: EMAIL, field_selector: 'email' },
      attribute_mappings: [
        { field_selector: 'first_name', attribute_version_id: version('.firstname') },
        { field_selector: 'city', attribute_version_id: version('.city') },
        { field_selector: 'loyalty_points', attribute_version_id: version('.loyalty-points') },
      ],
    });
    expect(created.status, created.text).toBe(201);
    const form = new FormData();
    for (const [name, value] of Object.entries(created.body.file_upload_body as Record<string, string>))
      form.append(name, value);
    form.append('file', new Blob([await fs.readFile(path.join(EXAMPLES, 'customers.csv'))], { type: 'text/csv' }));
    expect((await fetch(created.body.file_upload_url, { method: 'POST', body: form })).status).toBe(204);
    for (let i = 0; i < 300; i++) {
      const status = await call('GET', `/audience/sections/${SHOP}/imports/${created.body.import_id}`);
      if (status.body.result.status === 'completed') return status.body;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the import did not complete');
  }
  async function exportLoyalCustomers(call: Awaited<ReturnType<typeof exampleAccount>>['call']): Promise<string> {
    const requested = await call('POST', '/audience/profiles/reports/segments', {
      section_discriminator: SHOP,
      segment: { timezone: 'Europe/Paris', segment_discriminator: LOYAL },
    });
    expect(requested.status, requested.text).toBe(201);
    const poll = new URL(requested.body.file_download_url_v2).pathname;
    for (let i = 0; i < 300; i++) {
      const res = await call('GET', poll);
      if (res.status === 200) return res.text;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the export did not become ready');
  }
  const scrape = async () => {
    const adminToken = (await fs.readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    return (await fetch(program.url('/metrics'), { headers: { authorization: `Bearer ${adminToken}` } })).text();
  };

  it('counts the version, authentication failures, ingested activity events, mail and exported rows; the sweep of an export, due in a day, is not a waiting job', async () => {
    const before = await scrape();
    const count = (text: string, name: string, labels: Record<string, string>) => metric(text, name, labels) ?? 0;
    const { id, key, call } = await exampleAccount('Watched shop');

    // Authentication failures: a bearer token that is none, a wrong client secret, a wrong operator token.
    expect((await fetch(program.url('/audience/sections'), { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );
    expect((await tokenFor(program, key.client_id, 'not-the-secret')).status).toBe(401);
    expect((await fetch(program.url('/admin/accounts'), { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );

    // The example activity and its events, twice: the second time every one is a duplicate.
    await program.cli('activity', 'put', path.join(EXAMPLES, 'newsletter.json'), '--account', id);
    expect(await program.cli('activity', 'events', path.join(EXAMPLES, 'events.jsonl'), '--account', id)).toMatchObject(
      {
        recorded: 8,
      },
    );
    expect(await program.cli('activity', 'events', path.join(EXAMPLES, 'events.jsonl'), '--account', id)).toMatchObject(
      {
        duplicates: 8,
      },
    );

    // A transactional message kept in the outbox, and one to a suppressed address.
    await fs.writeFile(
      path.join(dataDir, 'receipt.json'),
      JSON.stringify({
        id: 'receipt',
        kind: 'email',
        section_discriminator: SHOP,
        name: 'Receipt',
        transactional: true,
        email_subject: 'Your receipt',
        sender_email_address: 'shop@shop.example',
        html: '<p>Thanks.</p>',
      }),
    );
    await program.cli('activity', 'put', path.join(dataDir, 'receipt.json'), '--account', id);
    await program.cli(
      'suppression',
      'add',
      '--account',
      id,
      '--channel',
      'com.vendor1.channels.email',
      '--address',
      'bob@example.com',
      '--reason',
      'Hard bounce',
    );
    const sends = [];
    for (const who of ['ann', 'bob']) {
      const sent = await call('POST', `/emails/sections/${SHOP}/activities/transactional/receipt/transactions`, {
        keyspace_discriminator: EMAIL,
        profile_key: `${who}@example.com`,
        to_name: who,
        to_email_address: `${who}@example.com`,
      });
      expect(sent.status, sent.text).toBe(201);
      sends.push(sent.body.id);
    }
    const statusOf = async (transaction: string) =>
      (await call('GET', `/emails/sections/${SHOP}/activities/receipt/transactions/${transaction}`)).body.status;
    for (let i = 0; i < 300 && (await statusOf(sends[1])) !== 'suppressed'; i++)
      await new Promise((r) => setTimeout(r, 100));
    for (let i = 0; i < 300 && (await statusOf(sends[0])) !== 'sent'; i++) await new Promise((r) => setTimeout(r, 100));

    // Profiles from the example CSV, and the file of the demo's segment of loyal customers (over 100 points).
    await importCustomers(call);
    const file = await exportLoyalCustomers(call);
    expect(file.trim().split('\r\n')).toHaveLength(3);

    const after = await scrape();
    expect(
      metric(after, 'audience_build_info', {
        version: JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')).version,
      }),
    ).toBe(1);
    const grew = (name: string, labels: Record<string, string>) =>
      count(after, name, labels) - count(before, name, labels);
    expect(grew('audience_authentication_failures_total', { credential: 'bearer' })).toBe(1);
    expect(grew('audience_authentication_failures_total', { credential: 'client' })).toBe(1);
    expect(grew('audience_authentication_failures_total', { credential: 'operator' })).toBe(1);
    expect(grew('audience_activity_events_total', { outcome: 'recorded' })).toBe(8);
    expect(grew('audience_activity_events_total', { outcome: 'duplicate' })).toBe(8);
    expect(grew('audience_mail_total', { outcome: 'sent' })).toBe(1);
    expect(grew('audience_mail_total', { outcome: 'suppressed' })).toBe(1);
    expect(grew('audience_export_rows_total', { kind: 'segments' })).toBe(2);
    // The export's sweeper waits for its day, not for a worker: no alert on queue latency.
    expect(metric(after, 'audience_jobs', { kind: 'export-sweep', state: 'waiting' })).toBeGreaterThanOrEqual(1);
    expect(metric(after, 'audience_jobs_oldest_waiting_seconds', { kind: 'export-sweep' })).toBe(0);
  });

  it('logs known query parameters by name only, personal path values only, a 4xx with its code and account, and each job run; no personal data', async () => {
    const { id, call } = await exampleAccount('Logged shop');
    const profile = 'dora.private@example.com';
    // An unknown query parameter carrying an address, and a route word after profiles/.
    expect((await call('GET', `/audience/sections?email=${encodeURIComponent(profile)}`)).status).toBe(200);
    // A known query parameter beside an unknown one.
    expect(
      (
        await call(
          'GET',
          `/audience/sections/${SHOP}/tags?include_keyspace_permissions=true&contact=${encodeURIComponent(profile)}`,
        )
      ).status,
    ).toBe(200);
    // A 4xx of a known route: a profile that does not exist, by its address, with a known query parameter.
    const missing = await call(
      'GET',
      `/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(profile)}/sections/${SHOP}/attributes`,
    );
    expect(missing.status).toBe(404);
    await importCustomers(call);
    await exportLoyalCustomers(call);

    const lines = await program.logLinesWith(
      (l) => l.msg === 'job completed' && l.kind === 'export' && l.account === id,
    );
    const requestOf = new Map(lines.filter((l) => l.req).map((l) => [l.reqId, l.req]));
    const answered = lines.filter((l) => l.res && requestOf.get(l.reqId));
    const urlsOf = (route: string) => lines.filter((l) => l.req?.route === route).map((l) => l.req.url);
    expect(urlsOf('/audience/sections').at(-1)).toBe('/audience/sections');
    expect(urlsOf('/audience/sections/:section_discriminator/tags').at(-1)).toBe(
      `/audience/sections/${SHOP}/tags?include_keyspace_permissions=[redacted]`,
    );
    // Route words after profiles/ stay.
    expect(urlsOf('/audience/profiles/reports/segments').at(-1)).toBe('/audience/profiles/reports/segments');
    expect(urlsOf('/v2/audience/profiles/reports/:report_id').at(-1)).toMatch(
      /^\/v2\/audience\/profiles\/reports\/[\w-]+$/,
    );
    const attributesRoute =
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/attributes';
    expect(urlsOf(attributesRoute).at(-1)).toBe(
      `/audience/keyspaces/${EMAIL}/profiles/[redacted]/sections/${SHOP}/attributes`,
    );
    // The 404's line names its error code and the account.
    const refused = answered.find((l) => requestOf.get(l.reqId).route === attributesRoute && l.res.statusCode === 404);
    expect(refused?.res).toMatchObject({ code: expect.stringMatching(/^AUD-\d+$/), account: id });
    // The jobs of the import and the export: start and end, kind, account, rows, duration, outcome.
    const jobs = lines.filter((l) => l.account === id && (l.kind === 'import' || l.kind === 'export'));
    expect(jobs.map((l) => [l.kind, l.outcome])).toEqual([
      ['import', 'started'],
      ['import', 'completed'],
      ['export', 'started'],
      ['export', 'completed'],
    ]);
    expect(jobs[1]).toMatchObject({
      msg: 'job completed',
      rows: 3,
      seconds: expect.any(Number),
      job: expect.any(String),
    });
    expect(jobs[3]).toMatchObject({ rows: 2, seconds: expect.any(Number) });
    // No address of the request or of the imported file anywhere in the output.
    for (const address of [profile, 'ann@example.com', 'cleo@example.com', 'dora.private', 'Lyon'])
      expect(program.output).not.toContain(address);
  });
});

describe('crashes, restarts and a data directory in use', () => {
  it('starts again at once after kill -9 of its whole process group, five times, with every acknowledged write kept', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-crash-'));
    const crashing = new Program(dir, await freePort());
    try {
      const names: string[] = [];
      await crashing.start({ detached: true });
      for (let round = 0; round < 5; round++) {
        const name = `Written before crash ${round}`;
        await crashing.cli('account', 'create', '--name', name);
        names.push(name);
        const exited = new Promise((resolve) => crashing.child.once('exit', resolve));
        process.kill(-crashing.child.pid!, 'SIGKILL');
        await exited;
        await crashing.start({ detached: true });
        const listed = (await crashing.cli('account', 'list')).items.map((a: { name: string }) => a.name);
        expect(listed).toEqual(expect.arrayContaining(names));
      }
    } finally {
      if (crashing.child?.exitCode === null) await crashing.stop('SIGTERM');
      await fs.rm(dir, { recursive: true, force: true });
    }
    // Six starts, five of them with PostgreSQL's crash recovery.
  }, 180_000);

  it('refuses a second program on a data directory in use, naming the owner, and leaves the first one serving', async () => {
    const second = await failedStart(dataDir, await freePort());
    expect(second.code).toBe(1);
    expect(second.output).toContain(`is in use by the program with pid ${program.child.pid}`);
    expect((await fetch(program.url('/readyz'))).status).toBe(200);
    expect(await program.cli('account', 'list')).toEqual({ items: expect.any(Array) });
  });

  it('refuses a busy port before it creates anything: no database, no secret, no demo account', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-port-'));
    try {
      const failed = await failedStart(dir, program.port);
      expect(failed.code).toBe(1);
      expect(failed.output).toContain(`PORT ${program.port} is in use on 127.0.0.1 (EADDRINUSE)`);
      expect(await databaseRuns(dir)).toBe(false);
      expect(await fs.readdir(dir)).toEqual([]);
      // The directory is free for the next start.
      const next = new Program(dir, await freePort());
      await next.start();
      expect(await next.stop('SIGTERM')).toBe(0);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

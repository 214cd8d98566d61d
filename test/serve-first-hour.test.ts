import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, dataDir, program, run, serveProgram, tokenFor } from './serve-program.ts';

serveProgram();

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

  it("token names the credentials file it sent when the server refuses them: another server's DATA_DIR, a stale --credentials", async () => {
    const other = path.join(dataDir, 'other-server');
    await fs.mkdir(other, { recursive: true });
    const file = path.join(other, 'demo-credentials.json');
    await fs.writeFile(file, JSON.stringify({ client_id: 'not-this-server', client_secret: 'nor-this' }));
    const demo = await program.exec(['token'], { DATA_DIR: other });
    expect(demo.code).toBe(1);
    expect(demo.stderr).toContain('401 Invalid client credentials');
    expect(demo.stderr).toContain(
      `(sent the demo key of ${file}: give the DATA_DIR the server was started with, or --credentials FILE)`,
    );
    const given = await program.exec(['token', '--credentials', file]);
    expect(given.code).toBe(1);
    expect(given.stderr).toMatch(new RegExp(`: 401 .*\\(sent the key of ${file}\\)`));
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
    // Processes of their own that wait on nothing else: all at once, on every core.
    const [state, typo, sub, help, group, emulate, one, serve] = await Promise.all(
      [
        ['job', 'list', '--state', 'stuck'],
        ['acount', 'list'],
        ['key', 'lst'],
        ['help'],
        ['help', 'account'],
        ['help', 'emulate'],
        ['help', 'account', 'delete'],
        ['serve', '--help'],
      ].map((args) => program.exec(args)),
    );
    expect(state.code).toBe(2);
    expect(state.stderr).toContain('--state must be one of waiting, running, failed; got "stuck"');

    expect(typo.code).toBe(2);
    // The suggestion and one line on help, not buried under the usage of every command.
    expect(typo.stderr).toBe(
      'audience: unknown command "acount"; did you mean "account"?\naudience help lists every command; audience help COMMAND shows one\n',
    );
    expect(sub.stderr).toContain('did you mean "key list"?');

    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: audience COMMAND/);
    expect(help.stdout).toContain(
      'Every command but serve, api, worker, emulate, migrate, dump, restore, token and help calls',
    );
    // A group's help starts with its commands.
    expect(group.code).toBe(0);
    expect(group.stdout).toMatch(/^usage: audience account create --name N/);
    // The emulator's database is in a temporary folder of its own, not in DATA_DIR.
    expect(emulate.stdout).toContain('The database and files are in a temporary folder');
    expect(emulate.stdout).not.toContain('DATA_DIR/postgres');
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^usage: audience account delete --account ID \[--yes\]/);

    expect(serve.code).toBe(0);
    for (const name of ['PORT', 'HOST', 'DATABASE_URL', 'DATA_DIR', 'VENDOR', 'ADMIN_TOKEN', 'FILES_URL', 'SMTP_URL'])
      expect(serve.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
  });
});

import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/store/embedded.ts';
import { ROOT, dataDir, program, serveProgram, tokenFor } from './serve-program.ts';

serveProgram();

describe('the command line (bin/audience)', () => {
  it('shows the usage of every command and group with --help, exiting 0, and the version with --version', async () => {
    const all = await program.exec(['--help']);
    expect(all.code).toBe(0);
    const commands = [...all.stdout.matchAll(/^ {2}audience ([a-z-]+(?: [a-z]+)?)/gm)].map((m) => m[1]);
    expect(commands).toEqual(
      expect.arrayContaining([
        'serve',
        'emulate',
        'migrate',
        'account create',
        'key list',
        'apply',
        'manifest',
        'integration add',
        'integration list',
        'signing-key rotate',
      ]),
    );
    // Each is a process of its own, which waits on nothing else: all at once, on every core.
    const named = [...commands, 'account', 'key', 'integration', 'suppression'];
    const helps = await Promise.all(named.map((command) => program.exec([...command.split(' '), '--help'])));
    for (const [i, command] of named.entries()) {
      expect(helps[i].code, command).toBe(0);
      expect(helps[i].stdout, command).toMatch(/^usage: audience /);
      expect(helps[i].stdout, command).toMatch(new RegExp(`audience ${command}\\s`));
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

    // The account as a manifest, applied back, changes nothing.
    const current = await program.cli('manifest', '--account', account.id);
    expect(current.account.name).toBe('Template');
    expect(current.sections.map((s: { discriminator: string }) => s.discriminator)).toContain(outlet);
    await fs.writeFile(file, JSON.stringify(current));
    const again = await program.cli('apply', file, '--account', account.id);
    expect([again.created, again.changed]).toEqual([[], []]);
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

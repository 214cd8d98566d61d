import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { readConfig } from './config.ts';
import { adminTokenOf, openDatabase, serve } from './server.ts';
import { migrate } from './store/migrate.ts';

const USAGE = `usage: audience <command>
  serve                                        serve the API and run the worker (what npm start runs)
  api | worker                                 only one of the two roles (several processes can share a database)
  migrate                                      apply the database migrations and exit
  account create --name N [--region eu|apac]   create an account
  account list                                 list accounts
  key create --account ID [--name N] [--section DISCRIMINATOR]...
  key delete --account ID --client-id ID
  apply FILE [--account ID]                    apply a manifest; without --account it creates the account
  suppression add --account ID --channel DISCRIMINATOR --address A --reason R
  suppression remove --account ID --channel DISCRIMINATOR --address A
  suppression list --account ID
  signing-key rotate                           start signing tokens with a new key
  job list [--state waiting|running|failed]    jobs, oldest first (failed: after their last attempt)
Every command but serve and migrate calls the operator API of a running server:
AUDIENCE_URL (default http://127.0.0.1:$PORT), with ADMIN_TOKEN or the token in $DATA_DIR/admin-token.`;

async function admin(method: string, path: string, body?: unknown): Promise<unknown> {
  const config = readConfig();
  const base = process.env.AUDIENCE_URL ?? `http://127.0.0.1:${config.port}`;
  const token = await adminTokenOf(config, false);
  if (!token) throw new Error(`no operator token: set ADMIN_TOKEN or start the server once with DATA_DIR=${config.dataDir}`);
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : {};
  if (!res.ok) throw new Error(`${res.status} ${json.title ?? ''}: ${json.detail ?? text}`);
  return json;
}

function print(value: unknown): void {
  console.log(JSON.stringify(value, null, 2));
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' }, region: { type: 'string' }, account: { type: 'string' },
      'client-id': { type: 'string' }, section: { type: 'string', multiple: true }, help: { type: 'boolean', short: 'h' },
      channel: { type: 'string' }, address: { type: 'string' }, reason: { type: 'string' }, state: { type: 'string' },
    },
  });
  const [command, sub] = positionals;
  const need = (name: keyof typeof values) => {
    const v = values[name];
    if (typeof v !== 'string') throw new Error(`--${name} is required\n${USAGE}`);
    return v;
  };
  switch (`${command ?? ''} ${['account', 'key', 'signing-key', 'suppression', 'job'].includes(command ?? '') ? sub ?? '' : ''}`.trim()) {
    case 'serve':
      return serve(readConfig());
    case 'api':
      return serve(readConfig(), { api: true, worker: false });
    case 'worker':
      return serve(readConfig(), { api: false, worker: true });
    case 'migrate': {
      const { pool, embedded } = await openDatabase(readConfig());
      print({ applied: await migrate(pool) });
      await pool.end();
      await embedded?.stop();
      return;
    }
    case 'account create':
      return print(await admin('POST', '/admin/accounts', { name: need('name'), ...(values.region ? { region: values.region } : {}) }));
    case 'account list':
      return print(await admin('GET', '/admin/accounts'));
    case 'key create':
      return print(await admin('POST', `/admin/accounts/${encodeURIComponent(need('account'))}/keys`, { name: values.name, section_discriminators: values.section }));
    case 'key delete':
      await admin('DELETE', `/admin/accounts/${encodeURIComponent(need('account'))}/keys/${encodeURIComponent(need('client-id'))}`);
      return print({ deleted: values['client-id'] });
    case 'apply': {
      if (!sub) throw new Error(`apply needs a manifest file\n${USAGE}`);
      const manifest = JSON.parse(await fs.readFile(sub, 'utf8'));
      let accountId = values.account;
      if (!accountId) {
        const name = manifest.account?.name;
        if (!name) throw new Error('without --account, the manifest needs account.name to create the account');
        accountId = ((await admin('POST', '/admin/accounts', { name, ...(values.region ? { region: values.region } : {}) })) as { id: string }).id;
      }
      await admin('PUT', `/admin/accounts/${encodeURIComponent(accountId)}/manifest`, manifest);
      return print(await admin('GET', `/admin/accounts/${encodeURIComponent(accountId)}`));
    }
    case 'suppression add':
      await admin('PUT', `/admin/accounts/${encodeURIComponent(need('account'))}/suppressions`, { channel_discriminator: need('channel'), address: need('address'), reason: need('reason') });
      return print(await admin('GET', `/admin/accounts/${encodeURIComponent(need('account'))}/suppressions`));
    case 'suppression remove':
      await admin('DELETE', `/admin/accounts/${encodeURIComponent(need('account'))}/suppressions/${encodeURIComponent(need('channel'))}/${encodeURIComponent(need('address'))}`);
      return print(await admin('GET', `/admin/accounts/${encodeURIComponent(need('account'))}/suppressions`));
    case 'suppression list':
      return print(await admin('GET', `/admin/accounts/${encodeURIComponent(need('account'))}/suppressions`));
    case 'job list':
      return print(await admin('GET', `/admin/jobs${values.state ? `?state=${encodeURIComponent(values.state)}` : ''}`));
    case 'signing-key rotate':
      return print(await admin('POST', '/admin/signing-keys'));
    default:
      console.log(USAGE);
      if (!values.help) process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((err: Error) => {
  console.error(`audience: ${err.message}`);
  process.exit(1);
});

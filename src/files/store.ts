import crypto from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Location } from './location.ts';
import { S3FileStore } from './s3.ts';

/** Where uploaded and produced files live (DESIGN.md "Files"): a local folder or an S3-compatible bucket. */
export interface FileStore {
  /** Writes a stream under `key` and answers its size; the file appears whole or not at all. */
  put(key: string, content: Readable): Promise<number>;
  /** Reads the file under `key` as a stream; a missing file is an error of the stream. */
  read(key: string): Readable;
  exists(key: string): Promise<boolean>;
  /** Removes the file under `key`, if there is one, and what an interrupted write of it left behind. */
  remove(key: string): Promise<void>;
  /** Removes every file whose key starts with `folder/` (a deleted account's), partial writes included. */
  removeAll(folder: string): Promise<void>;
  /** The names of the folders directly under `folder/` (in `exports`, the accounts with export files). */
  folders(folder: string): Promise<string[]>;
  /** Removes what interrupted writes of any key left behind (a process killed during an upload); answers how many files. */
  sweep(): Promise<number>;
}

/** How often a process sweeps its file store: partial files of processes killed meanwhile go within this. */
export const SWEEP_EVERY_MS = 10 * 60_000;
/** A partial file untouched this long is left over, whoever wrote it: no write pauses for an hour. */
const ABANDONED_MS = 60 * 60_000;
/** When this process started (the clock of partial file names): an earlier file of its pid is of a predecessor. */
const STARTED_AT = Date.now() - Math.round(performance.now());

/** Whether process `pid` of this machine is running (EPERM: it runs as another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The store of the configuration: the bucket of FILES_URL, else the folder `DATA_DIR/files`. (S3FileStore is a FileStore by its shape, checked here, so that s3.ts needs nothing of this module.) */
export function openFileStore(config: { files: S3Location | undefined; dataDir: string }): FileStore {
  return config.files ? new S3FileStore(config.files) : new LocalFileStore(path.join(config.dataDir, 'files'));
}

/**
 * Writes and removes a small file, so that a store that cannot be used (a wrong FILES_URL secret, a
 * missing bucket, a folder that cannot be written) stops the program at start with the reason,
 * rather than failing the first upload. Each check has its own key: processes may start together.
 */
export async function checkFileStore(store: FileStore, where: string): Promise<void> {
  const key = `start-checks/${crypto.randomUUID()}`;
  try {
    await store.put(key, Readable.from(['audience\n']));
    await store.remove(key);
  } catch (err) {
    throw new Error(`The file store (${where}) cannot be used: ${(err as Error).message}`, { cause: err });
  }
}

/** Files in a local folder. */
export class LocalFileStore implements FileStore {
  private readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  private pathOf(key: string): string {
    const full = path.resolve(this.dir, key);
    if (!full.startsWith(path.resolve(this.dir) + path.sep)) throw new Error(`file key "${key}" leaves the file store`);
    return full;
  }

  async put(key: string, content: Readable): Promise<number> {
    const target = this.pathOf(key);
    // Files hold personal data: readable by the service's user only.
    await fs.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    const partial = `${target}.${process.pid}.${Date.now()}.partial`;
    let bytes = 0;
    content.on('data', (chunk: Buffer) => (bytes += chunk.length));
    try {
      await pipeline(content, createWriteStream(partial, { mode: 0o600 }));
      await fs.rename(partial, target);
    } catch (err) {
      await fs.rm(partial, { force: true });
      throw err;
    }
    return bytes;
  }

  read(key: string): Readable {
    return createReadStream(this.pathOf(key));
  }

  async exists(key: string): Promise<boolean> {
    return fs.stat(this.pathOf(key)).then(
      () => true,
      () => false,
    );
  }

  /**
   * Removes the file and the partial files of writes of it that never ended (their process was
   * killed): a caller removes a key only when no write of it is going on, such as an export job
   * taken up again after its worker died.
   */
  async remove(key: string): Promise<void> {
    const target = this.pathOf(key);
    await fs.rm(target, { force: true });
    const base = path.basename(target);
    // Named as put names them: the key, the writer's pid and time, ".partial".
    const isPartial = (name: string) =>
      name.startsWith(`${base}.`) && /^\.\d+\.\d+\.partial$/.test(name.slice(base.length));
    const names = await fs.readdir(path.dirname(target)).catch(() => [] as string[]);
    await Promise.all(
      names.filter(isPartial).map((name) => fs.rm(path.join(path.dirname(target), name), { force: true })),
    );
  }

  async removeAll(folder: string): Promise<void> {
    await fs.rm(this.pathOf(folder), { recursive: true, force: true });
  }

  async folders(folder: string): Promise<string[]> {
    const entries = await fs
      .readdir(this.pathOf(folder), { withFileTypes: true })
      .catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return [];
        throw err;
      });
    return entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
  }

  /**
   * Removes the partial files whose write will never end: of a process that is gone, of this
   * process's pid before it started (a container's process is often pid 1 each time), or untouched
   * for an hour. Processes sharing a folder must see each other's pids: one machine, or one
   * container (across machines, FILES_URL's bucket is the shared store).
   */
  async sweep(): Promise<number> {
    const names = (await fs.readdir(this.dir, { recursive: true }).catch(() => [] as string[])).filter((n) =>
      n.endsWith('.partial'),
    );
    let removed = 0;
    for (const name of names) {
      const match = /\.(\d+)\.(\d+)\.partial$/.exec(name);
      const file = path.join(this.dir, name);
      const stat = await fs.stat(file).catch(() => undefined);
      if (!match || !stat) continue;
      const [pid, at] = [Number(match[1]), Number(match[2])];
      const ended = pid === process.pid ? at < STARTED_AT : !running(pid);
      if (ended || Date.now() - stat.mtimeMs > ABANDONED_MS) {
        await fs.rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }
}

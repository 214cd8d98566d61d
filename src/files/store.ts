import crypto from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { S3FileStore, type S3Location } from './s3.ts';

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
    await fs.mkdir(path.dirname(target), { recursive: true });
    const partial = `${target}.${process.pid}.${Date.now()}.partial`;
    let bytes = 0;
    content.on('data', (chunk: Buffer) => (bytes += chunk.length));
    try {
      await pipeline(content, createWriteStream(partial));
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
}

import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** Where uploaded and produced files live (DESIGN.md "Files"): a local folder. */
export class FileStore {
  private readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  private pathOf(key: string): string {
    const full = path.resolve(this.dir, key);
    if (!full.startsWith(path.resolve(this.dir) + path.sep)) throw new Error(`file key "${key}" leaves the file store`);
    return full;
  }

  /** Writes a stream under `key`; the file appears whole or not at all. */
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

  /** Reads the file under `key` as a stream. */
  read(key: string): Readable {
    return createReadStream(this.pathOf(key));
  }

  async exists(key: string): Promise<boolean> {
    return fs.stat(this.pathOf(key)).then(() => true, () => false);
  }

  async remove(key: string): Promise<void> {
    await fs.rm(this.pathOf(key), { force: true });
  }
}

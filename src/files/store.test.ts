import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startS3 } from '../../test/s3.ts';
import { readConfig } from '../config.ts';
import { freePort } from '../store/embedded.ts';
import { S3FileStore } from './s3.ts';
import { checkFileStore, LocalFileStore, openFileStore, type FileStore } from './store.ts';

const MB = 1024 * 1024;

/** `size` bytes of content that differs from block to block, in 64 KiB blocks, and their SHA-256. */
function content(size: number, seed = 'seed'): { stream(): Readable; sha256: string } {
  const BLOCK = 64 * 1024;
  const block = (i: number) =>
    Buffer.alloc(Math.min(BLOCK, size - i * BLOCK), crypto.createHash('sha256').update(`${seed}/${i}`).digest());
  const blocks = function* () {
    for (let i = 0; i * BLOCK < size; i++) yield block(i);
  };
  const hash = crypto.createHash('sha256');
  for (const b of blocks()) hash.update(b);
  return { sha256: hash.digest('hex'), stream: () => Readable.from(blocks()) };
}

async function sha256Of(stream: Readable): Promise<{ sha256: string; bytes: number }> {
  const hash = crypto.createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

async function text(stream: Readable): Promise<string> {
  let all = '';
  for await (const chunk of stream as AsyncIterable<Buffer>) all += String(chunk);
  return all;
}

/** A stream that gives `bytes` bytes, then fails. */
function failing(bytes: number): Readable {
  return Readable.from(
    (async function* () {
      yield Buffer.alloc(bytes, 'x');
      throw new Error('the client went away');
    })(),
  );
}

let s3: Awaited<ReturnType<typeof startS3>>;
let dir: string;
beforeAll(async () => {
  s3 = await startS3();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-store-'));
});
afterAll(async () => {
  await s3?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

const stores: [string, () => FileStore][] = [
  ['the local folder', () => new LocalFileStore(dir)],
  ['an S3 bucket', () => openFileStore(readConfig({ FILES_URL: s3.filesUrl('some/prefix') }))],
];

describe.each(stores)('files in %s', (_name, open) => {
  it('writes a multi-megabyte stream and reads it back unchanged', async () => {
    const store = open();
    const file = content(5 * MB + 12345);
    expect(await store.put('big/file.bin', file.stream())).toBe(5 * MB + 12345);
    expect(await sha256Of(store.read('big/file.bin'))).toEqual({ sha256: file.sha256, bytes: 5 * MB + 12345 });
  });

  it('tells whether a file exists, and removes it (removing a missing file is no error)', async () => {
    const store = open();
    expect(await store.exists('gone.csv')).toBe(false);
    await store.put('gone.csv', Readable.from(['a,b\n']));
    expect(await store.exists('gone.csv')).toBe(true);
    await store.remove('gone.csv');
    expect(await store.exists('gone.csv')).toBe(false);
    await store.remove('gone.csv');
  });

  it('keeps nothing of a stream that fails, and leaves the file it would have replaced as it was', async () => {
    const store = open();
    await expect(store.put('failed.csv', failing(MB))).rejects.toThrow('the client went away');
    expect(await store.exists('failed.csv')).toBe(false);
    await store.put('kept.csv', Readable.from(['old\n']));
    await expect(store.put('kept.csv', failing(MB))).rejects.toThrow('the client went away');
    expect(await text(store.read('kept.csv'))).toBe('old\n');
  });

  it('takes keys with slashes, spaces and other characters', async () => {
    const store = open();
    for (const key of ['imports/12/a b.csv', 'deep/er/still/x y z/(1) +&=ü%.csv']) {
      await store.put(key, Readable.from([`${key}\n`]));
      expect(await store.exists(key)).toBe(true);
      expect(await text(store.read(key))).toBe(`${key}\n`);
    }
    expect(await store.exists('imports/12/a')).toBe(false);
  });

  it("removes every file under a folder (a deleted account's) and none beside it", async () => {
    const store = open();
    const under = ['imports/71/a.csv', 'imports/71/deep/b c.csv', 'imports/71/x.csv.123.456.partial'];
    const beside = ['imports/711/a.csv', 'imports/7/a.csv', 'exports/71/a.csv.gz'];
    for (const key of [...under, ...beside]) await store.put(key, Readable.from([key]));
    await store.removeAll('imports/71');
    for (const key of under) expect(await store.exists(key), key).toBe(false);
    for (const key of beside) expect(await store.exists(key), key).toBe(true);
    await store.removeAll('imports/71');
  });

  it('names the folders directly under a folder (the accounts with files), and none under a folder not there', async () => {
    const store = open();
    const top = `folders-${crypto.randomUUID()}`;
    for (const key of [
      `${top}/71/a.csv`,
      `${top}/71/deep/b.csv`,
      `${top}/8 x/c.csv`,
      `${top}/d.csv`,
      `${top}x/9/e.csv`,
    ])
      await store.put(key, Readable.from([key]));
    expect((await store.folders(top)).sort()).toEqual(['71', '8 x']);
    expect(await store.folders(`${top}-missing`)).toEqual([]);
  });

  it('refuses a key that leaves the store', async () => {
    const store = open();
    await expect(store.put('../outside.csv', Readable.from(['x']))).rejects.toThrow(/leaves the file store/);
    await expect(store.exists('a/../../outside.csv')).rejects.toThrow(/leaves the file store/);
  });

  it('reads a missing file as a stream that fails', async () => {
    await expect(text(open().read('missing.csv'))).rejects.toThrow();
  });

  it('passes the start-up check, which leaves no file behind', async () => {
    const store = open();
    await checkFileStore(store, 'here');
    await checkFileStore(store, 'here');
    const left = await fs.readdir(path.join(dir, 'start-checks')).catch(() => []);
    expect(left).toEqual([]);
  });
});

describe('files in the local folder', () => {
  it('removes with a file the partial files of writes of it whose process was killed, and no other file', async () => {
    const store = new LocalFileStore(dir);
    await store.put('killed/export.csv.gz', Readable.from(['whole\n']));
    // What a killed process's write leaves: the key, its pid and time, ".partial".
    await fs.writeFile(path.join(dir, 'killed', 'export.csv.gz.4242.1767225600000.partial'), 'half');
    await fs.writeFile(path.join(dir, 'killed', 'export.csv.gz.other'), 'kept');
    await store.put('killed/export.csv.gz.2', Readable.from(['kept\n']));
    await fs.writeFile(path.join(dir, 'killed', 'export.csv.gz.2.4242.1767225600000.partial'), 'of another key');
    await store.remove('killed/export.csv.gz');
    expect((await fs.readdir(path.join(dir, 'killed'))).sort()).toEqual([
      'export.csv.gz.2',
      'export.csv.gz.2.4242.1767225600000.partial',
      'export.csv.gz.other',
    ]);
  });
});

describe('files in an S3 bucket', () => {
  it('keep their key under the prefix of FILES_URL (path-style)', async () => {
    await openFileStore(readConfig({ FILES_URL: s3.filesUrl('some/prefix') })).put(
      'imports/7/a b.csv',
      Readable.from(['here\n']),
    );
    // The emulator serves unsigned reads: this looks at the bucket without the store.
    const res = await fetch(`${s3.endpoint}/${s3.bucket}/some/prefix/imports/7/a%20b.csv`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('here\n');
  });

  it('fail with the status and the S3 error code (a wrong secret, a missing object, a missing bucket), or the network error', async () => {
    const wrong = openFileStore(readConfig({ FILES_URL: s3.filesUrl('', 'not the secret') }));
    await expect(wrong.put('x.csv', Readable.from(['x']))).rejects.toThrow(/403 SignatureDoesNotMatch/);
    await expect(text(wrong.read('x.csv'))).rejects.toThrow(/403 SignatureDoesNotMatch/);
    await expect(wrong.exists('x.csv')).rejects.toThrow(/403/);
    await expect(wrong.remove('x.csv')).rejects.toThrow(/403 SignatureDoesNotMatch/);
    const right = openFileStore(readConfig({ FILES_URL: s3.filesUrl() }));
    await expect(text(right.read('missing.csv'))).rejects.toThrow(/GET missing\.csv .*404 NoSuchKey/);
    const noBucket = openFileStore(
      readConfig({ FILES_URL: s3.filesUrl().replace(`/${s3.bucket}`, '/no-such-bucket') }),
    );
    await expect(noBucket.put('x.csv', Readable.from(['x']))).rejects.toThrow(/404 NoSuchBucket/);
    const closed = await freePort();
    const unreachable = openFileStore(readConfig({ FILES_URL: `http://key:secret@127.0.0.1:${closed}/bucket` }));
    await expect(unreachable.exists('x.csv')).rejects.toThrow(
      `S3 HEAD x.csv (bucket bucket at http://127.0.0.1:${closed}): connect ECONNREFUSED`,
    );
  });

  it('fail the start-up check with the reason: a wrong secret, a missing bucket', async () => {
    await expect(
      checkFileStore(openFileStore(readConfig({ FILES_URL: s3.filesUrl('', 'not the secret') })), 'FILES_URL'),
    ).rejects.toThrow(
      /^The file store \(FILES_URL\) cannot be used: S3 PUT start-checks\/.* 403 SignatureDoesNotMatch/,
    );
    const noBucket = openFileStore(
      readConfig({ FILES_URL: s3.filesUrl().replace(`/${s3.bucket}`, '/no-such-bucket') }),
    );
    await expect(checkFileStore(noBucket, 'FILES_URL')).rejects.toThrow(/404 NoSuchBucket/);
    // A check that passes leaves nothing in the bucket.
    await checkFileStore(openFileStore(readConfig({ FILES_URL: s3.filesUrl() })), 'FILES_URL');
    const listing = await (await fetch(`${s3.endpoint}/${s3.bucket}?prefix=start-checks/`)).text();
    expect(listing).toContain('<ListBucketResult');
    expect(listing).not.toContain('<Key>start-checks/');
  });

  it('spool an upload in a file that is unlinked while it is written and sent, so that a killed process leaves none', async () => {
    const store = openFileStore(readConfig({ FILES_URL: s3.filesUrl() }));
    // The spool files this process holds open, by their links in /proc (Linux): "(deleted)" once unlinked.
    const spools = async () => {
      const links = await Promise.all(
        (await fs.readdir('/proc/self/fd')).map((fd) => fs.readlink(`/proc/self/fd/${fd}`).catch(() => '')),
      );
      return links.filter((l) => /audience-[0-9a-f-]+\.partial/.test(l));
    };
    let during: string[] = [];
    const file = content(2 * MB, 'spool');
    const stream = Readable.from(
      (async function* () {
        for await (const block of file.stream()) {
          yield block;
          if (during.length === 0) during = await spools();
        }
      })(),
    );
    await store.put('spooled.bin', stream);
    expect(during.length).toBeGreaterThan(0);
    for (const link of during) expect(link).toMatch(/\(deleted\)$/);
    expect(await spools()).toEqual([]);
    expect(await sha256Of(store.read('spooled.bin'))).toEqual({ sha256: file.sha256, bytes: 2 * MB });
  });

  it('stops downloading when the reader stops early', async () => {
    const store = openFileStore(readConfig({ FILES_URL: s3.filesUrl() }));
    const file = content(4 * MB, 'early');
    await store.put('early.bin', file.stream());
    const stream = store.read('early.bin');
    for await (const _ of stream) break;
    expect(stream.destroyed).toBe(true);
    expect(await sha256Of(store.read('early.bin'))).toEqual({ sha256: file.sha256, bytes: 4 * MB });
  });
});

describe('FILES_URL', () => {
  it('unset keeps files in DATA_DIR/files', () => {
    expect(readConfig({}).files).toBeUndefined();
    expect(openFileStore(readConfig({}))).toBeInstanceOf(LocalFileStore);
  });

  it('names the endpoint (TLS by its scheme), percent-encoded credentials, the bucket, a prefix and the region', () => {
    expect(
      readConfig({
        FILES_URL: 'https://AKIA%2F1:s%2Fe%3Ac%40r%20t@s3.example.com/my-bucket/audience/files?region=eu-west-1',
      }).files,
    ).toEqual({
      endpoint: 'https://s3.example.com',
      bucket: 'my-bucket',
      prefix: 'audience/files',
      region: 'eu-west-1',
      accessKey: 'AKIA/1',
      secret: 's/e:c@r t',
    });
    expect(readConfig({ FILES_URL: 'http://minio:secret@127.0.0.1:9000/files/' }).files).toEqual({
      endpoint: 'http://127.0.0.1:9000',
      bucket: 'files',
      prefix: '',
      region: 'us-east-1',
      accessKey: 'minio',
      secret: 'secret',
    });
    expect(openFileStore(readConfig({ FILES_URL: 'http://minio:secret@127.0.0.1:9000/files' }))).toBeInstanceOf(
      S3FileStore,
    );
  });

  it.each([
    ['not a URL', '127.0.0.1:9000/bucket', /not a URL/],
    ['another scheme', 's3://minio:pa55word@host/bucket', /scheme is "s3"/],
    ['no credentials', 'https://host/bucket', /access key or the secret is missing/],
    ['no secret', 'https://minio@host/bucket', /access key or the secret is missing/],
    ['no bucket', 'https://minio:pa55word@host/', /no bucket/],
    ['an invalid bucket name', 'https://minio:pa55word@host/My_Bucket', /"My_Bucket" is no bucket name/],
    ['an unknown parameter', 'https://minio:pa55word@host/bucket?tls=false', /unknown parameter "tls"/],
    ['a broken percent-encoding', 'https://minio:pa55%zzword@host/bucket', /percent-encoding/],
  ])('fails at start with %s, naming FILES_URL and its form but not the secret', (_case, url, reason) => {
    let message = '';
    try {
      readConfig({ FILES_URL: url });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^FILES_URL must be http\(s\):\/\/ACCESS_KEY:SECRET@host/);
    expect(message).toMatch(reason);
    expect(message).not.toContain('pa55');
  });
});

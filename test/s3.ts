import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import S3rver from '@20minutes/s3rver';
import { afterAll, beforeAll } from 'vitest';
import { TestServer } from './app.ts';

/** s3rver's built-in key pair. */
const S3_ACCESS_KEY = 'S3RVER';
const S3_SECRET = 'S3RVER';

export interface S3 {
  endpoint: string;
  bucket: string;
  filesUrl(prefix?: string, secret?: string): string;
  close(): Promise<void>;
}

/**
 * An S3-compatible server (s3rver, which checks Signature V4) on a loopback port, keeping its
 * objects in a temporary folder, with one empty bucket.
 */
export async function startS3(bucket = 'audience'): Promise<S3> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-s3-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    filesUrl: (prefix = '', secret = S3_SECRET) =>
      `http://${S3_ACCESS_KEY}:${encodeURIComponent(secret)}@127.0.0.1:${port}/${bucket}${prefix ? `/${prefix}` : ''}`,
    async close() {
      await server.close();
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}

/**
 * For the tests of a describe over files in a bucket, in a test file whose `server` keeps its
 * files in a folder: before them, stops that server's in-process worker (it would take the jobs,
 * and look for their files in its folder), starts an S3 server and a TestServer with FILES_URL in
 * its bucket and a worker of its own, and hands both to `ready`; after them, closes both.
 */
export function serverOnS3(server: () => TestServer, ready: (onS3: TestServer, s3: S3) => void): void {
  let s3: S3 | undefined;
  let onS3: TestServer | undefined;
  beforeAll(async () => {
    await server().worker?.stop();
    server().worker = undefined;
    s3 = await startS3();
    onS3 = await TestServer.start({ FILES_URL: s3.filesUrl('audience/files') }, { worker: true });
    ready(onS3, s3);
  });
  afterAll(async () => {
    await onS3?.close();
    await s3?.close();
  });
}

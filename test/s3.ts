import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import S3rver from '@20minutes/s3rver';

/** s3rver's built-in key pair. */
const S3_ACCESS_KEY = 'S3RVER';
const S3_SECRET = 'S3RVER';

/**
 * An S3-compatible server (s3rver, which checks Signature V4) on a loopback port, keeping its
 * objects in a temporary folder, with one empty bucket.
 */
export async function startS3(bucket = 'audience'): Promise<{ endpoint: string; bucket: string; filesUrl(prefix?: string, secret?: string): string; close(): Promise<void> }> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'audience-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    filesUrl: (prefix = '', secret = S3_SECRET) => `http://${S3_ACCESS_KEY}:${encodeURIComponent(secret)}@127.0.0.1:${port}/${bucket}${prefix ? `/${prefix}` : ''}`,
    async close() {
      await server.close();
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}

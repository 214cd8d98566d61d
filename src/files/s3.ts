import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import type { S3Location } from './location.ts';
import { scope, sign, stamp } from './sigv4.ts';

/** RFC 3986 encoding of a path segment, as SigV4 signs it (encodeURIComponent leaves !'()* alone). */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const EMPTY_SHA256 = crypto.createHash('sha256').digest('hex');

/**
 * Files in a bucket of any S3-compatible service (AWS, MinIO, Ceph …), addressed path-style
 * (`endpoint/bucket/key`) and signed with AWS Signature V4. Bodies are streamed both ways.
 */
export class S3FileStore {
  private readonly location: S3Location;
  constructor(location: S3Location) {
    this.location = location;
  }

  /** The encoded path of a key, which is both the request path and the signed canonical URI. */
  private pathOf(key: string): string {
    const segments = key.split('/');
    // URLs resolve "." and "..", so such a key would name another object.
    if (segments.some((s) => s === '' || s === '.' || s === '..'))
      throw new Error(`file key "${key}" leaves the file store`);
    const { bucket, prefix } = this.location;
    return `/${[bucket, ...(prefix ? prefix.split('/') : []), ...segments].map(encodeSegment).join('/')}`;
  }

  private async request(
    method: string,
    key: string,
    options: {
      body?: Readable;
      length?: number;
      sha256?: string;
      signal?: AbortSignal;
      /** A request of the bucket itself (a listing), `key` only naming it in errors. */
      query?: Record<string, string>;
    } = {},
  ): Promise<Response> {
    const { endpoint, region, accessKey, secret } = this.location;
    const url = new URL(options.query ? `/${encodeSegment(this.location.bucket)}` : this.pathOf(key), endpoint);
    // SigV4 signs the query with its names sorted and both sides encoded as path segments are.
    const query = Object.entries(options.query ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([n, v]) => `${encodeSegment(n)}=${encodeSegment(v)}`)
      .join('&');
    url.search = query;
    const { day, time } = stamp(new Date());
    const amz = { 'x-amz-content-sha256': options.sha256 ?? EMPTY_SHA256, 'x-amz-date': time };
    // fetch sends the host of the URL; it is signed too.
    const signed: Record<string, string> = { host: url.host, ...amz };
    const names = Object.keys(signed).sort();
    const canonical = [
      method,
      url.pathname,
      query,
      names.map((n) => `${n}:${signed[n]}\n`).join(''),
      names.join(';'),
      amz['x-amz-content-sha256'],
    ].join('\n');
    const toSign = [
      'AWS4-HMAC-SHA256',
      time,
      scope(day, region),
      crypto.createHash('sha256').update(canonical).digest('hex'),
    ].join('\n');
    const authorization = `AWS4-HMAC-SHA256 Credential=${accessKey}/${scope(day, region)}, SignedHeaders=${names.join(';')}, Signature=${sign(secret, day, region, toSign)}`;
    try {
      return await fetch(url, {
        method,
        headers: {
          ...amz,
          authorization,
          ...(options.length !== undefined ? { 'content-length': String(options.length) } : {}),
        },
        body: options.body ? (Readable.toWeb(options.body) as globalThis.ReadableStream) : undefined,
        duplex: 'half',
        signal: options.signal,
      } as RequestInit);
    } catch (err) {
      // fetch says only "fetch failed"; the reason (refused, unknown host …) is its cause.
      const reason = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
      throw new Error(`${this.describe(method, key)}: ${reason}`, { cause: err });
    }
  }

  private describe(method: string, key: string): string {
    return `S3 ${method} ${key} (bucket ${this.location.bucket} at ${this.location.endpoint})`;
  }

  /** The error of a refused request, with S3's status and error code. */
  private async failure(method: string, key: string, res: Response): Promise<Error> {
    const body = method === 'HEAD' ? '' : await res.text().catch(() => '');
    const code = /<Code>([^<]*)<\/Code>/.exec(body)?.[1];
    const message = /<Message>([^<]*)<\/Message>/.exec(body)?.[1];
    return new Error(
      `${this.describe(method, key)}: ${res.status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}`,
    );
  }

  /**
   * Writes a stream under `key`. S3 needs the length before the body, so the stream is spooled to a
   * temporary file first (hashed on the way, so that the service can check what it receives); a
   * failing stream therefore sends nothing, and S3 stores an object whole or not at all. The file
   * is unlinked as soon as it is open and lives only through its handle: a process killed during
   * an upload leaves nothing of it (files hold personal data, and the temporary folder is shared).
   */
  async put(key: string, content: Readable): Promise<number> {
    this.pathOf(key); // a key leaving the store is refused before the stream is read
    const spool = path.join(os.tmpdir(), `audience-${crypto.randomUUID()}.partial`);
    const handle = await fs.open(spool, 'wx+', 0o600);
    let body: Readable | undefined;
    try {
      await fs.rm(spool);
      const hash = crypto.createHash('sha256');
      let bytes = 0;
      for await (const chunk of content as AsyncIterable<Buffer | string>) {
        // A stream of strings (object mode) gives them as they are: S3 counts bytes.
        const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        hash.update(data);
        bytes += data.length;
        await handle.write(data);
      }
      body = handle.createReadStream({ start: 0, autoClose: false });
      const res = await this.request('PUT', key, { body, length: bytes, sha256: hash.digest('hex') });
      if (!res.ok) throw await this.failure('PUT', key, res);
      await res.body?.cancel();
      return bytes;
    } finally {
      // The handle closes once no stream holds it: the body's, whatever became of the request.
      body?.destroy();
      await handle.close();
    }
  }

  /**
   * Reads the object under `key` as a stream, at once: the stream is fed when the service answers,
   * and fails with the service's error. Destroying it early cancels the request.
   */
  read(key: string): Readable {
    const out = new PassThrough();
    const cancel = new AbortController();
    out.once('close', () => cancel.abort());
    this.request('GET', key, { signal: cancel.signal })
      .then(async (res) => {
        if (!res.ok || !res.body) throw await this.failure('GET', key, res);
        await pipeline(Readable.fromWeb(res.body as ReadableStream<Uint8Array>), out);
      })
      .catch((err: Error) => out.destroy(err));
    return out;
  }

  async exists(key: string): Promise<boolean> {
    const res = await this.request('HEAD', key);
    if (res.status === 404) return false;
    if (!res.ok) throw await this.failure('HEAD', key, res);
    return true;
  }

  /** Nothing to sweep: an upload is spooled to an unlinked file, and the bucket stores objects whole. */
  async sweep(): Promise<number> {
    return 0;
  }

  async remove(key: string): Promise<void> {
    const res = await this.request('DELETE', key);
    // Deleting a missing object is no error, as in the local store.
    if (!res.ok && res.status !== 404) throw await this.failure('DELETE', key, res);
    await res.body?.cancel();
  }

  /** Lists the keys under `folder/` and removes each. */
  async removeAll(folder: string): Promise<void> {
    for await (const { keys } of this.listing(folder)) for (const key of keys) await this.remove(`${folder}/${key}`);
  }

  async folders(folder: string): Promise<string[]> {
    const found: string[] = [];
    for await (const page of this.listing(folder, '/')) found.push(...page.folders);
    return found;
  }

  /**
   * ListObjectsV2 under `folder/`, page by page: the keys under it (relative to it), and with a
   * delimiter, only those directly under it and the names of the folders there.
   */
  private async *listing(folder: string, delimiter?: '/'): AsyncGenerator<{ keys: string[]; folders: string[] }> {
    const { prefix } = this.location;
    const under = `${prefix ? `${prefix}/` : ''}${folder}/`;
    let token: string | undefined;
    do {
      const query: Record<string, string> = { 'list-type': '2', prefix: under };
      if (delimiter) query.delimiter = delimiter;
      if (token) query['continuation-token'] = token;
      const res = await this.request('GET', `${folder}/`, { query });
      if (!res.ok) throw await this.failure('GET', `${folder}/`, res);
      const body = await res.text();
      yield {
        keys: [...body.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => unescapeXml(m[1]).slice(under.length)),
        folders: [...body.matchAll(/<CommonPrefixes>\s*<Prefix>([^<]*)<\/Prefix>/g)].map((m) =>
          unescapeXml(m[1]).slice(under.length, -1),
        ),
      };
      token = /<IsTruncated>true<\/IsTruncated>/.test(body)
        ? unescapeXml(/<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(body)?.[1] ?? '')
        : undefined;
    } while (token);
  }
}

/** The text of an XML element, its five predefined entities replaced. */
function unescapeXml(text: string): string {
  return text.replace(
    /&(lt|gt|quot|apos|amp);/g,
    (_m, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e]!,
  );
}

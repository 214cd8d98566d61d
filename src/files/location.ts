// FILES_URL read into the bucket it names: apart from the S3 client (src/files/s3.ts) so that
// reading the configuration, as every command of the command line does, loads none of it.

/** A bucket of an S3-compatible service, and the folder in it that holds the files (FILES_URL). */
export interface S3Location {
  /** `http(s)://host[:port]`: TLS when https. */
  endpoint: string;
  bucket: string;
  /** Prepended to every key, with a `/`; empty for the bucket's root. */
  prefix: string;
  region: string;
  accessKey: string;
  secret: string;
}

const FORM = 'http(s)://ACCESS_KEY:SECRET@host[:port]/bucket[/prefix][?region=REGION]';

/** Reads FILES_URL; throws naming what is wrong, never repeating the secret. */
export function parseFilesUrl(text: string): S3Location {
  const fail = (why: string) => new Error(`FILES_URL must be ${FORM}: ${why}`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw fail('it is not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fail(`the scheme is "${url.protocol.slice(0, -1)}"`);
  if (!url.username || !url.password) throw fail('the access key or the secret is missing');
  const [bucket, ...rest] = url.pathname.split('/').filter((part) => part !== '');
  // S3's rule for bucket names.
  if (!bucket || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw fail(bucket ? `"${bucket}" is no bucket name` : 'no bucket');
  for (const name of url.searchParams.keys()) if (name !== 'region') throw fail(`unknown parameter "${name}"`);
  const region = url.searchParams.get('region') ?? 'us-east-1';
  if (!/^[a-z0-9-]+$/.test(region)) throw fail(`"${region}" is no region`);
  try {
    return {
      endpoint: url.origin,
      bucket,
      prefix: rest.map(decodeURIComponent).join('/'),
      region,
      accessKey: decodeURIComponent(url.username),
      secret: decodeURIComponent(url.password),
    };
  } catch {
    throw fail('a percent-encoding is broken');
  }
}

import crypto from 'node:crypto';

/** AWS Signature Version 4 for the service `s3`, shared by the upload form and the S3 file store. */

function hmac(key: Buffer | string, data: string): Buffer {
  return crypto.createHmac('sha256', key).update(data).digest();
}

/** The SigV4 date stamps of `date`: `YYYYMMDD` and `YYYYMMDDTHHMMSSZ`. */
export function stamp(date: Date): { day: string; time: string } {
  const iso = date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  return { day: iso.slice(0, 8), time: iso };
}

/** The credential scope of a day in a region. */
export function scope(day: string, region: string): string {
  return `${day}/${region}/s3/aws4_request`;
}

/** The signature (hex) of `text` by the key derived from `secret` for the day and region. */
export function sign(secret: string, day: string, region: string, text: string): string {
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), 's3'), 'aws4_request');
  return crypto.createHmac('sha256', key).update(text).digest('hex');
}

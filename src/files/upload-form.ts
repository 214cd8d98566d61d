import crypto from 'node:crypto';
import { scope, sign, stamp } from './sigv4.ts';

/**
 * S3-style signed POST forms (SPEC §2.13): the service hands out form fields whose policy is signed
 * (AWS Signature V4 over the base64 policy); an upload must carry them unchanged, before the
 * expiry, within the size range. The field names are those of SPEC §2.13 (`x-store-…`).
 */
export interface UploadForm {
  url: string;
  fields: Record<string, string>;
  expiresAt: Date;
}

export interface UploadGrant {
  key: string;
  metaId: string;
  contentType: string;
  maxBytes: number;
  expiresAt: Date;
}

export class UploadSigner {
  private readonly accessKey: string;
  private readonly secret: string;
  private readonly region: string;
  private readonly url: string;

  constructor(options: { accessKey: string; secret: string; region: string; url: string }) {
    this.accessKey = options.accessKey;
    this.secret = options.secret;
    this.region = options.region;
    this.url = options.url;
  }

  private signature(policy: string, day: string): string {
    return sign(this.secret, day, this.region, policy);
  }

  /** The form fields, in the order they must be sent, for one upload. */
  form(grant: UploadGrant, now: Date): UploadForm {
    const { day, time } = stamp(now);
    const credential = `${this.accessKey}/${scope(day, this.region)}`;
    const policy = Buffer.from(
      JSON.stringify({
        expiration: grant.expiresAt.toISOString(),
        conditions: [
          { key: grant.key },
          { success_action_status: '204' },
          { 'content-type': grant.contentType },
          ['content-length-range', 0, grant.maxBytes],
          { 'x-store-meta-id': grant.metaId },
          { 'x-store-algorithm': 'AWS4-HMAC-SHA256' },
          { 'x-store-credential': credential },
          { 'x-store-date': time },
        ],
      }),
    ).toString('base64');
    return {
      url: this.url,
      expiresAt: grant.expiresAt,
      fields: {
        key: grant.key,
        success_action_status: '204',
        policy,
        'content-type': grant.contentType,
        'x-store-meta-id': grant.metaId,
        'x-store-algorithm': 'AWS4-HMAC-SHA256',
        'x-store-credential': credential,
        'x-store-date': time,
        'x-store-signature': this.signature(policy, day),
      },
    };
  }

  /**
   * Checks the fields of an upload against their signed policy; returns the grant, or the reason
   * it is refused ('signature', 'expired' or a field name). A field the policy does not name is
   * refused too: nothing unsigned rides along with a signed form.
   */
  verify(fields: Record<string, string>, now: Date): { grant: UploadGrant } | { refused: string } {
    const policy = fields.policy;
    const day = fields['x-store-date']?.slice(0, 8) ?? '';
    const given = fields['x-store-signature'] ?? '';
    if (!policy || !/^[0-9a-f]{64}$/.test(given)) return { refused: 'signature' };
    const expected = this.signature(policy, day);
    if (!crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(given))) return { refused: 'signature' };
    const decoded = JSON.parse(Buffer.from(policy, 'base64').toString('utf8')) as {
      expiration: string;
      conditions: (Record<string, string> | [string, number, number])[];
    };
    let maxBytes = 0;
    const signed = new Set(['policy', 'x-store-signature']);
    for (const condition of decoded.conditions) {
      if (Array.isArray(condition)) {
        maxBytes = condition[2];
        continue;
      }
      for (const [name, value] of Object.entries(condition)) {
        if (fields[name] !== value) return { refused: name };
        signed.add(name);
      }
    }
    const unsigned = Object.keys(fields).find((name) => !signed.has(name));
    if (unsigned !== undefined) return { refused: unsigned };
    const expiresAt = new Date(decoded.expiration);
    if (now.getTime() > expiresAt.getTime()) return { refused: 'expired' };
    return {
      grant: {
        key: fields.key,
        metaId: fields['x-store-meta-id'],
        contentType: fields['content-type'],
        maxBytes,
        expiresAt,
      },
    };
  }
}

import crypto from 'node:crypto';
import { seal, sealingKey, unseal } from '../api-keys/sealing.ts';

/**
 * Standard Webhooks signatures (docs/webhooks.md "Verifying"): a secret is `whsec_` and the base64
 * of random bytes; a signature is `v1,` and the base64 of HMAC-SHA256, keyed by those bytes, of
 * `<webhook-id>.<webhook-timestamp>.<body>`. Secrets must be read back to sign, so they are kept
 * sealed as the token signing keys are (AES-256-GCM under a key derived from SERVER_SECRET).
 */

const PREFIX = 'whsec_';
const PURPOSE = 'webhook secrets';

/** A new secret: 32 random bytes. */
export function newSecret(): string {
  return PREFIX + crypto.randomBytes(32).toString('base64');
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64');
  return `v1,${crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** Seals and opens secrets with the key of a server secret. */
export class SecretBox {
  private readonly key: Buffer;
  constructor(serverSecret: string) {
    this.key = sealingKey(serverSecret, PURPOSE);
  }
  seal(secret: string): Buffer {
    return seal(this.key, secret);
  }
  open(sealed: Buffer): string {
    return unseal(this.key, sealed);
  }
}

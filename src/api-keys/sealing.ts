import crypto from 'node:crypto';

/**
 * Sealing of secrets kept in the database (the signing keys' private halves): AES-256-GCM under a
 * key derived from SERVER_SECRET with HKDF, so that a copy of the database alone signs nothing.
 * A sealed value is: version byte (1), 12-byte nonce, 16-byte tag, ciphertext.
 */
const VERSION = 1;

/** The sealing key of a server secret, for one purpose. */
export function sealingKey(serverSecret: string, purpose: string): Buffer {
  return Buffer.from(crypto.hkdfSync('sha256', serverSecret, 'audience', purpose, 32));
}

export function seal(key: Buffer, plaintext: string): Buffer {
  const nonce = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, nonce);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), ciphertext]);
}

/** Opens a sealed value; throws when the key is not the one that sealed it (another SERVER_SECRET). */
export function unseal(key: Buffer, sealed: Buffer): string {
  if (sealed[0] !== VERSION || sealed.length < 29) throw new Error('not a sealed value of this program');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13));
  decipher.setAuthTag(sealed.subarray(13, 29));
  return Buffer.concat([decipher.update(sealed.subarray(29)), decipher.final()]).toString('utf8');
}

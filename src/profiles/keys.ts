import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { Problem } from '../core/problems.ts';

// A practical address check: one @, a local part and a dotted domain, no spaces (RFC 5321 limits).
const EMAIL = /^[^\s@"(),:;<>[\\\]]+@[^\s@"(),:;<>[\\\]]+\.[^\s@"(),:;<>[\\\].]{2,}$/;

/**
 * Normalises a profile key of a keyspace kind (SPEC §2.2), or throws 400 naming `field`:
 * - email (and transactional-email): trimmed, lower-cased as a whole. Mail systems compare domains
 *   without case and, in practice, local parts too; no dots or `+` suffixes are removed, because
 *   some providers treat them as different mailboxes.
 * - mobile (and sms): E.164 (`+4712345678`), from international input (`+47…` or `0047…`).
 * - crm-id: trimmed. Others (web, export, integration keyspaces): kept as given.
 */
export function normaliseKey(kind: string, raw: string, field = 'profile_key'): string {
  switch (kind) {
    case 'email':
    case 'transactional-email': {
      const key = raw.trim().toLowerCase();
      if (key.length > 254 || !EMAIL.test(key)) throw new Problem('AUD-1205', `${field} "${raw}" is not a valid email address`);
      return key;
    }
    case 'mobile':
    case 'sms': {
      const input = raw.trim().replace(/^00/, '+');
      const phone = input.startsWith('+') ? parsePhoneNumberFromString(input) : undefined;
      if (!phone || !phone.isValid()) throw new Problem('AUD-1205', `${field} "${raw}" is not a valid mobile number in international form (+<country code><number>)`);
      return phone.number;
    }
    case 'crm-id': {
      const key = raw.trim();
      if (key === '') throw new Problem('AUD-1205', `${field} must not be empty`);
      return key;
    }
    default:
      if (raw === '') throw new Problem('AUD-1205', `${field} must not be empty`);
      return raw;
  }
}

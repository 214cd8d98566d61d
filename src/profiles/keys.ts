import { createRequire } from 'node:module';
import type { parsePhoneNumberFromString as ParsePhoneNumber } from 'libphonenumber-js';
import { Problem, type ProblemCode } from '../core/problems.ts';

const require = createRequire(import.meta.url);
let parsePhoneNumber: typeof ParsePhoneNumber | undefined;

/**
 * libphonenumber-js (its default 'min' metadata, as before), loaded by the first mobile or sms key a
 * thread meets: its 112 modules and metadata take about 2 MB of heap in each thread that loads
 * them, and most processes never see a phone number (docs/benchmarks.md "Idle memory"). Loading
 * it takes about 50 ms, once.
 */
function phoneParser(): typeof ParsePhoneNumber {
  parsePhoneNumber ??= (require('libphonenumber-js') as { parsePhoneNumberFromString: typeof ParsePhoneNumber })
    .parsePhoneNumberFromString;
  return parsePhoneNumber;
}

// A practical address check: one @, a local part and a dotted domain, no spaces (RFC 5321 limits).
const EMAIL = /^[^\s@"(),:;<>[\\\]]+@[^\s@"(),:;<>[\\\]]+\.[^\s@"(),:;<>[\\\].]{2,}$/;

/** What `normaliseKey` can answer: a key that is no valid key of its keyspace's kind. */
export const KEY_PROBLEMS: readonly ProblemCode[] = ['AUD-1205'];

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
      if (key.length > 254 || !EMAIL.test(key))
        throw new Problem('AUD-1205', `${field} "${raw}" is not a valid email address`);
      return key;
    }
    case 'mobile':
    case 'sms': {
      const input = raw.trim().replace(/^00/, '+');
      const phone = input.startsWith('+') ? phoneParser()(input) : undefined;
      if (!phone || !phone.isValid())
        throw new Problem(
          'AUD-1205',
          `${field} "${raw}" is not a valid mobile number in international form (+<country code><number>)`,
        );
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

import crypto from 'node:crypto';

/**
 * Verifies a webhook delivery of the service as Standard Webhooks specifies (the service's
 * docs/webhooks.md "Headers and signatures"): an HMAC-SHA256, keyed by the secret (`whsec_` and
 * base64), of `<webhook-id>.<webhook-timestamp>.<body>`, given in `webhook-signature` as `v1,<base64>`
 * (space-separated, one per secret the endpoint signs with), and a timestamp near the receiver's clock.
 */

/** A delivery that does not verify: why, without the secret or the body. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** A verified delivery: its `webhook-id` (deduplicate on it) and its body. */
export interface WebhookDelivery<Data = Record<string, any>> {
  id: string;
  type: string;
  /** When the change that caused the event was committed (ISO 8601). */
  timestamp: string;
  data: Data;
}

export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from `now`, in seconds; 300 by default. */
  toleranceSeconds?: number;
  /** The receiver's clock, in milliseconds since the epoch; `Date.now` by default. */
  now?: () => number;
}

/** Request headers as Fetch (`Headers`) or Node's `http` (`req.headers`, lower-case names) give them. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * Checks the delivery's signature against `secrets` (one, or the old and the new one while you
 * rotate) and its timestamp, and answers it parsed; throws a `WebhookVerificationError` otherwise.
 * `body` must be the request's body as it arrived (its exact bytes, not JSON parsed and written again).
 */
export function verifyWebhook<Data = Record<string, any>>(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  body: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): WebhookDelivery<Data> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a number of seconds');
  const tolerance = options.toleranceSeconds ?? 300;
  const skew = (options.now ?? Date.now)() / 1000 - Number(timestamp);
  if (Math.abs(skew) > tolerance)
    throw new WebhookVerificationError(
      `webhook-timestamp is ${Math.round(Math.abs(skew))} s ${skew > 0 ? 'old' : 'ahead'}, beyond ${tolerance} s`,
    );
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
  const given = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3), 'base64'));
  const matches = (typeof secrets === 'string' ? [secrets] : secrets).some((secret) => {
    const expected = crypto.createHmac('sha256', key(secret)).update(`${id}.${timestamp}.`).update(bytes).digest();
    return given.some((g) => g.length === expected.length && crypto.timingSafeEqual(g, expected));
  });
  if (!matches) throw new WebhookVerificationError('no signature of webhook-signature matches the secret');
  let parsed: { type: string; timestamp: string; data: Data };
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
  return { id, type: parsed.type, timestamp: parsed.timestamp, data: parsed.data };
}

function header(headers: WebhookHeaders, name: string): string {
  let value: string | string[] | null | undefined;
  if (headers instanceof Headers) value = headers.get(name);
  else value = headers[name] ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  if (Array.isArray(value)) value = value.join(' ');
  if (!value) throw new WebhookVerificationError(`the ${name} header is missing`);
  return value;
}

/** The HMAC key of a secret: the base64 after `whsec_` (a secret without the prefix is taken as base64). */
function key(secret: string): Buffer {
  const bytes = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  if (bytes.length === 0) throw new WebhookVerificationError('the secret is empty or not base64');
  return bytes;
}

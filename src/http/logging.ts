import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { pino, type DestinationStream } from 'pino';

const REDACTED = '[redacted]';

// Profile keys are email addresses and phone numbers, and they travel in paths: the segment
// after `profiles/` or `addresses/`, and the address of an operator's suppression path
// (`suppressions/<channel>/<address>`). The log line names the route's pattern instead.
const KEY_SEGMENT = /(\/(?:profiles|addresses)\/)[^/?#]+|(\/suppressions\/[^/?#]+\/)[^/?#]+/g;
// Query parameters whose value is an address, a key or a secret.
const SECRET_QUERY = new Set(['suppression_address', 'address', 'profile_key', 'client_secret']);

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A request URL as the log keeps it: without profile keys, addresses or secrets. */
export function redactUrl(url: string): string {
  const at = url.indexOf('?');
  const path = (at < 0 ? url : url.slice(0, at)).replace(
    KEY_SEGMENT,
    (_match, before: string | undefined, suppressions: string | undefined) => `${before ?? suppressions}${REDACTED}`,
  );
  if (at < 0) return path;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const name = pair.split('=', 1)[0];
      return SECRET_QUERY.has(decoded(name).toLowerCase()) ? `${name}=${REDACTED}` : pair;
    });
  return `${path}?${query.join('&')}`;
}

/**
 * The process's logger (JSON lines, pino). Requests are logged without the keys and addresses of
 * their URL, and with no header but the client's name; `redact` guards what other log calls
 * might pass: credentials in headers or bodies, and the `detail` of database errors, which quotes
 * the values of a violated constraint.
 */
export function createLogger(level: string, stream?: DestinationStream): FastifyBaseLogger {
  const options = {
    level,
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        route: request.routeOptions?.url,
        host: request.host,
        remoteAddress: request.ip,
        remotePort: request.socket?.remotePort,
        userAgent: request.headers['user-agent'],
      }),
    },
    redact: {
      paths: [
        'headers.authorization',
        'headers.cookie',
        '*.headers.authorization',
        '*.headers.cookie',
        'client_secret',
        '*.client_secret',
        'err.detail',
      ],
      censor: REDACTED,
    },
  };
  return stream ? pino(options, stream) : pino(options);
}

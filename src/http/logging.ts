import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { DestinationStream } from 'pino';
import { createLogger as createProgramLogger, REDACTED } from '../core/log.ts';
import type { ProblemCode } from '../core/problems.ts';

// Path parameters whose values are personal data or credentials: profile keys (email addresses and
// phone numbers), addresses, and the signed tokens of tracking links, each of which names its
// recipient. Only their values are left out: the route's own words stay.
const PERSONAL_PARAMS = new Set(['profile_key', 'address', 'token']);
// A path no route matched has no pattern to go by: the segment after `profiles/` or `addresses/`,
// and the address of a suppression path (`suppressions/<channel>/<address>`), are left out.
const KEY_SEGMENT = /(\/(?:profiles|addresses)\/)[^/?#]+|(\/suppressions\/[^/?#]+\/)[^/?#]+/g;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return text;
  }
}

/**
 * A request URL as the log keeps it, without profile keys, addresses or secrets. With the route's
 * pattern (`/audience/profiles/:profile_key/segments`), the segments of personal path parameters
 * are left out, and the query keeps the names of the route's own parameters (`known`), each with
 * its value left out, and nothing of any other (a client's unknown parameter may be anything, an
 * address too). Without a route, the path loses what may be a key, and the query is left out.
 */
export function redactUrl(url: string, route?: string, known: ReadonlySet<string> = new Set()): string {
  const at = url.indexOf('?');
  const path = at < 0 ? url : url.slice(0, at);
  if (route === undefined)
    return path.replace(
      KEY_SEGMENT,
      (_match, before: string | undefined, suppressions: string | undefined) => `${before ?? suppressions}${REDACTED}`,
    );
  const pattern = route.split('/');
  const segments = path.split('/');
  // A trailing slash is the same route (ignoreTrailingSlash).
  if (segments.length === pattern.length + 1 && segments.at(-1) === '') segments.pop();
  const kept =
    segments.length === pattern.length
      ? segments
          .map((segment, i) =>
            pattern[i].startsWith(':') && PERSONAL_PARAMS.has(pattern[i].slice(1)) ? REDACTED : segment,
          )
          .join('/')
      : redactUrl(path);
  if (at < 0) return kept;
  const names = url
    .slice(at + 1)
    .split('&')
    .map((pair) => decoded(pair.split('=', 1)[0]))
    .filter((name) => known.has(name));
  return names.length === 0 ? kept : `${kept}?${names.map((name) => `${name}=${REDACTED}`).join('&')}`;
}

/** The query parameters a route declares. */
function queryNames(request: FastifyRequest): ReadonlySet<string> {
  const query = request.routeOptions?.schema?.querystring as { properties?: Record<string, unknown> } | undefined;
  return new Set(Object.keys(query?.properties ?? {}));
}

const problemCodes = new WeakMap<FastifyReply, ProblemCode>();

/** Notes the error code a reply answers with, for its log line. */
export function noteProblem(reply: FastifyReply, code: ProblemCode): void {
  problemCodes.set(reply, code);
}

/** The account a request acts for: its bearer token's, or the operator route's `account_id`. */
function accountOf(request: FastifyRequest): string | undefined {
  return request.caller?.accountId ?? (request.params as { account_id?: string } | undefined)?.account_id;
}

/**
 * The process's logger for HTTP (src/core/log.ts). Requests are logged without the keys and
 * addresses of their URL, and with no header but the client's name; an answer with its status, the
 * error code of a problem, and the account it was for.
 */
export function createLogger(level: string, stream?: DestinationStream): FastifyBaseLogger {
  return createProgramLogger(level, stream, {
    req: (request: FastifyRequest) => ({
      method: request.method,
      url: redactUrl(request.url, request.is404 ? undefined : request.routeOptions?.url, queryNames(request)),
      route: request.routeOptions?.url,
      host: request.host,
      remoteAddress: request.ip,
      remotePort: request.socket?.remotePort,
      userAgent: request.headers['user-agent'],
    }),
    res: (reply: FastifyReply) => {
      const code = problemCodes.get(reply);
      const account = accountOf(reply.request);
      return {
        statusCode: reply.statusCode,
        ...(code === undefined ? {} : { code }),
        ...(account === undefined ? {} : { account }),
      };
    },
  });
}

import crypto from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DEFAULT_LIMITS, type LimitName } from '../../core/limits.ts';
import type { Services } from '../../services.ts';
import { Problem, type ProblemCode } from '../../core/problems.ts';
import type { Caller } from '../../core/scope.ts';

/** How a route is guarded: the public API's bearer token, the operator token, the metrics token, or nothing. */
export type RouteAuth = 'bearer' | 'admin' | 'metrics' | 'none';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
    /** A limit of SPEC §8 that this route spends from, on top of requests_per_second. */
    rateLimit?: LimitName;
    /** The error of a body over the size limit, where the spec names one (profile updates). */
    bodyTooLarge?: ProblemCode;
  }
  interface FastifyRequest {
    caller: Caller;
  }
}

/** The window of each rate, by the unit its name ends in. */
function windowOf(limit: LimitName): number {
  return limit.endsWith('_per_minute') ? 60_000 : 1000;
}

/** Spends one request of `limit` from bucket `key`, or throws 429 with Retry-After; a null account has the default limits. */
export async function spend(
  services: Services,
  accountId: string | null,
  key: string,
  limit: LimitName,
): Promise<void> {
  const value = accountId === null ? DEFAULT_LIMITS[limit] : (await services.accounts.get(accountId))?.limits[limit];
  if (value === null || value === undefined) return;
  const taken = await services.buckets.take(`${key}:${limit}`, value, windowOf(limit));
  if (!taken.ok) {
    services.metrics.rateLimitRefusals.inc({ limit });
    throw new Problem(
      'AUD-1002',
      `Request capacity reached: at most ${value} ${limit.replaceAll('_', ' ')}; retry later`,
      { 'retry-after': String(taken.retryAfter) },
    );
  }
}

/**
 * Gives back what `spend` took, for a request that turned out not to count: a request refused
 * for its input must not use up a scarce budget, such as one event export a minute.
 */
export async function giveBack(services: Services, accountId: string, limit: LimitName): Promise<void> {
  const value = (await services.accounts.get(accountId))?.limits[limit];
  if (value === null || value === undefined) return;
  await services.buckets.giveBack(`${accountId}:${limit}`, value, windowOf(limit));
}

/** The statuses of a request refused for what it sent (its body, query or type), which costs no route limit. */
const INPUT_REFUSALS = new Set([400, 413, 415]);

function sameSecret(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}

/**
 * Checks every request before its body is read: a bearer token for the public API (SPEC §5),
 * the operator token for /admin; then the account's rate limits (SPEC §8).
 */
export function registerAuth(app: FastifyInstance, services: Services): void {
  app.decorateRequest('caller', null, []);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    // An unknown route answers 404 (or 405) whoever asks.
    const auth = request.is404 ? 'none' : (request.routeOptions.config.auth ?? 'bearer');
    if (auth === 'none') return;
    if (auth === 'admin' || auth === 'metrics') {
      const header = request.headers.authorization ?? '';
      const [expected, needs] =
        auth === 'admin'
          ? [services.adminToken, 'The operator API needs "Authorization: Bearer <ADMIN_TOKEN>"']
          : [
              services.metricsToken,
              'Metrics need "Authorization: Bearer <METRICS_TOKEN>" (the operator token when METRICS_TOKEN is unset)',
            ];
      if (!/^Bearer /i.test(header) || !sameSecret(header.slice(7).trim(), expected))
        throw new Problem('AUD-8', needs, { 'www-authenticate': 'Bearer' });
      return;
    }
    const caller = await services.apiKeys.authenticate(request.headers.authorization);
    request.caller = caller;
    await spend(services, caller.accountId, caller.accountId, 'requests_per_second');
    const routeLimit = request.routeOptions.config.rateLimit;
    if (routeLimit) await spend(services, caller.accountId, caller.accountId, routeLimit);
  });
  // Before the answer is sent, so that a client correcting its request at once finds the token back.
  // (requests_per_second is not given back: it guards the service, whatever the request held.)
  // A callback hook, not an async one: it runs on every answer and has nothing to wait for on nearly all.
  app.addHook('onSend', (request, reply, payload, done) => {
    const routeLimit = request.routeOptions.config?.rateLimit;
    if (!routeLimit || !request.caller || !INPUT_REFUSALS.has(reply.statusCode)) return done(null, payload);
    // A token not given back (Redis unreachable) costs the client a wait, never its answer.
    giveBack(services, request.caller.accountId, routeLimit).then(
      () => done(null, payload),
      () => done(null, payload),
    );
  });
}

import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import FindMyWay from 'find-my-way';
import client from 'prom-client';
import type { MetricsJson } from '../core/metrics.ts';
import { accountScope, type Services } from '../services.ts';
import { readProjectionsAhead } from '../segments/live.ts';
import { registerAuth, type RouteAuth } from './plugins/auth.ts';
import { registerBodyParsers } from './plugins/body-parsers.ts';
import { Problem } from '../core/problems.ts';
import { sendProblem, toProblem, writeClientProblem } from './problems.ts';
import { registerTextGuard } from './plugins/text-guard.ts';
import { apiKeysRoutes } from './routes/api-keys.ts';
import { definitionsRoutes } from './routes/definitions.ts';
import { adminAccountsRoutes } from './routes/admin/accounts.ts';
import { adminApiKeysRoutes } from './routes/admin/api-keys.ts';
import { adminIntegrationsRoutes } from './routes/admin/integrations.ts';
import { adminJobsRoutes } from './routes/admin/jobs.ts';
import { adminSuppressionsRoutes } from './routes/admin/suppressions.ts';
import { operationsRoutes } from './routes/operations.ts';
import { consoleRoutes } from './routes/console.ts';
import { profilesRoutes } from './routes/profiles.ts';
import { consentsRoutes } from './routes/consents.ts';
import { segmentsRoutes } from './routes/segments.ts';
import { importsRoutes } from './routes/imports.ts';
import { exportsRoutes } from './routes/exports.ts';
import { activitiesRoutes } from './routes/activities.ts';
import { outboxRoutes, trackingRoutes, transactionalRoutes } from './routes/transactional.ts';
import { profileDataPlane } from './plugins/profile-data.ts';
import { logDestination } from '../core/log.ts';
import { createLogger, registerRequestLog, requestLogOptions } from './logging.ts';
import { docsOptions, openapiOptions } from './openapi.ts';
import { ProblemSchema } from './schemas/problem.ts';
import { registerOperations } from './operation.ts';
import { CONTROL_PREFIX, STRICT_HEADER, type Emulator } from './emulator.ts';
import { emulatorRoutes } from './routes/emulator.ts';
import { adminWebhooksRoutes, webhooksRoutes } from './routes/webhooks.ts';

// A CommonJS module whose default export its types name `default`: it is there too.
const addFormats = addFormatsModule.default;

/** The credential a route's 401 says was missing or wrong: the token route's (no auth of its own) are a client's. */
function credentialOf(auth: RouteAuth | undefined): string {
  return auth === 'admin' ? 'operator' : auth === 'metrics' ? 'metrics' : auth === 'none' ? 'client' : 'bearer';
}

/** SPEC §8: request bodies up to 100 KB. */
export const BODY_LIMIT = 100 * 1024;

export type App = FastifyInstance;

// Bodies are validated as sent: no coercion, no silent removal of unknown keys (STYLE.md practice 4).
// Path and query values are text and are coerced to the declared types. The routes' schemas are
// not checked against JSON Schema's meta-schema: they are TypeBox's, and compiling the
// meta-schema's own validator took each Ajv instance 0.1–0.2 s of CPU at a process's first
// request (docs/benchmarks.md "Start"); a schema Ajv cannot compile still fails its route.
function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
    validateSchema: false,
  });
  addFormats(ajv);
  return ajv;
}

/**
 * A route's validator or answer serializer, compiled when a request first needs it rather than
 * when the route is registered: compiling the 250 routes' schemas (Ajv, fast-json-stringify) was
 * 0.7 s of every start's CPU time on the project's 2-core machine, for routes that most processes
 * never serve (docs/benchmarks.md "Start"). What the compiled function says of its last call
 * (Ajv's `errors`) is on the wrapper, where Fastify reads it.
 */
function compiledOnFirstUse<F extends (data: never) => unknown>(compile: () => F): F {
  let compiled: F | undefined;
  const run = (data: never) => {
    compiled ??= compile();
    const result = compiled(data);
    (run as { errors?: unknown }).errors = (compiled as { errors?: unknown }).errors;
    return result;
  };
  return run as F;
}

/** Keywords that make a schema more than one type's: a union of it and null keeps its `anyOf`. */
const COMBINATORS = ['anyOf', 'oneOf', 'allOf', 'not', 'if', '$ref'];

/**
 * An answer's schema as its serializer is built from it: a union of one type's schema and null
 * (TypeBox's `Type.Union([T, Type.Null()])`, an `anyOf`) becomes that schema with `nullable`,
 * which fast-json-stringify writes with a test of null; for an `anyOf` it makes an Ajv instance
 * and compiles a validator to pick the branch, 0.1–0.2 s of CPU at a route's first answer on the
 * project's 2-core machine (docs/benchmarks.md "Start"). The JSON written is the same.
 */
export function nullableForSerializer(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(nullableForSerializer);
  if (schema === null || typeof schema !== 'object') return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) copy[key] = nullableForSerializer(value);
  const { anyOf, ...rest } = copy;
  if (!Array.isArray(anyOf) || anyOf.length !== 2) return copy;
  const members = anyOf as Record<string, unknown>[];
  const nullAt = members.findIndex((member) => member.type === 'null');
  const one = members[1 - nullAt];
  if (nullAt < 0 || typeof one.type !== 'string' || one.type === 'null') return copy;
  if (COMBINATORS.some((keyword) => keyword in one) || 'nullable' in one) return copy;
  return { ...rest, ...one, nullable: true };
}

/**
 * The OpenAPI operationId of a route: its method and path, each literal segment in PascalCase, a
 * last parameter as `By<Name>` (`GET /audience/segments/:segment_discriminator` →
 * `getAudienceSegmentsBySegmentDiscriminator`). Method and path make a route, so ids are unique
 * unless two paths differ only in their inner parameters (the OpenAPI lint test would say so).
 */
export function operationIdOf(method: string, url: string): string {
  const pascal = (text: string) =>
    text
      .split(/[^A-Za-z0-9]+/)
      .filter(Boolean)
      .map((w) => w[0].toUpperCase() + w.slice(1))
      .join('');
  const segments = url.split('/').filter(Boolean);
  return (
    method.toLowerCase() +
    segments
      .map((s, i) => (!s.startsWith(':') ? pascal(s) : i === segments.length - 1 ? `By${pascal(s)}` : ''))
      .join('')
  );
}

/**
 * Builds the HTTP application: parsers, validation, problems, auth, metrics, OpenAPI and every
 * route module; with `operationsOnly`, only health, metrics and the error reference (a worker
 * process). `threadMetrics` gives the counters of the process's worker thread to /metrics; `down`
 * why the process no longer serves (stopping, its database gone), for /healthz. With
 * `emulator` (`audience emulate` only), its faults, request log and control API under /_emulator.
 */
export async function buildApp(
  services: Services,
  options: {
    logger?: FastifyBaseLogger;
    operationsOnly?: boolean;
    threadMetrics?: () => Promise<MetricsJson>;
    down?: () => string | undefined;
    emulator?: Emulator;
  } = {},
): Promise<App> {
  const logger = options.logger ?? createLogger(services.config.logLevel, logDestination(services.config.logFormat));
  const app = Fastify({
    loggerInstance: logger,
    ...requestLogOptions,
    bodyLimit: BODY_LIMIT,
    // Profile keys and discriminators are longer than the default 100 characters.
    routerOptions: { maxParamLength: 2000, ignoreTrailingSlash: true },
    trustProxy: true,
    // Errors met before a route's handlers (a malformed URL; bytes Node's parser refuses) are problem documents too.
    frameworkErrors: (error, request, reply) => sendProblem(reply, toProblem(error, request, BODY_LIMIT)),
    clientErrorHandler: writeClientProblem,
    schemaController: {
      compilersFactory: {
        buildSerializer: (...factory: Parameters<ReturnType<typeof SerializerSelector>>) => {
          const build = SerializerSelector()(...factory);
          return (route: Parameters<typeof build>[0]) =>
            compiledOnFirstUse(() =>
              build({ ...route, schema: nullableForSerializer(route.schema) as typeof route.schema }),
            );
        },
      },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Made at the first validator compiled, as the validators are.
  let bodyAjv: Ajv | undefined;
  let textAjv: Ajv | undefined;
  app.setValidatorCompiler(({ schema, httpPart }) =>
    compiledOnFirstUse(() =>
      httpPart === 'body' ? (bodyAjv ??= makeAjv(false)).compile(schema) : (textAjv ??= makeAjv(true)).compile(schema),
    ),
  );
  registerBodyParsers(app);
  registerTextGuard(app);

  // The emulator's strict mode (docs/emulator.md "Strict mode"): unknown top-level fields are
  // refused rather than ignored, for the whole emulator or, with the header, for one request.
  // Outside the emulator the header changes nothing: the service is as lenient as the platform.
  const strictFor = (request: FastifyRequest): boolean => {
    if (!options.emulator) return false;
    const asked = request.headers[STRICT_HEADER];
    if (asked === 'true') return true;
    if (asked === 'false') return false;
    return options.emulator.strict;
  };

  // Every route's method and path, to tell an unknown path (404) from a known path with another
  // method (405): a router of them is built at the first request that no route takes (building it
  // took about 40 ms of a start's CPU).
  const known: [method: 'GET', url: string][] = [];
  let router: ReturnType<typeof FindMyWay> | undefined;
  const routerOfKnown = () => {
    const built = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 2000 });
    for (const [method, url] of known) built.on(method, url, () => {});
    return built;
  };
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') known.push([method as 'GET', route.url]);
    // A copy that keeps the schema's getters (an operation's description, src/http/operation.ts),
    // with the operation's id made when the OpenAPI document first reads it, as the description
    // is: both took a tenth of `buildApp()`'s CPU when made for every route at the start.
    const schema: NonNullable<typeof route.schema> = Object.defineProperties(
      {},
      Object.getOwnPropertyDescriptors(route.schema ?? {}),
    );
    if (schema.operationId === undefined) {
      let operationId: string | undefined;
      const [method, url] = [[route.method].flat()[0], route.url];
      Object.defineProperty(schema, 'operationId', {
        get: () => (operationId ??= operationIdOf(method, url)),
        enumerable: true,
        configurable: true,
      });
    }
    route.schema = schema;
    // COMP-12: array query parameters arrive comma-separated or as a repeated key; booleans in
    // any case (Python clients send `True`).
    const query = route.schema?.querystring as { properties?: Record<string, { type?: string }> } | undefined;
    const propertiesOf = (type: string) =>
      Object.entries(query?.properties ?? {})
        .filter(([, s]) => s.type === type)
        .map(([k]) => k);
    const arrays = propertiesOf('array');
    const booleans = propertiesOf('boolean');
    if (arrays.length > 0 || booleans.length > 0) {
      const normalise = async (request: FastifyRequest) => {
        const q = request.query as Record<string, unknown>;
        for (const name of arrays) {
          const value = q[name];
          if (value !== undefined)
            q[name] = [value]
              .flat()
              .flatMap((v) => String(v).split(','))
              .map((v) => v.trim())
              .filter((v) => v !== '');
        }
        for (const name of booleans) if (typeof q[name] === 'string') q[name] = (q[name] as string).toLowerCase();
      };
      route.preValidation = [normalise, ...[route.preValidation ?? []].flat()];
    }
    // Unknown top-level fields of a body are ignored, as the platform does: real clients send
    // their own (the Drupal module sends time_zone with every merge). Bodies whose keys are data
    // (merge-patch attribute and tag maps) have no fixed fields and are checked as data; the
    // operator API (manifests included) and the emulator's control API stay strict, where an
    // unknown field is a typo to report.
    const body = route.schema?.body as
      { type?: string; properties?: Record<string, unknown>; additionalProperties?: unknown } | undefined;
    if (
      body?.type === 'object' &&
      body.properties &&
      body.additionalProperties === false &&
      route.config?.auth !== 'admin' &&
      !route.url.startsWith(CONTROL_PREFIX)
    ) {
      const known = new Set(Object.keys(body.properties));
      const ignoreUnknownFields = async (request: FastifyRequest) => {
        const fields = request.body;
        if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) return;
        // The emulator's strict mode leaves them to the schema, which refuses them naming the field.
        if (strictFor(request)) return;
        for (const name of Object.keys(fields)) if (!known.has(name)) delete (fields as Record<string, unknown>)[name];
      };
      route.preValidation = [ignoreUnknownFields, ...[route.preValidation ?? []].flat()];
    }
  });

  registerRequestLog(app, logger);
  const { registry } = services.metrics;
  client.collectDefaultMetrics({ register: registry });
  services.metrics.watchPool(services.pool, 'main');
  const duration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
  });
  // The labelled series by method, route and status, so that a request does not hash its labels
  // again (prom-client's observe sorts and joins them on every call; docs/benchmarks.md "Profiles").
  const { authenticationFailures } = services.metrics;
  const series = new Map<string, client.Histogram.Internal<'method' | 'route' | 'status'>>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unknown';
    const key = `${request.method} ${reply.statusCode} ${route}`;
    let observed = series.get(key);
    if (!observed)
      series.set(key, (observed = duration.labels({ method: request.method, route, status: reply.statusCode })));
    observed.observe(reply.elapsedTime / 1000);
    if (reply.statusCode === 401)
      authenticationFailures.inc({ credential: credentialOf(request.routeOptions.config.auth) });
    done();
  });

  app.setErrorHandler((error: Error, request, reply) => {
    // Fastify closes the connection of a body over the limit; closed while the client still sends
    // the body, the connection is reset, often before the client has read the 413. Node reads and
    // drops the rest instead (as of any body a route does not read), and the connection serves on.
    if ((error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE') reply.removeHeader('connection');
    return sendProblem(reply, toProblem(error, request, BODY_LIMIT));
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    router ??= routerOfKnown();
    const allowed = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => router!.find(m as 'GET', path));
    if (allowed.length > 0) {
      return sendProblem(
        reply,
        new Problem('AUD-1006', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`, {
          allow: allowed.join(', '),
        }),
      );
    }
    return sendProblem(reply, new Problem('AUD-1', `No route ${request.method} ${path}`));
  });

  await app.register(swagger, openapiOptions(services.config, ProblemSchema));
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...route.config, auth: 'none' };
  });
  await app.register(swaggerUi, docsOptions);

  if (options.emulator) {
    const { emulator } = options;
    // A request that comes while the emulator saves its initial state waits until it is saved.
    app.addHook('onRequest', (_request, _reply, done) => {
      if (!emulator.starting) return done();
      emulator.starting.then(() => done(), done);
    });
    // Before authentication: a fault answers as a proxy or an overloaded server would.
    emulator.traffic.register(app);
  }
  registerAuth(app, services);
  await registerOperations(app, services, operationsRoutes(services, options.threadMetrics, options.down));
  if (options.operationsOnly) return app;
  await registerOperations(app, services, apiKeysRoutes);
  await registerOperations(app, services, definitionsRoutes);
  await app.register(
    profileDataPlane(services, [
      profilesRoutes,
      consentsRoutes,
      segmentsRoutes,
      importsRoutes,
      exportsRoutes(services),
      transactionalRoutes,
    ]),
  );
  for (const table of [
    adminAccountsRoutes,
    adminIntegrationsRoutes,
    adminSuppressionsRoutes,
    adminApiKeysRoutes,
    adminJobsRoutes,
    adminWebhooksRoutes,
  ])
    await registerOperations(app, services, table);
  await registerOperations(app, services, webhooksRoutes);
  await registerOperations(app, services, activitiesRoutes);
  await registerOperations(app, services, outboxRoutes);
  await registerOperations(app, services, trackingRoutes);
  await registerOperations(app, services, consoleRoutes());
  if (options.emulator) await registerOperations(app, services, emulatorRoutes(options.emulator));
  // Counts are answered here: the count projections of the accounts with live segments are read ahead.
  const stopReading = readProjectionsAhead({
    pool: services.pool,
    feed: services.feed,
    scopeOf: async (accountId) =>
      (await services.accounts.get(accountId)) ? accountScope(services, accountId) : undefined,
    log: (msg, err) => logger.error({ err }, msg),
  });
  app.addHook('onClose', stopReading);
  return app;
}

import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import FindMyWay from 'find-my-way';
import client from 'prom-client';
import type { Services } from '../services.ts';
import { registerAuth } from './plugins/auth.ts';
import { registerBodyParsers } from './plugins/body-parsers.ts';
import { Problem } from '../core/problems.ts';
import { apiKeysRoutes } from './routes/api-keys.ts';
import { definitionsRoutes } from './routes/definitions.ts';
import { adminRoutes } from './routes/admin.ts';
import { operationsRoutes } from './routes/operations.ts';
import { profilesRoutes } from './routes/profiles.ts';
import { consentsRoutes } from './routes/consents.ts';
import { segmentsRoutes } from './routes/segments.ts';
import { importsRoutes } from './routes/imports.ts';
import { profileDataPlane } from './plugins/profile-data.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** SPEC §8: request bodies up to 100 KB. */
export const BODY_LIMIT = 100 * 1024;

export type App = FastifyInstance;

// Bodies are validated as sent: no coercion, no silent removal of unknown keys (STYLE.md practice 4).
// Path and query values are text and are coerced to the declared types.
function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({ coerceTypes: coerce ? 'array' : false, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  addFormats(ajv);
  return ajv;
}

/** The field an Ajv error is about, written as clients write it: `profiles[0].profile_key`. */
function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath.split('/').slice(1).map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (error.keyword === 'required') parts.push((error.params as { missingProperty: string }).missingProperty);
  if (error.keyword === 'additionalProperties') parts.push((error.params as { additionalProperty: string }).additionalProperty);
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query parameter', params: 'path parameter', headers: 'header' };

/** Turns a schema validation failure into the 400 naming the field at fault. */
function validationProblem(error: FastifyError): Problem {
  const first = error.validation![0] as ErrorObject;
  const part = PART_NAMES[error.validationContext ?? 'body'] ?? 'field';
  const field = fieldOf(first);
  if (first.keyword === 'required') return new Problem('AUD-1003', `The ${part} field "${field}" is required`);
  if (first.keyword === 'additionalProperties') return new Problem('AUD-0', `The ${part} field "${field}" is not allowed here`);
  if (first.keyword === 'maxItems') return new Problem('AUD-1007', `The ${part} field "${field}" ${first.message}`);
  const where = field ? `The ${part} field "${field}"` : `The request ${part}`;
  const allowed = first.keyword === 'enum' ? `: ${(first.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}` : '';
  return new Problem('AUD-0', `${where} ${first.message}${allowed}`);
}

/** Maps any error to the problem document it is answered with. */
function toProblem(error: FastifyError | Problem | Error, request: FastifyRequest): Problem {
  if (error instanceof Problem) return error;
  const e = error as FastifyError;
  if (e.validation) return validationProblem(e);
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem(request.routeOptions.config.bodyTooLarge ?? 'AUD-1001', `The request body is over the limit of ${BODY_LIMIT} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Problem('AUD-1005', `Content-Type "${request.headers['content-type'] ?? ''}" is not accepted; send application/json`);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new Problem('AUD-1004', 'The request body is empty; a JSON document was expected');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Problem('AUD-1004', `The request body is not valid JSON: ${e.message}`);
  }
  if (e instanceof SyntaxError) return new Problem('AUD-1004', `The request body is not valid JSON: ${e.message}`);
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) return new Problem('AUD-6', e.message);
  request.log.error({ err: error }, 'unexpected failure');
  return new Problem('AUD-4', `An unexpected error occurred; the service log has it under request id ${request.id}`);
}

function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  for (const [name, value] of Object.entries(problem.headers)) reply.header(name, value);
  return reply.code(problem.status).type('application/problem+json').send(problem.toJSON());
}

/** Builds the HTTP application: parsers, validation, problems, auth, metrics, OpenAPI and every route module. */
export async function buildApp(services: Services, options: { logger?: boolean | object } = {}): Promise<App> {
  const app = Fastify({
    logger: options.logger ?? { level: services.config.logLevel },
    bodyLimit: BODY_LIMIT,
    // Profile keys and discriminators are longer than the default 100 characters.
    routerOptions: { maxParamLength: 2000, ignoreTrailingSlash: true },
    trustProxy: true,
  }).withTypeProvider<TypeBoxTypeProvider>();

  const bodyAjv = makeAjv(false);
  const textAjv = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema));
  registerBodyParsers(app);

  // Every route's path, to tell an unknown path (404) from a known path with another method (405).
  const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 2000 });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') router.on(method as 'GET', route.url, () => {});
    // COMP-12: array query parameters arrive comma-separated or as a repeated key; booleans in
    // any case (Python clients send `True`).
    const query = route.schema?.querystring as { properties?: Record<string, { type?: string }> } | undefined;
    const propertiesOf = (type: string) => Object.entries(query?.properties ?? {}).filter(([, s]) => s.type === type).map(([k]) => k);
    const arrays = propertiesOf('array');
    const booleans = propertiesOf('boolean');
    if (arrays.length > 0 || booleans.length > 0) {
      const normalise = async (request: FastifyRequest) => {
        const q = request.query as Record<string, unknown>;
        for (const name of arrays) {
          const value = q[name];
          if (value !== undefined) q[name] = [value].flat().flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter((v) => v !== '');
        }
        for (const name of booleans) if (typeof q[name] === 'string') q[name] = (q[name] as string).toLowerCase();
      };
      route.preValidation = [normalise, ...[route.preValidation ?? []].flat()];
    }
  });

  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const duration = new client.Histogram({
    name: 'http_request_duration_seconds', help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'], registers: [registry], buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
  });
  app.addHook('onResponse', async (request, reply) => {
    duration.observe({ method: request.method, route: request.routeOptions.url ?? 'unknown', status: reply.statusCode }, reply.elapsedTime / 1000);
  });

  app.setErrorHandler((error: Error, request, reply) => sendProblem(reply, toProblem(error, request)));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    const allowed = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => router.find(m as 'GET', path));
    if (allowed.length > 0) {
      return sendProblem(reply, new Problem('AUD-1006', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`, { allow: allowed.join(', ') }));
    }
    return sendProblem(reply, new Problem('AUD-1', `No route ${request.method} ${path}`));
  });

  await app.register(swagger, {
    openapi: {
      info: { title: 'audience', version: '0.1.0', description: 'Audience and marketing data service' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
      security: [{ bearer: [] }],
    },
  });
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) route.config = { ...route.config, auth: 'none' };
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  registerAuth(app, services);
  await app.register(operationsRoutes(services, registry));
  await app.register(apiKeysRoutes(services));
  await app.register(definitionsRoutes(services));
  await app.register(profileDataPlane(services, [profilesRoutes, consentsRoutes, segmentsRoutes, importsRoutes]));
  await app.register(adminRoutes(services));
  return app;
}

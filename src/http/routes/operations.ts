import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type client from 'prom-client';
import type { Services } from '../../services.ts';
import { PROBLEMS, Problem, problemType, type ProblemCode } from '../../core/problems.ts';
import { responses } from '../schemas/problem.ts';

const ErrorCode = Type.Object({ type: Type.String(), code: Type.String(), title: Type.String(), http_status: Type.Integer() });

/** Health, readiness, metrics, the OpenAPI document and the error code reference. */
export function operationsRoutes(services: Services, registry: client.Registry) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const config = { auth: 'none' as const };
    const tags = ['operations'];
    const security: [] = [];

    app.get('/healthz', { config, schema: { tags, security, summary: 'The process is up', response: responses({ 200: Type.Object({ state: Type.String() }) }) } },
      async () => ({ state: 'up' }));

    app.get('/readyz', { config, schema: { tags, security, summary: 'The process can serve: its database answers', response: responses({ 200: Type.Object({ state: Type.String() }) }) } },
      async () => {
        try {
          await services.pool.query('select 1');
        } catch {
          throw new Problem('AUD-2', 'The database does not answer');
        }
        return { state: 'ready' };
      });

    app.get('/metrics', { config, schema: { tags, security, summary: 'Prometheus metrics', hide: true } }, async (_request, reply) =>
      reply.type(registry.contentType).send(await registry.metrics()));

    app.get('/openapi.json', { config, schema: { tags, security, summary: 'This OpenAPI document', hide: true } }, async () => root.swagger());

    const describe = (code: ProblemCode) => ({ type: problemType(code), code, title: PROBLEMS[code].title, http_status: PROBLEMS[code].status });
    app.get('/errors', { config, schema: { tags, security, summary: 'Every error code', response: responses({ 200: Type.Object({ items: Type.Array(ErrorCode) }) }) } },
      async () => ({ items: (Object.keys(PROBLEMS) as ProblemCode[]).map(describe) }));
    app.get('/errors/:code', { config, schema: { tags, security, summary: 'One error code', params: Type.Object({ code: Type.String() }), response: responses({ 200: ErrorCode }) } },
      async (request) => {
        const code = request.params.code.toUpperCase() as ProblemCode;
        if (!(code in PROBLEMS)) throw new Problem('AUD-1', `No error code "${request.params.code}"`);
        return describe(code);
      });
  };
}

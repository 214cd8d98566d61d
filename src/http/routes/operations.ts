import { Type } from 'typebox';
import client from 'prom-client';
import type { Services } from '../../services.ts';
import type { MetricsJson } from '../../core/metrics.ts';
import { PROBLEMS, Problem, problemType, type ProblemCode } from '../../core/problems.ts';
import { JOB_STATES, jobFigures } from '../../jobs/queue.ts';
import { operation, type OperationTable } from '../operation.ts';
import { databaseUnavailable } from '../problems.ts';
import { partOf } from '../openapi.ts';

const ErrorCode = Type.Object(
  {
    type: Type.String(),
    code: Type.String(),
    title: Type.String(),
    http_status: Type.Integer(),
  },
  { title: 'ErrorCode' },
);

/**
 * The job queue's figures, read from the database at each scrape: the jobs are rows, written by
 * every process, so any process can report them (all report the same; aggregate with max, not sum).
 * A scrape while the database is away shows none of them rather than failing: /readyz says why.
 */
function registerJobGauges(services: Services): void {
  const registers = [services.metrics.registry];
  const read = () => jobFigures(services.pool).catch(() => []);
  new client.Gauge({
    name: 'audience_jobs',
    help: 'Jobs by kind and state: waiting (retries too), running, failed (after their last attempt; GET /admin/jobs?state=failed)',
    labelNames: ['kind', 'state'],
    registers,
    async collect() {
      const figures = await read();
      this.reset();
      for (const kind of new Set(figures.map((f) => f.kind)))
        for (const state of JOB_STATES) this.set({ kind, state }, 0);
      for (const f of figures) this.set({ kind: f.kind, state: f.state }, f.count);
    },
  });
  new client.Gauge({
    name: 'audience_jobs_oldest_waiting_seconds',
    help: 'How long the waiting job due longest ago has waited since it was due, by kind; 0 when none is due (jobs due later, such as the sweep of an export file a day on, do not count)',
    labelNames: ['kind'],
    registers,
    async collect() {
      const figures = await read();
      this.reset();
      for (const f of figures) this.set({ kind: f.kind }, 0);
      for (const f of figures) if (f.state === 'waiting') this.set({ kind: f.kind }, f.overdue_seconds);
    },
  });
}

/**
 * This process's metrics, with its worker thread's merged in by name and labels. Merging follows
 * each metric's cluster aggregator, where `omit` (the process start time) would drop a metric only
 * this thread has: the process's own are taken as they are.
 */
async function exposition(
  registry: client.Registry,
  threadMetrics: (() => Promise<MetricsJson>) | undefined,
): Promise<string> {
  const theirs = threadMetrics ? await threadMetrics() : [];
  if (theirs.length === 0) return registry.metrics();
  const mine = (await registry.getMetricsAsJSON()).map((m) =>
    m.aggregator === 'omit' ? { ...m, aggregator: 'first' as const } : m,
  );
  return client.AggregatorRegistry.aggregate([mine, theirs]).metrics();
}

const describe = (code: ProblemCode) => ({
  type: problemType(code),
  code,
  title: PROBLEMS[code].title,
  http_status: PROBLEMS[code].status,
});

/**
 * Health, readiness, metrics, the OpenAPI document and the error code reference. `down` says why the
 * process no longer serves, when it does not (the program's: stopping, its embedded database gone).
 */
export function operationsRoutes(
  services: Services,
  threadMetrics?: () => Promise<MetricsJson>,
  down: () => string | undefined = () => undefined,
): OperationTable {
  const { registry } = services.metrics;
  registerJobGauges(services);
  return {
    tags: ['operations'],
    operations: [
      operation({
        method: 'GET',
        path: '/healthz',
        summary: 'The process is up',
        description:
          'Answers `{"state": "up"}` while the process runs, without touching the database: a liveness probe. 503 (`AUD-2`) once it cannot serve: it is stopping, or its embedded database could not be started again (the process then exits).',
        response: { 200: Type.Object({ state: Type.String() }) },
        scope: 'public',
        handle: async () => {
          const why = down();
          if (why) throw new Problem('AUD-2', `The process cannot serve: ${why}`);
          return { state: 'up' };
        },
      }),
      operation({
        method: 'GET',
        path: '/readyz',
        summary: 'The process can serve',
        description:
          'Answers `{"state": "ready"}` when the process\'s database answers a query; 503 (`AUD-2`, with `Retry-After`) while it does not. A readiness probe for load balancers.',
        response: { 200: Type.Object({ state: Type.String() }) },
        scope: 'public',
        handle: async ({ db }) => {
          try {
            await db.query('select 1');
          } catch {
            throw databaseUnavailable();
          }
          return { state: 'ready' };
        },
      }),
      // Metrics tell who calls what and how much: behind a token (METRICS_TOKEN, else the operator token).
      operation({
        method: 'GET',
        path: '/metrics',
        summary: 'Prometheus metrics',
        description:
          "The process's metrics in the Prometheus text format, behind the metrics token (METRICS_TOKEN, else the operator token).",
        hide: true,
        scope: 'metrics',
        handle: async ({ reply }) => reply.type(registry.contentType).send(await exposition(registry, threadMetrics)),
      }),
      operation({
        method: 'GET',
        path: '/openapi.json',
        summary: 'This OpenAPI document',
        description: 'The whole OpenAPI document of this service: the public API and the operator API.',
        hide: true,
        scope: 'public',
        handle: async ({ request }) => request.server.swagger(),
      }),
      // The reference at /docs shows the two parts of the API as two definitions.
      ...(['public', 'operator'] as const).map((part) =>
        operation({
          method: 'GET',
          path: `/openapi/${part}.json`,
          summary: `The ${part} part of the OpenAPI document`,
          description: `The operations of the ${part} API, with the tags and components they use.`,
          hide: true,
          scope: 'public',
          handle: async ({ request }) => partOf(request.server.swagger() as object, part),
        }),
      ),
      operation({
        method: 'GET',
        path: '/errors',
        tags: ['errors'],
        summary: 'Every error code',
        description:
          'Every code a problem document can name, with its HTTP status and title. The table is closed: a new kind of refusal gets a new code.',
        response: { 200: Type.Object({ items: Type.Array(ErrorCode) }) },
        scope: 'public',
        handle: async () => ({ items: (Object.keys(PROBLEMS) as ProblemCode[]).map(describe) }),
      }),
      operation({
        method: 'GET',
        path: '/errors/:code',
        tags: ['errors'],
        summary: 'One error code',
        description:
          'The status and title of one error code, the `type` of a problem document (`/errors/AUD-1201`). Case does not matter.',
        errors: ['AUD-1'],
        params: Type.Object({ code: Type.String() }),
        response: { 200: ErrorCode },
        scope: 'public',
        handle: async ({ params }) => {
          const code = params.code.toUpperCase() as ProblemCode;
          if (!(code in PROBLEMS)) throw new Problem('AUD-1', `No error code "${params.code}"`);
          return describe(code);
        },
      }),
    ],
  };
}

import { Type } from 'typebox';
import { DateTime } from '../../../core/schemas.ts';
import { JOB_STATES, jobFigures, listJobs, retryJob } from '../../../jobs/queue.ts';
import { operation, type OperationTable } from '../../operation.ts';
import { AccountId } from '../../schemas/common.ts';

const JobState = Type.Union(
  JOB_STATES.map((s) => Type.Literal(s)),
  { description: 'waiting (a retry too), running, or failed after its last attempt' },
);

const JobSchema = Type.Object({
  account_id: Type.String(),
  job_id: Type.String(),
  kind: Type.String(),
  state: JobState,
  payload: Type.Record(Type.String(), Type.Unknown()),
  attempts: Type.Integer(),
  last_error: Type.Union([Type.String(), Type.Null()], { description: 'The error of the last failed attempt' }),
  created_at: DateTime,
  run_at: DateTime,
  failed_at: Type.Union([DateTime, Type.Null()]),
});

/** The job queue as the operator sees it. */
export const adminJobsRoutes: OperationTable = {
  tags: ['operator'],
  operations: [
    operation({
      method: 'GET',
      path: '/admin/jobs',
      summary: 'List jobs',
      description:
        'The job queue, oldest first, by state and kind: imports, exports, sends, sweeps. Failed jobs stay until their account is deleted.',
      query: Type.Object(
        {
          state: Type.Optional(Type.Union(JOB_STATES.map((s) => Type.Literal(s)))),
          kind: Type.Optional(Type.String()),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ items: Type.Array(JobSchema) }) },
      scope: 'operator',
      handle: async ({ db, query }) => ({ items: await listJobs(db, query) }),
    }),
    operation({
      method: 'GET',
      path: '/admin/jobs/figures',
      summary: 'Count jobs by kind and state',
      description:
        'The queue by kind and state: how many jobs, and how long the one due longest ago has waited (as the metrics count them).',
      response: {
        200: Type.Object({
          items: Type.Array(
            Type.Object({
              kind: Type.String(),
              state: JobState,
              count: Type.Integer(),
              overdue_seconds: Type.Number({
                description: 'Seconds since the job due longest ago was due; 0 when none is',
              }),
            }),
          ),
        }),
      },
      scope: 'operator',
      handle: async ({ db }) => ({ items: await jobFigures(db) }),
    }),
    operation({
      method: 'POST',
      path: '/admin/accounts/:account_id/jobs/:job_id/retry',
      summary: 'Retry a failed job',
      description: 'Runs a failed job again now, its attempts counted anew. Only a failed job can be retried.',
      errors: ['AUD-1015', 'AUD-1016'],
      params: Type.Object({
        account_id: AccountId,
        job_id: Type.String({ pattern: '^[0-9]{1,18}$', description: 'Job id' }),
      }),
      response: { 200: JobSchema },
      scope: 'operator-account',
      transaction: true,
      handle: ({ db, scope, params }) => retryJob(db, scope.accountId, params.job_id),
    }),
  ],
};

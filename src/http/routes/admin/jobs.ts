import { Type } from 'typebox';
import { DateTime } from '../../../core/schemas.ts';
import { JOB_STATES, listJobs } from '../../../jobs/queue.ts';
import { operation, type OperationTable } from '../../operation.ts';

const JobSchema = Type.Object({
  account_id: Type.String(),
  job_id: Type.String(),
  kind: Type.String(),
  state: Type.Union(
    JOB_STATES.map((s) => Type.Literal(s)),
    { description: 'waiting (a retry too), running, or failed after its last attempt' },
  ),
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
  ],
};

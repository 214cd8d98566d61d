import { ProfileParams } from '../../profiles/schemas.ts';
import * as segments from '../../segments/segments.ts';
import {
  Evaluation,
  Matches,
  ProfileCount,
  SegmentCount,
  Trend,
  TrendCounts,
  TrendParams,
} from '../../segments/schemas.ts';
import { operation, type OperationTable } from '../operation.ts';

/** Segment evaluation, trends and counts (SPEC §4.3, §4.7) on the routes of ENDPOINTS.md. */
export const segmentsRoutes: OperationTable = {
  tags: ['segments'],
  operations: [
    operation({
      method: 'POST',
      path: '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/evaluations',
      summary: 'Evaluate a profile against segments',
      params: ProfileParams,
      body: Evaluation,
      response: { 200: Matches },
      scope: 'account',
      handle: ({ db, scope, params, body }) => segments.evaluateProfile(db, scope, params, body),
    }),
    operation({
      method: 'POST',
      path: '/audience/sections/:section_discriminator/segments/:segment_discriminator/trend',
      summary: 'Count matching profiles over time',
      params: TrendParams,
      body: Trend,
      response: { 200: TrendCounts },
      scope: 'account',
      handle: ({ services, scope, params, body }) =>
        segments.segmentTrend(services.pool, scope, params.section_discriminator, params.segment_discriminator, body),
    }),
    operation({
      method: 'POST',
      path: '/audience/profiles/reports/segments/count',
      rateLimit: 'profile_export_requests_per_second',
      summary: 'Count profiles in a segment',
      body: SegmentCount,
      response: { 200: ProfileCount },
      scope: 'account',
      handle: ({ db, scope, body }) => segments.countSegment(db, scope, body),
    }),
  ],
};

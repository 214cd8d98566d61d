import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Services } from '../../services.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
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
import { responses } from '../schemas/problem.ts';

/** Segment evaluation, trends and counts (SPEC §4.3, §4.7) on the routes of ENDPOINTS.md. */
export function segmentsRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['segments'];

    app.post(
      '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/evaluations',
      {
        schema: {
          summary: 'Evaluate a profile against segments',
          tags,
          params: ProfileParams,
          body: Evaluation,
          response: responses({ 200: Matches }),
        },
      },
      async (request) => segments.evaluateProfile(services.pool, await scopeOf(request), request.params, request.body),
    );

    app.post(
      '/audience/sections/:section_discriminator/segments/:segment_discriminator/trend',
      {
        schema: {
          summary: 'Count matching profiles over time',
          tags,
          params: TrendParams,
          body: Trend,
          response: responses({ 200: TrendCounts }),
        },
      },
      async (request) =>
        segments.segmentTrend(
          services.pool,
          await scopeOf(request),
          request.params.section_discriminator,
          request.params.segment_discriminator,
          request.body,
        ),
    );

    app.post(
      '/audience/profiles/reports/segments/count',
      {
        config: { rateLimit: 'profile_export_requests_per_second' },
        schema: {
          summary: 'Count profiles in a segment',
          tags,
          body: SegmentCount,
          response: responses({ 200: ProfileCount }),
        },
      },
      async (request) => segments.countSegment(services.pool, await scopeOf(request), request.body),
    );
  };
}

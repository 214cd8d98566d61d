import { ProfileParams } from '../../profiles/schemas.ts';
import * as segments from '../../segments/segments.ts';
import * as live from '../../segments/live.ts';
import {
  Evaluation,
  LiveParams,
  LiveSegment,
  MakeLive,
  Matches,
  ProfileCount,
  SegmentCount,
  Trend,
  TrendCounts,
  TrendParams,
} from '../../segments/schemas.ts';
import { operation, type OperationTable } from '../operation.ts';
import { NoContent } from '../schemas/problem.ts';
import { SECTION_PROBLEMS } from '../../definitions/definitions.ts';
import { TIME_ZONE_PROBLEMS } from '../../aql/time.ts';
import { EVALUATION_PROBLEMS, SEGMENT_PROBLEMS, TREND_PROBLEMS } from '../../segments/segments.ts';
import { LOCATE_PROBLEMS } from '../../profiles/locate.ts';

/** Segment evaluation, trends and counts (SPEC §4.3, §4.7) on the routes of ENDPOINTS.md. */
export const segmentsRoutes: OperationTable = {
  tags: ['segments'],
  operations: [
    operation({
      method: 'POST',
      path: '/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/evaluations',
      summary: 'Evaluate a profile against segments',
      examples: {
        body: {
          segments: [
            { discriminator: 'com.vendor1.segments.user-created.loyal-customers' },
            { discriminator: 'com.vendor1.segments.user-created.recent-visitors' },
          ],
          time_zone: 'Europe/Berlin',
        },
        response: {
          200: {
            matches: {
              segments: {
                'com.vendor1.segments.user-created.loyal-customers': true,
                'com.vendor1.segments.user-created.recent-visitors': false,
              },
            },
          },
        },
      },
      description:
        'Whether the profile is in each of the named segments (stored ones, at their latest version or at a version given), as `{"matches": {"segments": {…}}}`. The body is JSON or a bracket-key form.',
      errors: [...LOCATE_PROBLEMS, ...EVALUATION_PROBLEMS],
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
      description: 'How many profiles of a section matched a segment at each of 1 to 25 points in time.',
      errors: [...SECTION_PROBLEMS, ...TREND_PROBLEMS],
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
      // A stored segment or a query, not both (the example made from the schema would send both).
      examples: {
        body: {
          section_discriminator: 'com.vendor1.sections.user-created.shop',
          segment: {
            timezone: 'Europe/Berlin',
            segment_discriminator: 'com.vendor1.segments.user-created.frequent-buyers',
          },
          known_profiles: true,
        },
      },
      description: 'How many profiles a stored segment or a segment query holds now, answered at once.',
      errors: [...SECTION_PROBLEMS, ...SEGMENT_PROBLEMS],
      body: SegmentCount,
      response: { 200: ProfileCount },
      scope: 'account',
      handle: ({ services, scope, body }) => segments.countSegment(services.pool, scope, body),
    }),
    operation({
      method: 'PUT',
      path: '/audience/segments/:segment_discriminator/live',
      summary: 'Make a segment live',
      description:
        "The service's extension: the segment's members are kept up to date by every write and by time, counts and trends read them, and each entry and exit is a `segment.entered` or `segment.exited` webhook event. The membership is computed whole by a job after the answer (`size` null until then). Only a key of every section may.",
      errors: [...TIME_ZONE_PROBLEMS, 'AUD-1104', 'AUD-1107', 'AUD-1711'],
      params: LiveParams,
      body: MakeLive,
      response: { 200: LiveSegment },
      scope: 'account',
      transaction: true,
      handle: ({ db, scope, services, params, body }) =>
        live.makeLive(db, services.pool, scope, services.feed, params.segment_discriminator, body),
    }),
    operation({
      method: 'GET',
      path: '/audience/segments/:segment_discriminator/live',
      summary: "A segment's live state",
      description:
        "The service's extension: whether the segment is live, its size and when its membership was brought up to date.",
      errors: ['AUD-1104', 'AUD-1107', 'AUD-1711'],
      params: LiveParams,
      response: { 200: LiveSegment },
      scope: 'account',
      handle: ({ db, scope, services, params }) =>
        live.liveSegment(db, services.pool, scope, params.segment_discriminator),
    }),
    operation({
      method: 'DELETE',
      path: '/audience/segments/:segment_discriminator/live',
      summary: 'Stop keeping a segment live',
      description:
        "The service's extension: the segment is evaluated on demand again; its membership and recorded entries and exits are forgotten.",
      errors: ['AUD-1104', 'AUD-1107'],
      params: LiveParams,
      response: { 204: NoContent },
      scope: 'account',
      transaction: true,
      handle: ({ db, scope, services, params }) =>
        live.stopLive(db, scope, services.feed, params.segment_discriminator),
    }),
  ],
};

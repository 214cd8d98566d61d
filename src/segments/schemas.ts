import { Type } from 'typebox';
import { DateTime } from '../core/schemas.ts';

export const Evaluation = Type.Object(
  {
    segments: Type.Array(
      Type.Object(
        {
          discriminator: Type.String({ description: 'Segment discriminator' }),
          version_id: Type.Optional(Type.String({ description: 'A version of the segment; its latest when omitted' })),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, description: 'The segments to evaluate' },
    ),
    time_zone: Type.String({ description: 'IANA time zone of the evaluation, for time windows' }),
  },
  { additionalProperties: false },
);

export const Matches = Type.Object({
  matches: Type.Object({
    segments: Type.Record(Type.String(), Type.Boolean(), {
      description: 'discriminator (or discriminator|version_id) → whether the profile matches',
    }),
  }),
});

export const TrendParams = Type.Object({
  section_discriminator: Type.String({ description: 'Section discriminator' }),
  segment_discriminator: Type.String({ description: 'Segment discriminator' }),
});

export const Trend = Type.Object(
  {
    sampling_points: Type.Array(DateTime, { minItems: 1, maxItems: 25, description: '1 to 25 UTC date-times' }),
    timezone: Type.String({ description: 'IANA time zone, for time windows' }),
  },
  { additionalProperties: false },
);

/** The extension a count or trend of a live segment answers (docs/aql.md "Live segments"); absent when evaluated. */
export const LiveRead = Type.Object(
  {
    refreshed_at: DateTime,
    evaluated_at: Type.String({
      format: 'date-time',
      description: "The membership's last whole evaluation: when a moving window's time was last applied",
    }),
  },
  {
    description:
      "The service's extension: present when the answer was read from a live segment's membership, brought up to date with the writes at refreshed_at",
  },
);

export const TrendCounts = Type.Object({
  matching_profile_count: Type.Record(Type.String(), Type.Object({ known: Type.Integer(), unknown: Type.Integer() }), {
    description: 'sampling point → counts',
  }),
  live: Type.Optional(LiveRead),
});

export const SegmentChoice = Type.Object(
  {
    timezone: Type.String({ description: 'IANA time zone, for time windows' }),
    segment_discriminator: Type.Optional(Type.String({ description: 'A stored segment (its latest version)' })),
    segment_definition: Type.Optional(Type.String({ description: 'An AQL query, instead of a stored segment' })),
  },
  { additionalProperties: false },
);

export const SegmentCount = Type.Object(
  {
    section_discriminator: Type.String({ description: 'Section discriminator' }),
    segment: SegmentChoice,
    known_profiles: Type.Optional(
      Type.Union([Type.Boolean(), Type.Null()], {
        description: 'true: known profiles only; false: unknown only; null: all',
      }),
    ),
  },
  { additionalProperties: false },
);

export const ProfileCount = Type.Object({
  profile_count: Type.Integer({ description: 'Matching profiles' }),
  live: Type.Optional(LiveRead),
});

export const LiveParams = Type.Object({ segment_discriminator: Type.String({ description: 'Segment discriminator' }) });

export const MakeLive = Type.Object(
  { time_zone: Type.String({ description: 'IANA time zone the membership is evaluated in, for time windows' }) },
  { additionalProperties: false },
);

export const LiveSegment = Type.Object(
  {
    segment_discriminator: Type.String(),
    live: Type.Boolean({ description: 'Whether its members are kept up to date by the writes and by time' }),
    time_zone: Type.Union([Type.String(), Type.Null()], { description: 'The time zone it is evaluated in' }),
    version_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The version its membership is of; null until computed',
    }),
    size: Type.Union([Type.Integer(), Type.Null()], { description: 'Its members now; null until computed' }),
    live_since: Type.Union([DateTime, Type.Null()], { description: 'When it was made live' }),
    refreshed_at: Type.Union([DateTime, Type.Null()], { description: 'When the writes were last applied' }),
    evaluated_at: Type.Union([DateTime, Type.Null()], {
      description: 'When it was last evaluated whole (time applied to a moving window)',
    }),
    projection: Type.Union([Type.Literal('ready'), Type.Literal('reading'), Type.Literal('none')], {
      description:
        "Whether the process that answers counts the account's stored segments from its projection: ready (counts of those it can answer are projected), reading (its columns are being read), none (counts are SQL's)",
    }),
  },
  { title: 'LiveSegment' },
);

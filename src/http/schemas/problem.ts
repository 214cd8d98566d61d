import { Type } from 'typebox';
import type { TSchema } from 'typebox';

/** The problem document of SPEC §7.1 (RFC 9457). */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: 'Error code reference, /errors/AUD-<n>', example: '/errors/AUD-1201' }),
    title: Type.String({ description: 'Short summary of the error code', example: 'Profile not found' }),
    status: Type.Integer({ description: 'HTTP status', example: 404 }),
    status_code: Type.Integer({ description: 'The HTTP status again, for clients that read this name', example: 404 }),
    detail: Type.String({
      description: 'What is wrong, naming the field or value at fault',
      example: 'No profile "customer-4711" in keyspace com.vendor1.integrations.keyspaces.5f2b9c1e.shop',
    }),
    line: Type.Optional(
      Type.Integer({ description: 'An AQL error only: the line of the query where it is, from 1', minimum: 1 }),
    ),
    column: Type.Optional(
      Type.Integer({ description: 'An AQL error only: the column of that line where it is, from 1', minimum: 1 }),
    ),
    offset: Type.Optional(
      Type.Integer({
        description: 'An AQL error only: the offset of the character where it is in the query, from 0',
        minimum: 0,
      }),
    ),
  },
  { title: 'Problem', description: 'A problem document (RFC 9457): every error the service answers' },
);

export const NoContent = Type.Null({ description: 'No content' });

/** The keyword of a `FileAnswer`, which /openapi.json writes as the answer's media types. */
export const FILE_MEDIA_TYPES = 'x-file-media-types';

/**
 * An answer that is a file in one of `mediaTypes`: /openapi.json declares each with a body of bytes
 * (`format: binary`), which the typed clients read as bytes or a stream, not as JSON.
 */
export function FileAnswer(description: string, mediaTypes: readonly string[]): TSchema {
  return Type.Unknown({ description, [FILE_MEDIA_TYPES]: [...mediaTypes] });
}

/** An error answer: a problem document, in its own media type (what `sendProblem` sends). */
const ProblemResponse = {
  description: 'A problem document (RFC 9457)',
  content: { 'application/problem+json': { schema: ProblemSchema } },
};

/** A route's declared answers: its successes, and problem documents for every error. */
export function responses(success: Record<number, TSchema>): Record<string, TSchema | typeof ProblemResponse> {
  return { ...success, '4xx': ProblemResponse, '5xx': ProblemResponse };
}

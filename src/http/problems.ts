import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorObject } from 'ajv';
import { Problem } from '../core/problems.ts';
import { isDatabaseUnavailable } from '../store/pool.ts';
import { noteProblem } from './logging.ts';

// Node's http module as CommonJS gives it: an ESM import of node:http builds the module's whole
// namespace, whose lazy WebSocket getter loads Node's fetch implementation (undici; about 2 MB of
// heap in every process, docs/benchmarks.md "Idle memory").
const { STATUS_CODES } = process.getBuiltinModule('node:http');

// The writing of problem documents (SPEC §7.1): domain code throws core's Problem; Fastify's own
// errors (validation, body parsing, limits) are mapped here; a database that does not answer is a
// 503 to retry; anything else is a 500 that names the request id under which the log keeps the cause.

/**
 * Seconds a client waits before it tries again while the database does not answer: about what
 * PostgreSQL takes to restart (docs/operating.md "When the database restarts").
 */
export const DATABASE_RETRY_AFTER_S = 5;

/** The 503 of a database that went away or is not back yet, with Retry-After. */
export function databaseUnavailable(): Problem {
  return new Problem('AUD-2', `The database does not answer; retry in ${DATABASE_RETRY_AFTER_S} seconds`, {
    'retry-after': String(DATABASE_RETRY_AFTER_S),
  });
}

/** The field an Ajv error is about, written as clients write it: `profiles[0].profile_key`. */
function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (error.keyword === 'required') parts.push((error.params as { missingProperty: string }).missingProperty);
  if (error.keyword === 'additionalProperties')
    parts.push((error.params as { additionalProperty: string }).additionalProperty);
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

const PART_NAMES: Record<string, string> = {
  body: 'body',
  querystring: 'query parameter',
  params: 'path parameter',
  headers: 'header',
};

/** Turns a schema validation failure into the 400 naming the field at fault. */
function validationProblem(error: FastifyError): Problem {
  const first = error.validation![0] as ErrorObject;
  const part = PART_NAMES[error.validationContext ?? 'body'] ?? 'field';
  const field = fieldOf(first);
  if (first.keyword === 'required') return new Problem('AUD-1003', `The ${part} field "${field}" is required`);
  if (first.keyword === 'additionalProperties')
    return new Problem('AUD-0', `The ${part} field "${field}" is not allowed here`);
  if (first.keyword === 'maxItems') return new Problem('AUD-1007', `The ${part} field "${field}" ${first.message}`);
  const where = field ? `The ${part} field "${field}"` : `The request ${part}`;
  if (first.keyword === 'enum')
    return new Problem(
      'AUD-0',
      `${where} must be one of ${(first.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`,
    );
  return new Problem('AUD-0', `${where} ${first.message}`);
}

/** Maps any error to the problem document it is answered with; `bodyLimit` is the app's body limit in bytes. */
export function toProblem(error: FastifyError | Problem | Error, request: FastifyRequest, bodyLimit: number): Problem {
  if (error instanceof Problem) return error;
  const e = error as FastifyError;
  if (e.validation) return validationProblem(e);
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem(
        request.routeOptions.config.bodyTooLarge ?? 'AUD-1001',
        `The request body is over the limit of ${bodyLimit} bytes`,
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Problem(
        'AUD-1005',
        `Content-Type "${request.headers['content-type'] ?? ''}" is not accepted; send application/json`,
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new Problem('AUD-1004', 'The request body is empty; a JSON document was expected');
    case 'FST_ERR_BAD_URL':
      return new Problem(
        'AUD-0',
        `The path "${request.url.split('?')[0]}" is not a valid URL: a % must start an escape such as %40`,
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Problem('AUD-1004', `The request body is not valid JSON: ${e.message}`);
  }
  if (e instanceof SyntaxError) return new Problem('AUD-1004', `The request body is not valid JSON: ${e.message}`);
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
    return new Problem('AUD-6', e.message);
  if (isDatabaseUnavailable(error)) {
    request.log.warn({ err: error }, 'database unavailable');
    return databaseUnavailable();
  }
  request.log.error({ err: error }, 'unexpected failure');
  return new Problem('AUD-4', `An unexpected error occurred; the service log has it under request id ${request.id}`);
}

/** Writes a problem as `application/problem+json`, with its headers (Retry-After, Allow, WWW-Authenticate). */
export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  for (const [name, value] of Object.entries(problem.headers)) reply.header(name, value);
  noteProblem(reply, problem.code);
  return reply.code(problem.status).type('application/problem+json').send(problem.toJSON());
}

/**
 * Answers a request that Node's HTTP parser refused before Fastify saw it (a request line or
 * headers over 16 KB, bytes that are no HTTP, a request that took too long) with a problem
 * document, like every other error, then closes the connection.
 */
export function writeClientProblem(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) return;
  const problem =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new Problem(
          'AUD-1010',
          'The request line and headers are over the 16 KB the server reads: send a shorter URL, or fewer or shorter headers',
        )
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new Problem('AUD-1011', 'The request did not arrive in time')
        : new Problem(
            'AUD-0',
            'The request is not valid HTTP: a path with bytes outside ASCII (percent-encode them), a malformed header or request line',
          );
  const body = JSON.stringify(problem.toJSON());
  socket.end(
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

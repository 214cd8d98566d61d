import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

export const REDACTED = '[redacted]';

/**
 * A logger of the program (JSON lines, pino) at `level`, to `stream` (standard output by default).
 * `redact` guards what log calls might pass: credentials in headers or bodies, and the `detail` of
 * database errors, which quotes the values of a violated constraint. The HTTP transport adds the
 * serializers of its requests and answers (src/http/logging.ts); the worker thread logs its jobs.
 */
export function createLogger(
  level: string,
  stream?: DestinationStream,
  serializers: LoggerOptions['serializers'] = {},
): Logger {
  const options: LoggerOptions = {
    level,
    serializers,
    redact: {
      paths: [
        'headers.authorization',
        'headers.cookie',
        '*.headers.authorization',
        '*.headers.cookie',
        'client_secret',
        '*.client_secret',
        'err.detail',
      ],
      censor: REDACTED,
    },
  };
  return stream ? pino(options, stream) : pino(options);
}

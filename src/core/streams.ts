import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * Pipes `source` through `steps` (at least one) while `write` consumes the last step (a store writing it), and
 * settles once the write has. The first cause of a failure is thrown: a stream's own error (a
 * failing read, a refusal of a step), else the write's. A failed write ends the read, which then
 * gives back what it holds (a database connection, a request's body).
 */
export async function pipeWhileWriting(
  source: Readable,
  steps: Duplex[],
  write: (piped: Duplex) => Promise<unknown>,
): Promise<void> {
  const last = steps[steps.length - 1];
  // Handled at once: a read that fails while the write goes on is no unhandled rejection.
  const read = pipeline([source, ...steps]).then(
    () => undefined,
    (err: unknown) => err,
  );
  try {
    await write(last);
  } catch (err) {
    // Ended with the write's error, unless a stream failed first: then the read's error is the cause.
    last.destroy(err as Error);
    throw (await read) ?? err;
  }
  const failed = await read;
  if (failed) throw failed;
}

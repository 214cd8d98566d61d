// Waiting for a state a test cannot be told of (a job done, a line logged, a record written): read it
// until it holds. One copy for every test that polls, with the bound and the message in one place.

/**
 * How long a start, or a state the program is to reach (a job done, a line logged), may take before
 * the test says it never came: an outer bound for a busy machine, which stretches seconds into minutes.
 */
export const START_BOUND_MS = 180_000;

/**
 * The bound for a state of a server in the test's own process: below vitest's test timeout
 * (120 s, vitest.config.ts), so that a test that waits in vain says what for, and what it last read.
 */
export const STATE_BOUND_MS = 60_000;

/**
 * Reads `read` every 50 ms until `check` holds of what it answers, and answers that; fails naming
 * `what` and the last value read once `boundMs` has passed.
 */
export async function readWhen<T>(
  what: string,
  read: () => Promise<T> | T,
  check: (value: T) => boolean,
  boundMs = START_BOUND_MS,
): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`waited in vain (${boundMs / 1000} s) for ${what}: last read ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls `check` until it holds; fails naming `what` once `boundMs` has passed. */
export async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  boundMs = START_BOUND_MS,
): Promise<void> {
  await readWhen(what, check, (held) => held, boundMs);
}

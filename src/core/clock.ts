/** Milliseconds since the Unix epoch. Injected wherever time decides behaviour, so tests can move it. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/**
 * The clock of the emulator (docs/emulator.md "Clock"): the system's time moved by an offset that
 * can be set and advanced, or stopped at one instant. Every part that reads `read` (tokens, upload
 * windows, exports' expiry, rate limits, the worker's due jobs) moves with it.
 */
export class MovableClock {
  private offset = 0;
  private stoppedAt: number | undefined;
  readonly read: Clock = () => this.stoppedAt ?? Date.now() + this.offset;

  /** Sets the time to `at`; `frozen` stops it there (or lets it run again when false). */
  set(at: number, frozen = this.stoppedAt !== undefined): void {
    this.offset = at - Date.now();
    this.stoppedAt = frozen ? at : undefined;
  }

  advance(ms: number): void {
    this.set(this.read() + ms);
  }

  /** Back to the system's time, running. */
  reset(): void {
    this.offset = 0;
    this.stoppedAt = undefined;
  }

  get frozen(): boolean {
    return this.stoppedAt !== undefined;
  }
}

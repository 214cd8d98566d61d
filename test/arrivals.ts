/** What a test server has received, in order, and a wait for a number of arrivals (test/callbacks.ts, test/smtp.ts). */
export class Arrivals<T> {
  readonly items: T[] = [];
  private readonly waiters = new Set<() => void>();

  /** What arrives, for the message of a wait that fails ("requests", "messages"). */
  private readonly noun: string;

  constructor(noun: string) {
    this.noun = noun;
  }

  add(item: T): void {
    this.items.push(item);
    for (const wake of this.waiters) wake();
  }

  /** Resolves once `count` items have arrived; fails after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 15_000): Promise<T[]> {
    if (this.items.length >= count) return this.items;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${this.items.length} of ${count} ${this.noun} arrived within ${timeoutMs} ms`));
      }, timeoutMs);
      const check = () => {
        if (this.items.length < count) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
    return this.items;
  }
}

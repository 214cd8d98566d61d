import v8 from 'node:v8';
import vm from 'node:vm';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * Gives back the memory a thread's start-up took, once it is over: one full garbage collection
 * that compacts and shrinks the heap (V8's "last resort" collection, as on a low-memory
 * notification; 30–100 ms, before the thread takes any work).
 *
 * Loading and compiling the modules, migrating and building the routes allocate fast, so V8 grows
 * the young generation to its limit (2 × 32 MB semi-spaces on a large machine) and keeps it: V8
 * shrinks it only at a collection that sees a low allocation rate, and an idle server allocates
 * too little to collect at all (V8's memory reducer keeps finding the start-up's "high" rate,
 * docs/benchmarks.md "Idle memory"). Load grows it again as it needs; its limit is left as it is,
 * since a smaller one costs requests.
 *
 * Node has no function for it without `--expose-gc`, so the flag is set for as long as it takes to
 * create a context that holds V8's `gc`, and unset again: no other context gets it.
 */
export function settleHeap(): void {
  let gc = (globalThis as { gc?: Gc }).gc;
  if (typeof gc !== 'function') {
    v8.setFlagsFromString('--expose-gc');
    try {
      gc = vm.runInNewContext('gc') as Gc;
    } finally {
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/**
 * Settles the heap (settleHeap) when the thread goes idle after a busy spell: every `everyMs`, the
 * share of that time its event loop was busy; above `busy`, it was working, and at the first
 * quiet check after that the heap is settled, once. Load grows the young generation to its limit
 * (32 MB semi-spaces) and V8 does not always shrink it after: idle after a minute of mixed traffic
 * with exports, the API thread's stayed at 16 or 32 MB in some runs and went back to 1 MB in others
 * (docs/benchmarks.md "Memory after load"). A quiet server does no collection that would find out.
 *
 * The thread's start counts as a busy spell, checked `startMs` after the call: its garbage goes at
 * the first quiet moment once the thread serves, not before it is ready (a full collection of 30–100 ms
 * of CPU that a supervisor or a test waiting for the start would otherwise wait for too).
 */
export function settleWhenIdle(everyMs = 30_000, busy = 0.02, startMs = 1000): () => void {
  let last = performance.eventLoopUtilization();
  let worked = true;
  // The start's garbage not settled yet.
  let starting = true;
  let timer: NodeJS.Timeout;
  const check = () => {
    const now = performance.eventLoopUtilization();
    const share = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (share > busy) worked = true;
    else if (worked) {
      worked = false;
      starting = false;
      settleHeap();
      // The collection itself is not work.
      last = performance.eventLoopUtilization();
    }
    // Until the start's garbage is gone, a quiet moment is looked for as often as at first.
    timer = setTimeout(check, starting ? startMs : everyMs);
    timer.unref();
  };
  timer = setTimeout(check, startMs);
  timer.unref();
  return () => clearTimeout(timer);
}

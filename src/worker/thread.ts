import { Worker as Thread } from 'node:worker_threads';
import type { Config } from '../config.ts';
import { compileCacheEnvironment } from '../core/compile-cache.ts';
import type { MetricsJson } from '../core/metrics.ts';

/** What the worker thread needs to build its own services (src/worker/thread-entry.ts). */
export interface ThreadData {
  config: Config;
  databaseUrl: string;
  secrets: { adminToken: string; serverSecret: string };
}

/**
 * The heap of the worker thread, in MB. Ingestion holds 30–50 MB of live objects whatever the file
 * size, but allocates fast, and V8 grows a young generation to 128 MB on a large machine: with it,
 * the process held 470–580 MB during a 50 MB import; with 16 MB, 360 MB, for about a fifth more CPU
 * in the thread (docs/benchmarks.md "Imports"). The old generation's limit only guards against a
 * leak (a tighter one made V8 collect far more often); the API's heap keeps V8's defaults.
 */
const HEAP_LIMITS = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 512 };
/** Wait before a thread that died (out of memory, a bug) is started again; its job resumes then. */
const RESTART_MS = 1000;
/** How long a scrape waits for the thread's metrics; a scrape must answer even if the thread is stuck. */
const METRICS_WAIT_MS = 3000;

export interface WorkerThread {
  /** Stops taking jobs, waits for the running one, and ends the thread. */
  stop(): Promise<void>;
  /** The thread's metrics (job runs, import rows, its pool); none while it starts again. */
  metrics(): Promise<MetricsJson>;
}

/**
 * Runs the worker role (src/worker/worker.ts) in a thread of its own: jobs such as imports do not
 * hold up the API's event loop, and their heap has its own, smaller limits. A thread that dies is
 * started again (and again, a second apart, while it fails to start); the job it had is taken up
 * when its lease runs out. `entry` is the thread's module (tests give one of their own).
 */
export async function startWorkerThread(
  data: ThreadData,
  log: (msg: string, err?: unknown) => void,
  entry = new URL('./thread-entry.ts', import.meta.url),
): Promise<WorkerThread> {
  let stopping = false;
  let current: Thread | undefined;
  const ask = (thread: Thread) => {
    const ended = new Promise((resolve) => thread.once('exit', resolve));
    thread.postMessage('stop');
    return ended;
  };
  const restart = () =>
    setTimeout(() => {
      if (stopping) return;
      spawn().then(
        (thread) => {
          current = thread;
          // Stopped while it started.
          if (stopping) void ask(thread);
        },
        (err) => {
          log('worker thread did not start again', err);
          restart();
        },
      );
    }, RESTART_MS).unref();
  const spawn = () =>
    new Promise<Thread>((resolve, reject) => {
      const thread = new Thread(entry, {
        workerData: data,
        resourceLimits: HEAP_LIMITS,
        // The process's compile cache, from the thread's first module on (src/core/compile-cache.ts).
        env: { ...process.env, ...compileCacheEnvironment() },
      });
      let ready = false;
      thread.on('message', (message) => {
        if (message !== 'ready') return;
        ready = true;
        resolve(thread);
      });
      thread.on('error', (err) => (ready ? log('worker thread failed', err) : reject(err)));
      thread.on('exit', (code) => {
        if (!ready) return reject(new Error(`the worker thread ended while starting (exit code ${code})`));
        if (current === thread) current = undefined;
        if (stopping) return;
        log(`worker thread ended (exit code ${code}); starting it again`);
        restart();
      });
    });
  current = await spawn();
  let asked = 0;
  return {
    async stop() {
      stopping = true;
      if (current) await ask(current);
    },
    metrics() {
      const thread = current;
      if (!thread) return Promise.resolve([]);
      const id = ++asked;
      return new Promise((resolve) => {
        const answer = (message: { metrics?: number; json?: MetricsJson }) => {
          if (message?.metrics !== id) return;
          clearTimeout(timeout);
          thread.off('message', answer);
          resolve(message.json ?? []);
        };
        const timeout = setTimeout(() => {
          thread.off('message', answer);
          resolve([]);
        }, METRICS_WAIT_MS);
        thread.on('message', answer);
        thread.postMessage({ metrics: id });
      });
    },
  };
}

/**
 * `npm run bench:webhooks`: webhook deliveries through the real server to a receiver on loopback,
 * for docs/benchmarks.md "Webhooks".
 *
 * 1. Starts a receiver in this process (node:http: answers 204, notes when each webhook-id
 *    arrived) and the real server (`node src/main.js serve`, API and worker thread, embedded
 *    PostgreSQL) with CALLBACKS_ALLOW_PRIVATE=true, as the receiver is on loopback; the demo
 *    account's request limits lifted. Creates BENCH_WEBHOOK_PROFILES profiles in the Shop section,
 *    then subscribes the receiver to consent.changed.
 * 2. Live: BENCH_WEBHOOK_WRITERS writers send BENCH_WEBHOOK_WRITES consent changes (opt-in and
 *    opt-out in turn, spread over the profiles), each naming its write in `source`. The lag of a
 *    write is from its answer (the commit of the change and its event) to its delivery's arrival:
 *    p50, p99, max. Deliveries/s: deliveries over the time from the first write to the last arrival.
 * 3. Backlog: every delivery of the run replayed at once (one request), and the time until the
 *    receiver has them all again: the delivery rate with no write beside it.
 *
 * Settings from the environment: BENCH_WEBHOOK_WRITES (5000), BENCH_WEBHOOK_PROFILES (500),
 * BENCH_WEBHOOK_WRITERS (16).
 */
import http from 'node:http';
import os from 'node:os';
import { log, onCleanup, runBench, startAudience, table } from './harness.ts';

const WRITES = Math.max(100, Number(process.env.BENCH_WEBHOOK_WRITES ?? 5000));
const PROFILES = Math.max(1, Number(process.env.BENCH_WEBHOOK_PROFILES ?? 500));
const WRITERS = Math.max(1, Number(process.env.BENCH_WEBHOOK_WRITERS ?? 16));
const SHOP = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';
const TOPIC = 'com.vendor1.topics.user-created.weekly-news';
const CHANNEL = 'com.vendor1.channels.email';

/** A receiver that answers 204 and notes the arrival of each delivery: webhook-id → its body's source and time. */
async function startReceiver() {
  const arrivals: { id: string; source: string; at: number }[] = [];
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { data: { source: string } };
      arrivals.push({ id: String(req.headers['webhook-id']), source: body.data.source, at });
      res.writeHead(204).end();
      for (const wake of waiters) wake();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    /** Resolves once `count` deliveries have arrived; rejects after `timeoutMs`. */
    async waitFor(count: number, timeoutMs: number): Promise<void> {
      const until = performance.now() + timeoutMs;
      while (arrivals.length < count) {
        if (performance.now() > until) throw new Error(`${arrivals.length} of ${count} deliveries arrived`);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(wake, 1000);
          waiters.add(wake);
        });
      }
    },
  };
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

await runBench(900_000 + WRITES * 50, async () => {
  process.env.CALLBACKS_ALLOW_PRIVATE = 'true';
  const receiver = await startReceiver();
  const server = await startAudience(['requests_per_second', 'token_requests_per_minute']);
  const headers = { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  log(`creating ${PROFILES} profiles`);
  const keys = Array.from({ length: PROFILES }, (_, i) => `bench-${i}@example.com`);
  for (let i = 0; i < keys.length; i += 50)
    await Promise.all(
      keys
        .slice(i, i + 50)
        .map((key) => call('POST', `/audience/keyspaces/${EMAIL}/sections/${SHOP}/profiles`, { profile_key: key })),
    );
  const endpoint = await call('POST', '/webhooks', { url: receiver.url, event_types: ['consent.changed'] });

  log(`live: ${WRITES} consent changes by ${WRITERS} writers`);
  const answered = new Array<number>(WRITES);
  let next = 0;
  const started = performance.now();
  const since = new Date(Date.now() - 1000).toISOString();
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      for (let n = next++; n < WRITES; n = next++) {
        const key = keys[n % PROFILES];
        const type = Math.floor(n / PROFILES) % 2 === 0 ? 'opt-in' : 'opt-out';
        await call(
          'POST',
          `/v2/audience/keyspaces/${EMAIL}/profiles/${encodeURIComponent(key)}/sections/${SHOP}/consents`,
          { topic_discriminator: TOPIC, channel_discriminator: CHANNEL, type, reason: 'bench', source: `write-${n}` },
        );
        answered[n] = performance.now();
      }
    }),
  );
  const written = performance.now();
  await receiver.waitFor(WRITES, 600_000);
  const live = receiver.arrivals.slice(0, WRITES);
  const lags = live.map((a) => a.at - answered[Number(a.source.slice(6))]).sort((x, y) => x - y);
  const lastArrival = Math.max(...live.map((a) => a.at));
  const liveSeconds = (lastArrival - started) / 1000;

  log('backlog: every delivery replayed at once');
  const until = new Date(Date.now() + 60_000).toISOString();
  const replayStarted = performance.now();
  const { replayed } = await call('POST', `/webhooks/${endpoint.id}/replay`, { since, until });
  await receiver.waitFor(WRITES + replayed, 600_000);
  const replaySeconds = (performance.now() - replayStarted) / 1000;
  const replayedIds = new Set(receiver.arrivals.slice(WRITES).map((a) => a.id));

  const ms = (v: number) => v.toFixed(0);
  console.log(
    `\nWebhooks: ${WRITES} consent changes (${PROFILES} profiles, ${WRITERS} writers), one endpoint on loopback; ${os.cpus().length} cores\n`,
  );
  console.log(
    table([
      ['phase', 'deliveries', 'seconds', 'deliveries/s', 'writes/s', 'lag p50 ms', 'lag p99 ms', 'lag max ms'],
      [
        'live (writes and deliveries)',
        String(live.length),
        liveSeconds.toFixed(1),
        (live.length / liveSeconds).toFixed(0),
        (WRITES / ((written - started) / 1000)).toFixed(0),
        ms(quantile(lags, 0.5)),
        ms(quantile(lags, 0.99)),
        ms(lags.at(-1)!),
      ],
      [
        'backlog (replay of all)',
        String(replayed),
        replaySeconds.toFixed(1),
        (replayed / replaySeconds).toFixed(0),
        '-',
        '-',
        '-',
        '-',
      ],
    ]),
  );
  if (replayedIds.size !== replayed) throw new Error(`${replayedIds.size} distinct ids of ${replayed} replayed`);
});

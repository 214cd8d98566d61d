/**
 * `npm run bench:mail`: transactional sends through the real server to an SMTP server on
 * loopback, for docs/benchmarks.md "Transactional mail".
 *
 * 1. Starts an SMTP sink in this process (smtp-server: takes every message, counts it, keeps
 *    nothing) and the real server (`node src/main.js serve`, API and worker, embedded PostgreSQL)
 *    with SMTP_URL pointing at it, the demo account's request limits lifted.
 * 2. Creates a transactional email activity in the Shop section (subject, pre-header, an HTML body
 *    with two links and variables; text made from the HTML), and sends BENCH_MAIL_RECIPIENTS
 *    sends, one per recipient, as a warm-up that also creates their profiles; waits for their delivery.
 * 3. Measured: BENCH_MAIL_SENDS sends through POST …/transactions by autocannon (BENCH_CONNECTIONS
 *    connections) to the recipients in turn. Accepted/s: sends over the time until the last 201;
 *    delivered/s: messages the sink took over the time from the first send to the last message.
 * 4. The baseline, in the same run: a bare nodemailer loop (the same pooled SMTP transport, five
 *    connections) sending the source of a message the server sent, as many times, to the same sink.
 *
 * Settings from the environment: BENCH_MAIL_SENDS (10000), BENCH_MAIL_RECIPIENTS (500),
 * BENCH_CONNECTIONS (50), BENCH_SERVER_ARGS.
 */
import os from 'node:os';
import nodemailer from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import {
  CONNECTIONS,
  cpuMsOf,
  log,
  onCleanup,
  postgresCpuMs,
  runBench,
  sampleWaits,
  startAudience,
  table,
  type Autocannon,
  type Result,
} from './harness.ts';

const SENDS = Math.max(100, Number(process.env.BENCH_MAIL_SENDS ?? 10_000));
const RECIPIENTS = Math.max(1, Number(process.env.BENCH_MAIL_RECIPIENTS ?? 500));
const SHOP = 'com.vendor1.sections.user-created.shop';
const EMAIL = 'com.vendor1.keyspaces.email';
const DEADLINE_MS = 600_000 + SENDS * 30;
/** The figures the issue asks of this machine. */
const TARGET = { accepted: 1000, delivered: 300 };

/** An SMTP server that takes every message and counts it; `last` is when the last one ended. */
async function startSink() {
  const sink = {
    count: 0,
    last: 0,
    firstSource: undefined as Buffer | undefined,
    port: 0,
    waiters: new Set<() => void>(),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    hideSTARTTLS: true,
    logger: false,
    size: 20 * 1024 * 1024,
    // At clean-up the server's pooled SMTP connections are still open: close them after 1 s, not smtp-server's 30 s.
    closeTimeout: 1000,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => {
        if (!sink.firstSource) chunks.push(c);
      });
      stream.on('end', () => {
        if (!sink.firstSource) sink.firstSource = Buffer.concat(chunks);
        sink.count++;
        sink.last = Date.now();
        for (const wake of sink.waiters) wake();
        callback(null, 'Queued');
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.port = (server.server.address() as { port: number }).port;
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  /** Resolves once the sink has taken `count` messages; rejects after `timeoutMs`. */
  const waitFor = (count: number, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (sink.count < count) return;
        clearTimeout(timer);
        sink.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        sink.waiters.delete(check);
        reject(new Error(`${sink.count} of ${count} messages arrived within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      sink.waiters.add(check);
      check();
    });
  return { sink, waitFor };
}

const ACTIVITY = {
  kind: 'email',
  section_discriminator: SHOP,
  name: 'Order confirmation',
  status: 'active',
  transactional: true,
  email_subject: 'Your order {{ order_id }}',
  preheader: 'Thanks for your order, {{ name }}',
  sender_name: 'The Shop',
  sender_email_address: 'orders@shop.example',
  html:
    '<html><body><h1>Thank you, {{ name }}</h1><p>Order <b>{{ order_id }}</b> of {{ items | size }} items, {{ total }} EUR.</p>' +
    '<ul>{% for item in items %}<li>{{ item.name }}: {{ item.price }}</li>{% endfor %}</ul>' +
    '<p><a href="https://shop.example/orders/{{ order_id }}">Your order</a> · <a href="https://shop.example/help">Help</a></p>' +
    '<p><a href="{{ unsubscribe_url }}">Unsubscribe</a></p></body></html>',
};

/** The body of the n-th send. */
function sendBody(n: number): string {
  const key = `customer${n % RECIPIENTS}@bench.example`;
  return JSON.stringify({
    keyspace_discriminator: EMAIL,
    profile_key: key,
    to_name: `Customer ${n % RECIPIENTS}`,
    to_email_address: key,
    variables: {
      name: `Customer ${n % RECIPIENTS}`,
      order_id: `B-${n}`,
      total: 42.5,
      items: [
        { name: 'Tea', price: 4.5 },
        { name: 'Cup', price: 38 },
      ],
    },
  });
}

await runBench(DEADLINE_MS, async (autocannon: Autocannon) => {
  const cpus = os.cpus();
  console.log(
    `machine: ${cpus.length} CPUs, ${cpus[0]?.model ?? 'unknown model'}; ${os.platform()} ${os.release()}; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; node ${process.version}`,
  );
  const { sink, waitFor } = await startSink();
  process.env.SMTP_URL = `smtp://127.0.0.1:${sink.port}`;
  const server = await startAudience([
    'requests_per_second',
    'token_requests_per_minute',
    'profile_key_operations_per_second',
  ]);
  const admin = await fetch(`${server.url}/admin/accounts/${server.accountId}/activities/order-confirmation`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(ACTIVITY),
  });
  if (admin.status !== 201) throw new Error(`activity: ${admin.status} ${await admin.text()}`);
  const path = `/emails/sections/${SHOP}/activities/transactional/order-confirmation/transactions`;
  const headers = { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' };

  /** `count` sends by autocannon, the n-th with sendBody(offset + n). */
  const sendMany = async (
    count: number,
    offset: number,
  ): Promise<{ result: Result; seconds: number; started: number }> => {
    let n = offset;
    const started = Date.now();
    const result = await (autocannon as unknown as (o: object) => PromiseLike<Result>)({
      url: server.url,
      connections: CONNECTIONS,
      pipelining: 1,
      timeout: 30,
      amount: count,
      requests: [{ method: 'POST', path, headers, setupRequest: (r: object) => ({ ...r, body: sendBody(n++) }) }],
    });
    return { result, seconds: (Date.now() - started) / 1000, started };
  };
  const failed = (r: Result) => r.non2xx + r.errors + r.timeouts;

  log(`warm-up: ${RECIPIENTS} sends, one per recipient`);
  const warm = await sendMany(RECIPIENTS, 0);
  if (failed(warm.result) > 0) throw new Error(`warm-up: ${failed(warm.result)} sends failed`);
  await waitFor(RECIPIENTS, 120_000);

  log(`measured: ${SENDS} sends`);
  const cpuBefore = await cpuMsOf(server.pid);
  // PostgreSQL's processes, those that end during the run included (the API's connections close once idle after the accepts).
  const pgBefore = await postgresCpuMs(server.dataDir);
  const benchCpuBefore = process.cpuUsage();
  const loadBefore = os.loadavg()[0];
  const delivered0 = sink.count;
  const waits = await sampleWaits(server);
  const sent = await sendMany(SENDS, RECIPIENTS);
  if (failed(sent.result) > 0)
    throw new Error(
      `${failed(sent.result)} of ${SENDS} sends failed (non-2xx ${sent.result.non2xx}, errors ${sent.result.errors}, timeouts ${sent.result.timeouts})`,
    );
  await waitFor(delivered0 + SENDS, SENDS * 20);
  const deliveredSeconds = (sink.last - sent.started) / 1000;
  const waitRows = await waits.stop();
  const cpuAfter = await cpuMsOf(server.pid);
  const pgAfter = await postgresCpuMs(server.dataDir);
  const benchCpu = process.cpuUsage(benchCpuBefore);
  const wall = deliveredSeconds;
  const serverCpu =
    cpuAfter && cpuBefore ? { own: (cpuAfter.own - cpuBefore.own) / 1000, db: (pgAfter - pgBefore) / 1000 } : undefined;
  const loadDuring = os.loadavg()[0];

  log(`baseline: a bare nodemailer loop, ${SENDS} messages`);
  const source = sink.firstSource!;
  const bare = nodemailer.createTransport({
    host: '127.0.0.1',
    port: sink.port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: 5,
  });
  const bareStart = Date.now();
  const bare0 = sink.count;
  let next = 0;
  // As many messages in flight as the pool takes at once, like the server's worker.
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < SENDS) {
        next++;
        await bare.sendMail({ envelope: { from: 'orders@shop.example', to: ['customer@bench.example'] }, raw: source });
      }
    }),
  );
  await waitFor(bare0 + SENDS, 120_000);
  const bareSeconds = (sink.last - bareStart) / 1000;
  bare.close();

  const accepted = SENDS / sent.seconds;
  const delivered = SENDS / deliveredSeconds;
  const bareRate = SENDS / bareSeconds;
  const figures = [
    ['figure', 'value', 'target'],
    ['sends accepted (201) per s', accepted.toFixed(0), `≥ ${TARGET.accepted}`],
    ['send latency p50 / p99 ms', `${sent.result.latency.p50} / ${sent.result.latency.p99}`, ''],
    ['messages delivered per s (first send to last message)', delivered.toFixed(0), `≥ ${TARGET.delivered}`],
    ['bare nodemailer loop, messages per s', bareRate.toFixed(0), ''],
    ['delivered / bare nodemailer', delivered && bareRate ? (delivered / bareRate).toFixed(2) : 'n/a', ''],
    [
      'server CPU s (process / its PostgreSQL)',
      serverCpu ? `${serverCpu.own.toFixed(1)} / ${serverCpu.db.toFixed(1)}` : 'n/a',
      '',
    ],
    [
      'server CPU per send, ms (process / its PostgreSQL)',
      serverCpu
        ? `${((1000 * serverCpu.own) / SENDS).toFixed(2)} / ${((1000 * serverCpu.db) / SENDS).toFixed(2)}`
        : 'n/a',
      '',
    ],
    [
      'this process CPU share (autocannon and the SMTP sink)',
      `${((100 * (benchCpu.user + benchCpu.system)) / 1e6 / wall).toFixed(0)}% of a core`,
      '',
    ],
    ['load average (1 min) before / after', `${loadBefore.toFixed(2)} / ${loadDuring.toFixed(2)}`, ''],
    ['message size, bytes', String(source.length), ''],
  ];
  console.log(`\n${SENDS} sends to ${RECIPIENTS} recipients, ${CONNECTIONS} connections\n`);
  console.log(table(figures));
  console.log();
  console.log(
    table([
      ['database connections while sending (state or wait event | statement)', 'connections, on average'],
      ...waitRows,
    ]),
  );
  if (accepted < TARGET.accepted || delivered < TARGET.delivered) log('below the target figures');
});

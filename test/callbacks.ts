import { Arrivals } from './arrivals.ts';
import http from 'node:http';
import { afterAll, beforeAll, beforeEach } from 'vitest';

/** A request the receiver got. */
export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON when the body is JSON, else the text. */
  body: unknown;
  /** The body as it came (a signature covers these bytes). */
  text: string;
}

/** How the receiver answers a request: a status and headers, or `hang` to never answer. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

/**
 * A real HTTP server on a loopback port that records what it receives (callbacks, DESIGN.md
 * "Test servers"), answering as `answer` says (200 by default).
 */
export class CallbackReceiver {
  private readonly arrivals = new Arrivals<Received>('requests');
  readonly received: Received[] = this.arrivals.items;
  answer: (request: Received) => Answer = () => ({ status: 200 });
  private readonly server: http.Server;
  readonly port: number;

  private constructor(server: http.Server, port: number) {
    this.server = server;
    this.port = port;
  }

  static async start(host = '127.0.0.1'): Promise<CallbackReceiver> {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    const receiver = new CallbackReceiver(server, (server.address() as { port: number }).port);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: kept as text.
        }
        const received = { method: req.method!, path: req.url!, headers: req.headers, body, text };
        receiver.arrivals.add(received);
        const answer = receiver.answer(received);
        if (answer === 'hang') return;
        res.writeHead(answer.status, answer.headers).end(answer.body);
      });
    });
    return receiver;
  }

  /** The receiver's URL for `path` on `host` (a name or an address literal). */
  url(path = '/callback', host = '127.0.0.1'): string {
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.port}${path}`;
  }

  /** Resolves once `count` requests have arrived; fails after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]> {
    return this.arrivals.waitFor(count, timeoutMs);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * The set-up of a test file (or of a describe block, called inside it) over a receiver: starts
 * one before its tests and hands it to `ready`, empties it and has it answer 200 before each test,
 * and closes it after the tests.
 */
export function receiverForTests(ready: (receiver: CallbackReceiver) => void): void {
  let receiver: CallbackReceiver | undefined;
  beforeAll(async () => {
    receiver = await CallbackReceiver.start();
    ready(receiver);
  });
  beforeEach(() => {
    receiver!.received.length = 0;
    receiver!.answer = () => ({ status: 200 });
  });
  afterAll(async () => {
    await receiver?.close();
  });
}

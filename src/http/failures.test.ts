import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { SHOP, TestServer, type Response, expectProblem, testDatabase } from '../../test/app.ts';
import { readConfig } from '../config.ts';
import { createServices } from '../services.ts';
import { createPool } from '../store/pool.ts';
import { buildApp } from './app.ts';
import { createLogger } from './logging.ts';
import { server, httpServer, SHOP_SECTION, TAGS } from '../../test/http-server.ts';

httpServer();

describe('ERR-19: an unexpected failure', () => {
  it('answers 500 as a problem document with AUD-4 when the program ended its own pool (ERR-19, ERR-01..04)', async () => {
    const broken = await TestServer.start();
    const { token } = await broken.login(SHOP);
    // The pool is ended for real: every query of this server now fails, though the database is
    // there. The change feed still holds its client, so end() settles only once the services are closed below.
    const ended = broken.services.pool.end();
    try {
      // Creating a tag needs a transaction, which no cache can answer.
      const res = await broken.request('POST', TAGS, { token, body: { name: 'Lost' } });
      expectProblem(res, 500, 'AUD-4');
      expect(res.body.detail).not.toMatch(/pool/i);
      expect(res.headers.get('retry-after')).toBeNull();
    } finally {
      await broken.app.close();
      await broken.services.close();
      await ended;
    }
  });
});

/** A TCP proxy in front of PostgreSQL, which the test stops (connections cut, new ones refused) and starts again. */
class DatabaseProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

describe('ERR-19: a database that goes away', () => {
  it('answers 503 AUD-2 with Retry-After while the database does not answer, and serves again once it does (ERR-19, ERR-01..04)', async () => {
    const database = new URL(await testDatabase());
    const proxy = new DatabaseProxy({ host: database.hostname, port: Number(database.port) });
    await proxy.start();
    const through = new URL(database);
    through.host = `127.0.0.1:${proxy.port}`;
    // A server as TestServer starts one, on the same database, but through the proxy.
    const config = readConfig({ LOG_LEVEL: 'silent', DATA_DIR: server.services.config.dataDir });
    const pool = createPool(through.toString(), 4);
    const services = await createServices(config, pool, Date.now, {
      adminToken: 'unused',
      serverSecret: 'test-server-secret',
    });
    const app = await buildApp(services, { logger: createLogger('silent') });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    const call = async (method: string, path: string, body?: unknown): Promise<Response> => {
      const res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : text };
    };
    const { token } = await server.login(SHOP);
    try {
      expect((await call('POST', TAGS, { name: 'Before' })).status).toBe(201);
      await proxy.stop();
      // Cut connections (the pool's and the change feed's), then refused ones: both are the database gone.
      for (const [method, path, body] of [
        ['POST', TAGS, { name: 'Lost' }],
        ['GET', '/readyz'],
        ['GET', `/audience/sections/${SHOP_SECTION}/tags`],
      ] as const) {
        const res = await call(method, path, body);
        expectProblem(res, 503, 'AUD-2');
        expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        expect(res.body.detail).toMatch(/database/);
      }
      await proxy.start();
      expect((await call('POST', TAGS, { name: 'After' })).status).toBe(201);
      expect((await call('GET', '/readyz')).status).toBe(200);
    } finally {
      await app.close();
      await proxy.stop();
      await services.close();
      await pool.end();
    }
  });
});

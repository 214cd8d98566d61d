/**
 * The reference server of the benches (bench/harness.ts starts it as a child process): a bare
 * `node:http` server on a loopback port that answers every GET with the body in BENCH_BODY (JSON)
 * and every other request, once its body is read, with 204. It sends its port to its parent.
 */
import http from 'node:http';
import type net from 'node:net';

const body = Buffer.from(process.env.BENCH_BODY ?? '{}');
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
    res.end(body);
    return;
  }
  req.resume();
  req.on('end', () => res.writeHead(204).end());
});
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as net.AddressInfo).port }));
process.on('SIGTERM', () => process.exit(0));
process.on('disconnect', () => process.exit(0));

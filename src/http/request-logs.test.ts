import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { SHOP, TestServer } from '../../test/app.ts';
import { SHOP_SECTION } from '../../test/http-server.ts';
import { BATCH_MS } from './logging.ts';

// The batch of request lines pending is written by a timer of BATCH_MS set at its first line: a
// timer set later for longer fires after it.
const batchWritten = () => sleep(BATCH_MS + 1);

/**
 * A server logging at `info` into `lines`; `written()` answers, once the batch pending is written,
 * the log lines written since its last call, parsed (a write may hold several lines).
 */
async function loggedServer() {
  const lines: string[] = [];
  const server = await TestServer.start({ LOG_LEVEL: 'info' }, { log: { write: (line) => void lines.push(line) } });
  let seen = 0;
  const written = async () => {
    await batchWritten();
    const text = lines.slice(seen).join('');
    seen = lines.length;
    return text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line));
  };
  return { server, lines, written };
}

describe('request logs', () => {
  it('are one line per request at its answer, with the route, status and time, leaving out profile keys, addresses, tokens and client secrets', async () => {
    const { server: logged, lines, written } = await loggedServer();
    try {
      const { accountId, clientId, clientSecret, token } = await logged.login(SHOP);
      await written();
      const email = 'com.vendor1.keyspaces.email';
      await logged.request(
        'GET',
        `/audience/keyspaces/${email}/profiles/ann.logged@example.com/sections/${SHOP_SECTION}/attributes`,
        { token },
      );
      await logged.request(
        'GET',
        `/v2/audience/keyspaces/com.vendor1.keyspaces.mobile/profiles/+4791234567/sections/${SHOP_SECTION}/consents?suppression_channel_discriminator=com.vendor1.channels.email&suppression_address=bo.logged%40example.com`,
        { token },
      );
      await logged.request(
        'GET',
        '/audience/channels/com.vendor1.channels.email/addresses/cy.logged@example.com/suppressions',
        { token },
      );
      await logged.request(
        'POST',
        `/oauth/token?grant_type=client_credentials&client_id=${clientId}&client_secret=${clientSecret}`,
      );
      await logged.admin(
        'DELETE',
        `/admin/accounts/${accountId}/suppressions/com.vendor1.channels.email/dee.logged@example.com`,
      );
      const parsed = await written();
      // Fastify's own line at the start of each request is left out: the one line has it all.
      expect(parsed.filter((l) => l.msg === 'incoming request')).toEqual([]);
      const requests = parsed.filter((l) => l.msg === 'request completed');
      expect(requests).toHaveLength(5);
      for (const l of requests)
        expect(l).toMatchObject({
          level: 30,
          reqId: expect.any(String),
          req: { method: expect.stringMatching(/^(GET|POST|DELETE)$/), url: expect.any(String) },
          res: { statusCode: expect.any(Number) },
          responseTime: expect.any(Number),
        });
      // A refused request names its error code and the account it was for.
      const suppressions = requests.find((l) => l.req.url.startsWith('/audience/channels/'));
      expect(suppressions.res).toMatchObject({ statusCode: 404, code: expect.stringMatching(/^AUD-\d+$/) });
      const urls = requests.map((l) => `${l.req.url} ${l.req.route ?? '(no route)'}`);
      expect(urls).toEqual(
        expect.arrayContaining([
          `/audience/keyspaces/${email}/profiles/[redacted]/sections/${SHOP_SECTION}/attributes /audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/attributes`,
          `/v2/audience/keyspaces/com.vendor1.keyspaces.mobile/profiles/[redacted]/sections/${SHOP_SECTION}/consents?suppression_channel_discriminator=[redacted]&suppression_address=[redacted] /v2/audience/keyspaces/:keyspace_discriminator/profiles/:profile_key/sections/:section_discriminator/consents`,
          '/audience/channels/com.vendor1.channels.email/addresses/[redacted]/suppressions (no route)',
          // The token route declares no query parameters: none is kept.
          '/oauth/token /oauth/token',
          `/admin/accounts/${accountId}/suppressions/com.vendor1.channels.email/[redacted] /admin/accounts/:account_id/suppressions/:channel_discriminator/:address`,
        ]),
      );
      const all = lines.join('');
      for (const secret of [
        'logged@example.com',
        'logged%40example.com',
        '4791234567',
        clientSecret,
        token,
        logged.services.adminToken,
      ])
        expect(all).not.toContain(secret);
    } finally {
      await logged.close();
    }
  });
  it("names each request's own client, host and User-Agent, also among the requests of one keep-alive connection", async () => {
    const { server: logged, written } = await loggedServer();
    try {
      await written();
      // Each differs from the one before in one header the fields come from, but the second.
      const clients = [
        { 'user-agent': 'shop-connector/1.0' },
        { 'user-agent': 'shop-connector/1.0' },
        { 'user-agent': 'cms-plugin/2.3' },
        { 'user-agent': 'cms-plugin/2.3', 'x-forwarded-for': '203.0.113.7' },
        { 'user-agent': 'cms-plugin/2.3', 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': 'audience.example' },
        { 'user-agent': 'cms-plugin/2.3', 'x-forwarded-for': '203.0.113.7' },
        { 'user-agent': 'cms-plugin/2.3', 'x-forwarded-for': '203.0.113.7', host: 'other.example' },
      ];
      // One connection for all of them.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (const headers of clients)
        await new Promise<void>((resolve, reject) =>
          http
            .get(`${logged.url}/healthz`, { agent, headers }, (res) => res.resume().on('end', resolve))
            .on('error', reject),
        );
      agent.destroy();
      const requests = (await written()).filter((l) => l.msg === 'request completed' && l.req.url === '/healthz');
      const local = expect.stringMatching(/^127\.0\.0\.1:\d+$/);
      expect(requests.map((l) => [l.req.userAgent, l.req.remoteAddress, l.req.host])).toEqual([
        ['shop-connector/1.0', '127.0.0.1', local],
        ['shop-connector/1.0', '127.0.0.1', local],
        ['cms-plugin/2.3', '127.0.0.1', local],
        ['cms-plugin/2.3', '203.0.113.7', local],
        ['cms-plugin/2.3', '203.0.113.7', 'audience.example'],
        ['cms-plugin/2.3', '203.0.113.7', local],
        ['cms-plugin/2.3', '203.0.113.7', 'other.example'],
      ]);
      expect(new Set(requests.map((l) => l.req.remotePort)).size).toBe(1);
    } finally {
      await logged.close();
    }
  });
  it("are JSON whatever a value holds: quotes, backslashes, bytes beyond ASCII, and a path near the limit of a request's head", async () => {
    const { server: logged, written } = await loggedServer();
    try {
      await written();
      // Paths no route matches are kept as they came (but for what may be a key). Bytes beyond
      // ASCII, which HTTP refuses in a path, come in a header.
      const paths = [
        '/nowhere/plain',
        '/nowhere/"quoted"',
        '/nowhere/back\\slash',
        // Near the limit of a request's head: at six bytes a character, its line might not fit a batch.
        `/nowhere/${'"\\x'.repeat(4000)}`,
        '/nowhere/after',
      ];
      const userAgent = 'caf\u00e9 "client"';
      const { hostname, port } = new URL(logged.url);
      for (const path of paths)
        await new Promise<void>((resolve, reject) =>
          http
            .get({ hostname, port, path, headers: { 'user-agent': userAgent } }, (res) =>
              res.resume().on('end', resolve),
            )
            .on('error', reject),
        );
      const requests = (await written()).filter((l) => l.msg === 'request completed');
      expect(requests).toHaveLength(paths.length);
      // Compared one by one: a difference in the long one is better not printed whole.
      paths.forEach((path, i) =>
        expect(requests[i].req.url === path, `line ${i}: ${requests[i].req.url.slice(0, 80)}`).toBe(true),
      );
      for (const l of requests) {
        expect(l.res.statusCode).toBe(404);
        expect(l.responseTime).toBeGreaterThanOrEqual(0);
        expect(l.req.userAgent).toBe(userAgent);
      }
    } finally {
      await logged.close();
    }
  });
});

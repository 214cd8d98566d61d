import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CallbackReceiver } from '../../test/callbacks.ts';
import { Outbound, OutboundError, refusedRange } from './outbound.ts';

// The address filter of calls to addresses that clients choose (docs/security.md "Outbound
// calls"), against a real HTTP server on loopback, which the filter must keep the service from.

describe('refusedRange', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.100.100.200', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['192.0.0.192', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['ff02::1', 'multicast'],
    ['64:ff9b::7f00:1', 'rfc6052'],
    ['2002:7f00:1::', '6to4'],
    ['2001::1', 'teredo'],
    // IPv4-mapped IPv6 addresses are judged as the IPv4 address they map, in either notation.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'linkLocal'],
    ['::ffff:10.0.0.1', 'private'],
    // IPv4-compatible and other IPv6 outside global unicast.
    ['::7f00:1', 'notGlobal'],
    ['fec0::1', 'deprecatedSiteLocal'],
  ])('refuses %s (%s)', (address, range) => {
    expect(refusedRange(address)).toBe(range);
  });

  it.each(['8.8.8.8', '93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8'])(
    'lets the public address %s through',
    (address) => {
      expect(refusedRange(address)).toBeUndefined();
    },
  );
});

describe('Outbound', () => {
  let receiver: CallbackReceiver;
  let filtered: Outbound;
  let open: Outbound;
  beforeAll(async () => {
    receiver = await CallbackReceiver.start();
    filtered = new Outbound({ allowPrivate: false });
    open = new Outbound({ allowPrivate: true });
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.answer = () => ({ status: 200 });
  });
  afterAll(async () => {
    await filtered?.close();
    await open?.close();
    await receiver?.close();
  });

  /** The error of a call that must fail. */
  async function failure(call: Promise<unknown>): Promise<OutboundError> {
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OutboundError);
    return err as OutboundError;
  }

  it('posts JSON and answers the status, with private targets allowed', async () => {
    receiver.answer = () => ({ status: 204 });
    expect(await open.postJson(receiver.url('/hook?a=1'), { code: 100 }, { timeoutMs: 5000 })).toBe(204);
    expect(receiver.received).toEqual([
      expect.objectContaining({ method: 'POST', path: '/hook?a=1', body: { code: 100 } }),
    ]);
    expect(receiver.received[0].headers['content-type']).toBe('application/json');
  });

  it('refuses loopback by literal (IPv4, IPv6, IPv4-mapped) and by name, before connecting: nothing arrives', async () => {
    // An IPv4-mapped literal reaches an IPv4 listener on a dual-stack host: there, the filter is what stops it.
    const mapped = await new Promise<boolean>((resolve) => {
      const probe = net.connect({ host: '::ffff:127.0.0.1', port: receiver.port });
      probe.on('connect', () => {
        probe.destroy();
        resolve(true);
      });
      probe.on('error', () => resolve(false));
    });
    const urls = [
      receiver.url('/a', '127.0.0.1'),
      receiver.url('/b', '::ffff:127.0.0.1'),
      receiver.url('/c', '::ffff:7f00:1'),
      receiver.url('/d', 'localhost'),
      receiver.url('/e', '::1'),
    ];
    for (const url of urls) {
      const err = await failure(filtered.postJson(url, { code: 100 }, { timeoutMs: 5000 }));
      expect(err.transient, url).toBe(false);
      expect(err.message, url).toMatch(/is a loopback address, which callbacks may not reach/);
    }
    expect(receiver.received).toEqual([]);
    // The same URLs do reach the receiver when private targets are allowed (so that the refusals above were the filter's).
    expect(await open.postJson(receiver.url('/a', '127.0.0.1'), {}, { timeoutMs: 5000 })).toBe(200);
    expect(await open.postJson(receiver.url('/d', 'localhost'), {}, { timeoutMs: 5000 })).toBe(200);
    if (mapped) expect(await open.postJson(receiver.url('/b', '::ffff:127.0.0.1'), {}, { timeoutMs: 5000 })).toBe(200);
  });

  it('refuses private, link-local (metadata), CGNAT and unique-local literals', async () => {
    for (const [host, words] of [
      ['10.0.0.1', 'a private address'],
      ['169.254.169.254', 'a link-local address'],
      ['100.100.100.200', 'a carrier-grade NAT address'],
      ['fd00:ec2::254', 'a unique-local address'],
      ['0.0.0.0', 'the unspecified address'],
    ]) {
      const err = await failure(filtered.postJson(receiver.url('/', host), {}, { timeoutMs: 5000 }));
      expect(err.message).toContain(words);
      expect(err.transient).toBe(false);
    }
  });

  it('does not follow a redirect: the 3xx is the answer, and its Location is not called', async () => {
    receiver.answer = (r) =>
      r.path === '/moved' ? { status: 302, headers: { location: receiver.url('/target') } } : { status: 200 };
    expect(await open.postJson(receiver.url('/moved'), {}, { timeoutMs: 5000 })).toBe(302);
    expect(receiver.received.map((r) => r.path)).toEqual(['/moved']);
  });

  it('speaks only http and https', async () => {
    for (const url of ['ftp://example.com/x', 'file:///etc/passwd', 'gopher://127.0.0.1:70/']) {
      const err = await failure(open.postJson(url, {}, { timeoutMs: 5000 }));
      expect(err.message).toMatch(/is not http or https/);
      expect(err.transient).toBe(false);
    }
  });

  it('a server that does not answer in time, and a closed port, are transient failures', async () => {
    receiver.answer = () => 'hang';
    const late = await failure(open.postJson(receiver.url('/slow'), {}, { timeoutMs: 300 }));
    expect(late.message).toMatch(/no answer from 127\.0\.0\.1:\d+ within 0\.3 s/);
    expect(late.transient).toBe(true);
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as net.AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const refused = await failure(open.postJson(`http://127.0.0.1:${closed}/`, {}, { timeoutMs: 5000 }));
    expect(refused.message).toMatch(/could not be reached \(ECONNREFUSED\)/);
    expect(refused.transient).toBe(true);
  });
});

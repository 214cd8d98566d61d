import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, request } from 'undici';

/**
 * Outbound HTTP to addresses that clients choose (export callbacks, webhook deliveries; docs/security.md "Outbound
 * calls"). Such a call is a server-side request forgery surface: without a filter, a client could
 * make the service post to its own database port, to a neighbour on the private network or to the
 * cloud's metadata service. So, unless the operator allows private targets:
 *
 * - only public unicast addresses are called: IPv4 outside loopback, private, link-local (where
 *   cloud metadata services answer), CGNAT (100.64.0.0/10, Alibaba's metadata at 100.100.100.200)
 *   and the other special-purpose ranges; IPv6 in global unicast 2000::/3 outside its special
 *   ranges (unique-local fc00::/7 with AWS's metadata at fd00:ec2::254, link-local, NAT64,
 *   6to4, Teredo …). An IPv4-mapped IPv6 address is judged as the IPv4 address it maps;
 * - the check is made on the address the socket connects to, in the connector: an IP literal
 *   before connecting, a name in the DNS lookup the connection itself uses, so that a name
 *   answering a public address to a first lookup and a private one to the next (DNS rebinding)
 *   gains nothing;
 * - redirects are not followed (a 3xx is an answer like any other), and only http and https are spoken.
 *
 * This is a library: it knows nothing of the areas that use it.
 */

/** Why a call did not get an answer. `transient`: trying again later may succeed. */
export class OutboundError extends Error {
  readonly transient: boolean;
  constructor(message: string, transient: boolean, options?: ErrorOptions) {
    super(message, options);
    this.transient = transient;
  }
}

/** An address the filter refuses: thrown by the connector, so that no connection is attempted. */
class RefusedAddress extends OutboundError {
  constructor(host: string, address: string, range: string) {
    super(
      `${host === address ? address : `${host} (${address})`} is ${RANGE_WORDS[range] ?? `a special-purpose address (${range})`}, which callbacks may not reach`,
      false,
    );
  }
}

const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  linkLocal: 'a link-local address (where cloud metadata services answer)',
  carrierGradeNat: 'a carrier-grade NAT address',
  uniqueLocal: 'a unique-local address',
  unspecified: 'the unspecified address',
  notGlobal: 'an IPv6 address outside global unicast (2000::/3)',
};

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * The range that keeps an IP address from being called, or undefined for a public unicast address.
 * Range names are those of ipaddr.js (`loopback`, `private`, `linkLocal`, `carrierGradeNat`,
 * `uniqueLocal` …), plus `notGlobal` for IPv6 outside 2000::/3 (IPv4-compatible ::a.b.c.d included).
 */
export function refusedRange(address: string): string | undefined {
  // process() turns an IPv4-mapped IPv6 address (::ffff:127.0.0.1, ::ffff:7f00:1) into its IPv4 address.
  const ip = ipaddr.process(address);
  const range = ip.range();
  if (range !== 'unicast') return range;
  if (ip.kind() === 'ipv6' && !ip.match(GLOBAL_UNICAST_V6)) return 'notGlobal';
  return undefined;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** dns.lookup that answers only the addresses the filter lets through, and fails when none is left. */
function filteredLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const allowed = addresses.filter((a) => refusedRange(a.address) === undefined);
    if (allowed.length === 0) {
      const first = addresses[0];
      return callback(
        new RefusedAddress(hostname, first.address, refusedRange(first.address)!) as NodeJS.ErrnoException,
        '',
      );
    }
    if (options.all) return callback(null, allowed);
    callback(null, allowed[0].address, allowed[0].family);
  });
}

/** A connector that refuses IP literals outside public unicast, and resolves names through the filtered lookup. */
function filteredConnector(): buildConnector.connector {
  const connect = buildConnector({ lookup: filteredLookup });
  return (options, callback) => {
    const host = options.hostname.replace(/^\[(.*)\]$/, '$1');
    const range = net.isIP(host) ? refusedRange(host) : undefined;
    if (range !== undefined) return callback(new RefusedAddress(host, host, range), null);
    connect(options, callback);
  };
}

/** The refusal behind an error of undici, which may wrap the connector's error. */
function refusalOf(err: unknown): RefusedAddress | undefined {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof RefusedAddress) return e;
  return undefined;
}

/** Calls addresses that clients choose, through the address filter unless `allowPrivate`. */
export class Outbound {
  private readonly agent: Agent;

  constructor(options: { allowPrivate: boolean }) {
    this.agent = new Agent(options.allowPrivate ? {} : { connect: filteredConnector() });
  }

  /**
   * POSTs `body` as JSON to `url` and answers the status (a redirect's too: none is followed); the
   * answer's body is read and dropped. Throws an OutboundError when there is no answer: a URL that
   * is not http or https, an address the filter refuses (not transient), a name that does not
   * resolve, a refused or broken connection, or no answer within `timeoutMs` (transient).
   */
  async postJson(url: string, body: unknown, options: { timeoutMs: number }): Promise<number> {
    return this.post(url, JSON.stringify(body), { timeoutMs: options.timeoutMs });
  }

  /**
   * POSTs `body`, JSON text already serialised (a signature covers these exact bytes), with
   * `headers` besides the content type and user agent; answers and throws as `postJson`.
   */
  async post(
    url: string,
    body: string,
    options: { timeoutMs: number; headers?: Record<string, string> },
  ): Promise<number> {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      throw new OutboundError(`"${url}" is not a URL`, false);
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:')
      throw new OutboundError(`the scheme of "${url}" is not http or https`, false);
    try {
      const answer = await request(target, {
        method: 'POST',
        headers: { ...options.headers, 'content-type': 'application/json', 'user-agent': 'audience' },
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      await answer.body.dump();
      return answer.statusCode;
    } catch (err) {
      const refused = refusalOf(err);
      if (refused) throw refused;
      if ((err as Error).name === 'TimeoutError')
        throw new OutboundError(`no answer from ${target.host} within ${options.timeoutMs / 1000} s`, true, {
          cause: err,
        });
      const code = (err as NodeJS.ErrnoException).code;
      throw new OutboundError(`${target.host} could not be reached (${code ?? (err as Error).message})`, true, {
        cause: err,
      });
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

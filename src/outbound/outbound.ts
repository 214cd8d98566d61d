import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Agent, buildConnector } from 'undici';
import { BODY_KEPT, type OutboundTap } from './recorder.ts';

/**
 * Outbound HTTP to addresses that clients choose (export callbacks, webhook deliveries;
 * docs/security.md "Outbound calls"). Such a call is a server-side request forgery surface: without a filter, a client could
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
function filteredConnector(build: typeof buildConnector): buildConnector.connector {
  const connect = build({ lookup: filteredLookup });
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
  /**
   * undici, loaded at the first call rather than at the start (0.1–0.2 s of CPU in each thread
   * that has an Outbound, docs/benchmarks.md "Start"): most processes never call out.
   */
  private agent: Promise<{ agent: Agent; request: typeof import('undici').request }> | undefined;
  private readonly allowPrivate: boolean;
  private readonly tap: OutboundTap | undefined;

  /** `tap`: records every call and may answer in the target's place (the emulator's, src/outbound/recorder.ts). */
  constructor(options: { allowPrivate: boolean; tap?: OutboundTap }) {
    this.allowPrivate = options.allowPrivate;
    this.tap = options.tap;
  }

  private client() {
    this.agent ??= import('undici').then(({ Agent, buildConnector, request }) => ({
      agent: new Agent(this.allowPrivate ? {} : { connect: filteredConnector(buildConnector) }),
      request,
    }));
    return this.agent;
  }

  /**
   * POSTs `body` as JSON to `url` and answers the status (a redirect's too: none is followed); the
   * answer's body is read and dropped. Throws an OutboundError when there is no answer: a URL that
   * is not http or https, an address the filter refuses (not transient), a name that does not
   * resolve, a refused or broken connection, or no answer within `timeoutMs` (transient).
   */
  async postJson(url: string, body: unknown, options: { timeoutMs: number; kind?: string }): Promise<number> {
    return this.post(url, JSON.stringify(body), options);
  }

  /**
   * POSTs `body`, JSON text already serialised (a signature covers these exact bytes), with
   * `headers` besides the content type and user agent; answers and throws as `postJson`. With the
   * emulator's tap, the call is recorded under `kind` and may be faulted.
   */
  async post(
    url: string,
    body: string,
    options: { timeoutMs: number; headers?: Record<string, string>; kind?: string },
  ): Promise<number> {
    if (!this.tap) return (await this.send(url, body, options)).status;
    const answer = await this.tap.call(
      {
        kind: options.kind ?? 'callback',
        method: 'POST',
        target: url,
        body: JSON.parse(body),
        ...(options.headers ? { headers: options.headers } : {}),
      },
      {
        deliver: () => this.send(url, body, options),
        answerOf: (a) => a,
        faulted: (outcome) => {
          if ('refused' in outcome)
            throw new OutboundError(`${url} refused the connection (the emulator's fault ${outcome.fault})`, true);
          return { status: outcome.status, body: '' };
        },
      },
    );
    return answer.status;
  }

  private async send(
    url: string,
    body: string,
    options: { timeoutMs: number; headers?: Record<string, string> },
  ): Promise<{ status: number; body: string }> {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      throw new OutboundError(`"${url}" is not a URL`, false);
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:')
      throw new OutboundError(`the scheme of "${url}" is not http or https`, false);
    const { agent, request } = await this.client();
    try {
      const answer = await request(target, {
        method: 'POST',
        headers: { ...options.headers, 'content-type': 'application/json', 'user-agent': 'audience' },
        body,
        dispatcher: agent,
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      // The answer's text up to what a record keeps; the rest is dropped unread.
      let text = '';
      if (this.tap) {
        for await (const chunk of answer.body) {
          text += String(chunk);
          if (text.length >= BODY_KEPT) break;
        }
      }
      await answer.body.dump();
      return { status: answer.statusCode, body: text.slice(0, BODY_KEPT) };
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
    if (this.agent) await (await this.agent).agent.close();
  }
}

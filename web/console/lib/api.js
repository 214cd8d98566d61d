// The console's one way to the data: the service's own HTTP interface, with the session's token.
import { session, signOut, touch } from './session.js';

/** A refusal of the service: its status and problem document. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(typeof problem === 'object' && problem ? problem.detail || problem.title : String(problem || status));
    this.status = status;
    this.problem = problem;
  }

  /** Whether asking again later may succeed: no answer, a server's or a proxy's failure, a rate limit. */
  get transient() {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

/** No answer at all: the service is stopped, restarting or out of reach. */
export function unreachable() {
  return new ApiError(0, {
    title: 'The service is not answering',
    detail: 'It may be stopped or restarting, or the network is down. Try again in a moment.',
  });
}

/**
 * An answer that is not the service's (no problem document: an HTML page of a proxy or a load
 * balancer in front of it), as a sentence: its status and reason, never its markup.
 */
export function foreignAnswer(res) {
  const reason = res.statusText ? ` (${res.statusText})` : '';
  return new ApiError(res.status, {
    title:
      res.status >= 500
        ? `A proxy in front of the service answered ${res.status}`
        : `An unexpected answer: ${res.status}`,
    detail: `Not the service's own answer${reason}: the service behind it may be stopped, restarting or overloaded. Try again in a moment.`,
  });
}

/** An answer's body as JSON, or undefined when it is not JSON (a proxy's page). */
export function parseJson(res, text) {
  if (!text || !/json/.test(res.headers.get('content-type') || '')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** fetch, with no answer at all turned into the ApiError that says so. */
export async function request(url, init) {
  try {
    return await fetch(url, init);
  } catch {
    throw unreachable();
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A route's address: its `{parameters}` replaced by their values, encoded, and the query's defined
 * values appended.
 * @param {string} route
 * @param {{ params?: Record<string, unknown>, query?: Record<string, unknown> }} [options]
 */
export function addressOf(route, options = {}) {
  const address = route.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(String(options.params?.[name])));
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(options.query ?? {}))
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  const search = query.toString();
  return search ? `${address}?${search}` : address;
}

/**
 * Calls the service at a route of its OpenAPI document with the parameters, query and body its
 * operation takes (typed by lib/routes.d.ts): JSON in and out; refusals throw an ApiError.
 * @type {import('./routes.d.ts').Call}
 */
export const api = (method, route, options) =>
  /** @type {Promise<any>} */ (send(method, addressOf(route, /** @type {any} */ (options)), options?.body));

/**
 * Sends a request to an address: refusals throw an ApiError, a refused token signs out. A read
 * refused by a rate limit (a profile page reads several parts of each section, and the account's
 * limit of profile key operations per second applies to the console as to any client) is asked
 * again after the Retry-After the service gave, a few times.
 * @param {string} method
 * @param {string} address
 * @param {unknown} [body]
 * @returns {Promise<any>}
 */
export async function send(method, address, body, retries = 4) {
  const current = session();
  if (!current) throw new ApiError(401, { detail: 'Signed out' });
  touch();
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${current.token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(address, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (res.status === 429 && method === 'GET' && retries > 0) {
    await sleep(Number(res.headers.get('retry-after') || 1) * 1000);
    return send(method, address, body, retries - 1);
  }
  const text = await res.text();
  if (res.ok && text === '') return undefined;
  const data = parseJson(res, text);
  if (data === undefined && res.status !== 401) throw foreignAnswer(res);
  if (res.status === 401) {
    signOut('The service no longer accepts this session: sign in again.');
    throw new ApiError(401, data);
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

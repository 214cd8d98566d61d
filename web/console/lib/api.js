// The console's one way to the data: the service's own HTTP interface, with the session's token.
import { session, signOut, touch } from './session.js';

/** A refusal of the service: its status and problem document. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(typeof problem === 'object' && problem ? problem.detail || problem.title : String(problem || status));
    this.status = status;
    this.problem = problem;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls the service: JSON in and out; refusals throw an ApiError, a refused token signs out. A
 * read refused by a rate limit (a profile page reads several parts of each section, and the
 * account's limit of profile key operations per second applies to the console as to any client)
 * is asked again after the Retry-After the service gave, a few times.
 */
export async function api(method, path, body, retries = 4) {
  const current = session();
  if (!current) throw new ApiError(401, { detail: 'Signed out' });
  touch();
  const headers = { authorization: `Bearer ${current.token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (res.status === 429 && method === 'GET' && retries > 0) {
    await sleep(Number(res.headers.get('retry-after') || 1) * 1000);
    return api(method, path, body, retries - 1);
  }
  const text = await res.text();
  const data = text && /json/.test(res.headers.get('content-type') || '') ? JSON.parse(text) : text;
  if (res.status === 401) {
    signOut('The service no longer accepts this session: sign in again.');
    throw new ApiError(401, data);
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

/** A path with its parameters encoded: path`/admin/accounts/${id}/keys`. */
export function path(strings, ...values) {
  return strings.reduce((out, s, i) => out + s + (i < values.length ? encodeURIComponent(values[i]) : ''), '');
}

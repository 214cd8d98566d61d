import createClient, { type FetchResponse, type MaybeOptionalInit, type Middleware } from 'openapi-fetch';
import type { KnownProblemCode } from './problem-codes.ts';
import type { components, paths } from './schema.ts';

export type { components, paths } from './schema.ts';
export { PROBLEM_CODES, type KnownProblemCode } from './problem-codes.ts';
export {
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookDelivery,
  type WebhookHeaders,
} from './webhooks.ts';

type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';
type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P] extends { [K in M]: object } ? P : never;
}[keyof paths];
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
type InitArgs<Init> =
  RequiredKeys<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];
/**
 * openapi-fetch types an answer read without `parseAs` as JSON, which maps a file's Blob to its
 * JSON-like shape; the client reads such an answer as a Blob (byContentType), and types it so.
 */
type AsFile<T> = T extends { size: number; arrayBuffer: unknown; stream: unknown } ? Blob : T;
/** The success answer of an operation: errors are thrown, so `data` is always there. */
export type Answer<P extends keyof paths, M extends Method, Init> = {
  data: AsFile<
    Extract<
      FetchResponse<paths[P][M] & Record<string | number, any>, Init, `${string}/${string}`>,
      { data: unknown }
    >['data']
  >;
  response: Response;
};
type Call<M extends Method> = <P extends PathsWith<M>, Init extends MaybeOptionalInit<paths[P], M>>(
  url: P,
  ...init: InitArgs<Init>
) => Promise<Answer<P, M, Init>>;

/** Every operation of the service, typed from its OpenAPI document (openapi-fetch's calls; a problem is thrown). */
export interface Api {
  GET: Call<'get'>;
  POST: Call<'post'>;
  PUT: Call<'put'>;
  PATCH: Call<'patch'>;
  DELETE: Call<'delete'>;
}

/** The problem document every error of the service is (RFC 9457). */
export type ProblemDocument = components['schemas']['Problem'];
/**
 * An error code of the service's closed table (`GET /errors` lists them): one of the known codes
 * to switch on, or a code of a newer service than this client knows.
 */
export type ProblemCode = KnownProblemCode | (`AUD-${number}` & {});

/** An answer of the service that is a problem document, thrown by every call of the client. */
export class AudienceProblem extends Error {
  /** The error code (`AUD-1201`), from the document's `type`. */
  readonly code: ProblemCode;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly document: ProblemDocument;
  /** The method and path of the request refused. */
  readonly request: string;

  constructor(document: ProblemDocument, request: string) {
    super(`${request}: ${document.status} ${document.title}: ${document.detail}`);
    this.name = 'AudienceProblem';
    this.document = document;
    this.code = (document.type.split('/').pop() ?? 'AUD-0') as ProblemCode;
    this.status = document.status;
    this.title = document.title;
    this.detail = document.detail;
    this.request = request;
  }
}

export interface AudienceClientOptions {
  /** The service's address (its PUBLIC_URL), such as `https://cdp.shop.example`. */
  baseUrl: string;
  /** The client id and secret of an API key. */
  clientId: string;
  clientSecret: string;
  /** Seconds before a token expires at which the client fetches the next one; 60 by default. */
  renewBeforeSeconds?: number;
  /** Attempts after the first of a request answered one of `retryOn.statuses` or dropped; 4 by default. */
  retries?: number;
  /**
   * What is sent again: answers of these `statuses` (429, 502, 503 and 504 by default), and
   * requests whose connection was dropped without an answer: `idempotent` (by default: every
   * method but POST, which the service may have served before the connection dropped), `all` or `none`.
   */
  retryOn?: { statuses?: number[]; dropped?: 'idempotent' | 'all' | 'none' };
  /** The longest wait before a retry, in milliseconds, whatever Retry-After says; 60 000 by default. */
  maxRetryDelayMs?: number;
  /** The fetch to call (tests, proxies); the global one by default. */
  fetch?: typeof fetch;
  /** The time in milliseconds (tests that move time); Date.now by default. */
  now?: () => number;
  /** How a retry waits; setTimeout by default. */
  sleep?: (ms: number) => Promise<void>;
  /** What `importProfiles` and `exportFile` do between polls, unless their `WaitOptions.poll` says (a sleep of `intervalMs` by default). */
  poll?: (polls: number) => Promise<unknown>;
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * How long to wait before trying again, from a Retry-After header (seconds or an HTTP date), else
 * a backoff that doubles from half a second.
 */
export function retryDelay(retryAfter: string | null, attempt: number, now: number): number {
  if (retryAfter !== null && retryAfter.trim() !== '') {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
    const date = Date.parse(retryAfter);
    if (Number.isFinite(date)) return Math.max(0, date - now);
  }
  return 500 * 2 ** attempt;
}

/** The statuses sent again unless `retryOn.statuses` says otherwise. */
export const RETRIED_STATUSES = [429, 502, 503, 504];

/**
 * A fetch that sends a request again when it is answered a retried status (after the wait the
 * answer asks for), or when its connection dropped without an answer (after a backoff).
 */
function retryingFetch(
  options: Required<Pick<AudienceClientOptions, 'retries' | 'maxRetryDelayMs'>> & {
    statuses: number[];
    dropped: 'idempotent' | 'all' | 'none';
    fetch: typeof fetch;
    now: () => number;
    sleep: (ms: number) => Promise<void>;
  },
): (input: Request) => Promise<Response> {
  return async (input) => {
    const resend = options.dropped === 'all' || (options.dropped === 'idempotent' && input.method !== 'POST');
    for (let attempt = 0; ; attempt++) {
      // A body is read once: each attempt sends a copy of the request.
      let response: Response;
      try {
        response = await options.fetch(input.clone());
      } catch (error) {
        // No answer at all (fetch's TypeError: a refused or dropped connection); an abort is the caller's.
        if (!resend || attempt >= options.retries || (error as Error).name === 'AbortError') throw error;
        await options.sleep(Math.min(retryDelay(null, attempt, options.now()), options.maxRetryDelayMs));
        continue;
      }
      if (!options.statuses.includes(response.status) || attempt >= options.retries) return response;
      const wait = retryDelay(response.headers.get('retry-after'), attempt, options.now());
      await response.body?.cancel();
      await options.sleep(Math.min(wait, options.maxRetryDelayMs));
    }
  };
}

/** Throws the problem document of an answer that is one; answers others as they are. */
async function throwProblem(response: Response, request: string): Promise<Response> {
  if (response.ok || !/^application\/problem\+json/.test(response.headers.get('content-type') ?? '')) return response;
  throw new AudienceProblem((await response.json()) as ProblemDocument, request);
}

type RawCall = (
  url: string,
  init?: { parseAs?: string; [key: string]: unknown },
) => Promise<{ data?: unknown; response: Response }>;

/**
 * openapi-fetch reads every answer as JSON unless `parseAs` says otherwise: a file (CSV, Excel,
 * gzip), which the document types as a Blob, would fail to parse. Without `parseAs`, JSON answers
 * are read as JSON and any other as a Blob; with it, as it says (`stream`, `text` …).
 */
function byContentType(call: RawCall): RawCall {
  return async (url, init = {}) => {
    if (init.parseAs !== undefined) return call(url, init);
    const answer = await call(url, { ...init, parseAs: 'stream' });
    // No body (204, HEAD), or an answer that is not a success (no data to read).
    if (answer.data === undefined || answer.data === null) return answer;
    if (!/[/+]json\b/.test(answer.response.headers.get('content-type') ?? ''))
      return { ...answer, data: await answer.response.blob() };
    const text = await answer.response.text();
    return { ...answer, data: text ? JSON.parse(text) : undefined };
  };
}

/** An import's status, as `GET /audience/sections/{s}/imports/{id}` answers it. */
export type ImportStatus = components['schemas']['ImportStatus'];
type ImportV2Body =
  paths['/v2/audience/sections/{section_discriminator}/imports']['post']['requestBody']['content']['application/json'];
type ExportPath =
  | '/audience/profiles/reports/consents'
  | '/audience/profiles/reports/consents/count'
  | '/audience/profiles/reports/duplicates'
  | '/audience/profiles/reports/segments'
  | '/audience/profiles/exports';
type ExportBody<P extends ExportPath> = paths[P]['post']['requestBody']['content']['application/json'];

export interface WaitOptions {
  /** Milliseconds between polls; 1000 by default. */
  intervalMs?: number;
  /** Milliseconds after which waiting gives up with an error; 10 minutes by default. */
  timeoutMs?: number;
  /**
   * What happens between two polls instead of sleeping `intervalMs` (the client's `poll`, else a
   * sleep, by default). Against the emulator, move its work on rather than wait for it:
   * `poll: () => emulator.control.jobs.run()` or `() => emulator.control.clock.advance(1)`.
   * Its argument counts the polls made so far.
   */
  poll?: (polls: number) => Promise<unknown>;
}

/** The client of one API key: typed calls, with its tokens, retries and errors taken care of. */
export interface AudienceClient {
  /**
   * Every operation of the service, typed from its OpenAPI document (openapi-fetch): `api.GET('/audience/sections')`.
   * A problem document is thrown as an `AudienceProblem`; `data` is then always the success answer.
   */
  readonly api: Api;
  /** A valid access token: the one held, or a new one when it expires within `renewBeforeSeconds`. */
  token(): Promise<string>;
  /** Requests an import (version 2), uploads its file with the signed form, and waits until it completed or failed. */
  importProfiles(
    section: string,
    request: ImportV2Body,
    file: Blob | string,
    wait?: WaitOptions,
  ): Promise<ImportStatus>;
  /**
   * Requests an export or a count, waits until it is ready, and answers its file as a streamed
   * Response (`await res.text()`, or `res.body` piped to a file). `accept` chooses the format
   * where the export has several (Excel, JSON).
   */
  exportFile<P extends ExportPath>(
    path: P,
    body: ExportBody<P>,
    options?: WaitOptions & { accept?: string },
  ): Promise<Response>;
}

export function createAudienceClient(options: AudienceClientOptions): AudienceClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const send = retryingFetch({
    retries: options.retries ?? 4,
    statuses: options.retryOn?.statuses ?? RETRIED_STATUSES,
    dropped: options.retryOn?.dropped ?? 'idempotent',
    maxRetryDelayMs: options.maxRetryDelayMs ?? 60_000,
    fetch: options.fetch ?? globalThis.fetch,
    now,
    sleep: options.sleep ?? sleepFor,
  });
  const renewBefore = (options.renewBeforeSeconds ?? 60) * 1000;

  // The token held, and the one being fetched: concurrent calls wait for the same request.
  let held: { token: string; expiresAt: number } | undefined;
  let fetching: Promise<string> | undefined;
  const tokens = createClient<paths>({ baseUrl, fetch: send });
  tokens.use({ onResponse: ({ response, request }) => throwProblem(response, `${request.method} /oauth/token`) });
  const fetchToken = async (): Promise<string> => {
    const { data } = await tokens.POST('/oauth/token', {
      body: { grant_type: 'client_credentials', client_id: options.clientId, client_secret: options.clientSecret },
    });
    // A refusal was thrown (throwProblem): an answer without a token is no problem document.
    if (!data) throw new Error('POST /oauth/token: the answer has no token');
    held = { token: data.access_token, expiresAt: now() + data.expires_in * 1000 };
    return held.token;
  };
  const token = (): Promise<string> => {
    if (held && now() < held.expiresAt - renewBefore) return Promise.resolve(held.token);
    fetching ??= fetchToken().finally(() => (fetching = undefined));
    return fetching;
  };

  const auth: Middleware = {
    async onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${await token()}`);
      return request;
    },
    async onResponse({ request, response }) {
      // A token refused before its time (a deleted key, a rotated signing key): one more try with a new one.
      if (response.status === 401 && held) {
        held = undefined;
        const again = new Request(request, { headers: new Headers(request.headers) });
        again.headers.set('authorization', `Bearer ${await token()}`);
        response = await send(again);
      }
      return throwProblem(response, `${request.method} ${new URL(request.url).pathname}`);
    },
  };
  const raw = createClient<paths>({ baseUrl, fetch: send });
  raw.use(auth);
  // openapi-fetch's calls, typed without their error branch: the middleware throws every problem;
  // an answer read by its content type unless a call says how.
  const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
  const api = Object.fromEntries(methods.map((m) => [m, byContentType(raw[m] as RawCall)])) as unknown as Api;

  const waitUntil = async <T>(poll: () => Promise<T | undefined>, what: string, wait: WaitOptions = {}) => {
    const deadline = now() + (wait.timeoutMs ?? 600_000);
    const between = wait.poll ?? options.poll;
    for (let polls = 1; ; polls++) {
      const result = await poll();
      if (result !== undefined) return result;
      if (now() > deadline) throw new Error(`${what} is not done after ${wait.timeoutMs ?? 600_000} ms`);
      if (between) await between(polls);
      else await (options.sleep ?? sleepFor)(wait.intervalMs ?? 1000);
    }
  };

  return {
    api,
    token,

    async importProfiles(section, request, file, wait) {
      const { data: created } = await api.POST('/v2/audience/sections/{section_discriminator}/imports', {
        params: { path: { section_discriminator: section } },
        body: request,
      });
      // The upload form carries its own credential (its signature): no bearer token, fields in order, then the file.
      const form = new FormData();
      for (const [name, value] of Object.entries(created.file_upload_body)) form.append(name, value);
      form.append('file', typeof file === 'string' ? new Blob([file], { type: 'text/csv' }) : file, 'import.csv');
      const uploaded = await send(new Request(created.file_upload_url, { method: 'POST', body: form }));
      await throwProblem(uploaded, 'POST file_upload_url');
      if (!uploaded.ok) throw new Error(`The upload was answered ${uploaded.status}: ${await uploaded.text()}`);
      const path = { section_discriminator: section, import_id: created.import_id };
      return waitUntil(
        async () => {
          const { data } = await api.GET('/audience/sections/{section_discriminator}/imports/{import_id}', {
            params: { path },
          });
          return ['completed', 'error'].includes(data.result.status) ? data : undefined;
        },
        `Import ${created.import_id}`,
        wait,
      );
    },

    async exportFile(path, body, wait = {}) {
      const { data } = await (api.POST as (p: string, init: unknown) => Promise<{ data?: Record<string, string> }>)(
        path,
        { body },
      );
      // Every export answers where to poll; the second form of the poll URL answers 202 while in progress.
      const url = data!.file_download_url_v2 ?? data!.poll_url ?? data!.file_download_url;
      const id = new URL(url).pathname.split('/').pop()!;
      return waitUntil(
        async () => {
          const { response } = await api.GET('/v2/audience/profiles/reports/{report_id}', {
            params: { path: { report_id: id } },
            headers: wait.accept ? { accept: wait.accept } : {},
            parseAs: 'stream',
          });
          return response.status === 200 ? response : undefined;
        },
        `Export ${id}`,
        wait,
      );
    },
  };
}

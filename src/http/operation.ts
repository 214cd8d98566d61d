import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import multipart from '@fastify/multipart';
import type { Static, TSchema } from 'typebox';
import type { LimitName } from '../core/limits.ts';
import { PROBLEMS, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import * as accounts from '../accounts/accounts.ts';
import { accountScope, type Services } from '../services.ts';
import { withTransaction, type Queryable } from '../store/pool.ts';
import type { RouteAuth } from './plugins/auth.ts';
import { NoContent, responses } from './schemas/problem.ts';

/**
 * Who may call an operation, and in which account's scope it runs:
 * - `account`: a bearer token; the scope of the caller's account;
 * - `operator-account`: the operator token; the account of the path's `:account_id`, which must exist (404 otherwise);
 * - `operator`: the operator token; no account;
 * - `public`: no token; no account;
 * - `link`: no token; the account a signed link names, found by the operation's `resolve`;
 * - `metrics`: the metrics token; no account.
 */
export type ScopeKind = 'account' | 'operator-account' | 'operator' | 'public' | 'link' | 'metrics';

const AUTH: Record<ScopeKind, RouteAuth> = {
  account: 'bearer',
  'operator-account': 'admin',
  operator: 'admin',
  public: 'none',
  link: 'none',
  metrics: 'metrics',
};

/** The credentials of each kind of operation, as the OpenAPI document's security schemes name them (src/http/openapi.ts). */
const SECURITY: Record<ScopeKind, Record<string, string[]>[]> = {
  account: [{ oauth: [] }, { bearer: [] }],
  'operator-account': [{ operator: [] }],
  operator: [{ operator: [] }],
  public: [],
  link: [],
  metrics: [{ operator: [] }],
};

/** Whether a schema holds a list with a limit on its items (AUD-1007 when a request passes it). */
function limitsItems(schema: unknown): boolean {
  if (schema === null || typeof schema !== 'object') return false;
  if ('maxItems' in schema) return true;
  return Object.values(schema).some(limitsItems);
}

/**
 * Whether a schema requires a field anywhere that has no default (AUD-1003 when a request leaves
 * one out): the validator fills in a field of a default.
 */
function requiresFields(schema: unknown): boolean {
  if (schema === null || typeof schema !== 'object') return false;
  const { required, properties } = schema as { required?: unknown; properties?: Record<string, { default?: unknown }> };
  if (Array.isArray(required) && required.some((name) => properties?.[name]?.default === undefined)) return true;
  return Object.values(schema).some(requiresFields);
}

/** Whether a part of the request has a schema that can refuse a value: not an object of no fields. */
function takesInput(schema: TSchema | undefined): boolean {
  const s = schema as { type?: unknown; properties?: object } | undefined;
  return s !== undefined && (s.type !== 'object' || Object.keys(s.properties ?? {}).length > 0);
}

/**
 * The refusals every operation of a kind can answer, whatever it does: a NUL in any path or query
 * (src/http/plugins/text-guard.ts, before validation, on every route); a body that is no JSON, of
 * another media type, too deep, too large or holding text no column can hold on every method that
 * carries one, declared or not (a lone surrogate only a JSON body can carry: a URL's escapes that
 * decode to none stay as sent); the validation of declared parts; credentials and rate limits.
 */
function commonErrors(op: Operation): ProblemCode[] {
  const codes: ProblemCode[] = ['AUD-1012'];
  if (takesInput(op.params) || takesInput(op.query) || takesInput(op.body)) codes.push('AUD-0');
  // A path's parameters are never missing: a path without one is another route's.
  if (requiresFields(op.query) || requiresFields(op.body)) codes.push('AUD-1003');
  if (op.body || op.method !== 'GET')
    codes.push('AUD-1004', 'AUD-1005', 'AUD-1013', 'AUD-1014', op.bodyTooLarge ?? 'AUD-1001');
  if (limitsItems(op.query) || limitsItems(op.body)) codes.push('AUD-1007');
  if (op.scope !== 'public' && op.scope !== 'link') codes.push('AUD-8');
  if (op.scope === 'account') codes.push('AUD-1002');
  if (op.rateLimit) codes.push('AUD-1002');
  if (op.scope === 'operator-account') codes.push('AUD-1110');
  codes.push('AUD-2');
  return codes;
}

// One collator for every comparison: localeCompare with options makes one a call, which took 3–5 %
// of a start's CPU over the routes' descriptions.
const byCode = new Intl.Collator('en', { numeric: true });

/** Every code an operation can answer: its own refusals and those of its kind, by status then code. */
export function problemsOf(op: Operation): ProblemCode[] {
  return [...new Set([...(op.errors ?? []), ...commonErrors(op)])].sort(
    (a, b) => PROBLEMS[a].status - PROBLEMS[b].status || byCode.compare(a, b),
  );
}

/** The operation's description in the reference: its own text, then every code it can answer with its status and title. */
export function describeOperation(op: Operation): string {
  const rows = problemsOf(op).map((code) => `| ${PROBLEMS[code].status} | \`${code}\` | ${PROBLEMS[code].title} |`);
  return `${op.description ?? ''}\n\n**Errors** (problem documents; \`GET /errors/{code}\` explains a code):\n\n| Status | Code | Title |\n|---|---|---|\n${rows.join('\n')}`;
}

/** What an operation's handler is given: the request's validated parts, its account's scope, and where to run SQL. */
export interface Context<P, Q, B, S> {
  params: P;
  query: Q;
  body: B;
  /** The account's scope (see `ScopeKind`). */
  scope: S;
  /** The operation's transaction when it declares one, else the pool. */
  db: Queryable;
  services: Services;
  request: FastifyRequest;
  /** For the few answers that are not JSON (files, pages, redirects): a handler that sends one returns the reply. */
  reply: FastifyReply;
}

/** An answer whose status (or headers) the outcome decides: created (201) or found (200), for one. */
export class Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Record<string, string>;
  constructor(status: number, body?: unknown, headers: Record<string, string> = {}) {
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

/** An answer with this status. */
export const answer = (status: number, body?: unknown, headers?: Record<string, string>) =>
  new Answer(status, body, headers);

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Of<T extends TSchema | undefined> = T extends TSchema ? Static<T> : undefined;
type ScopeFor<K extends ScopeKind> = K extends 'account' | 'operator-account' | 'link' ? AccountScope : undefined;

/** One operation of the API, declared: its route, its shapes, its access, and the domain call it makes. */
export type OperationSpec<
  P extends TSchema | undefined,
  Q extends TSchema | undefined,
  B extends TSchema | undefined,
  K extends ScopeKind,
> = OperationFields<P, Q, B, K> & Documented;

/**
 * The reference explains every operation it shows: a description is required unless the operation
 * is left out of the document (`hide`).
 */
type Documented =
  | {
      /** What the reference explains (Markdown): what the operation does, its rules and limits. */
      description: string;
      hide?: false;
    }
  | {
      description?: string;
      /** Left out of the OpenAPI document (links in messages, not operations of the API). */
      hide: true;
    };

interface OperationFields<
  P extends TSchema | undefined,
  Q extends TSchema | undefined,
  B extends TSchema | undefined,
  K extends ScopeKind,
> {
  method: Method;
  path: string;
  /** One line: what the operation does (the reference's title of it). */
  summary: string;
  /**
   * The refusals of its own the operation can answer, by code; the reference lists them with their
   * status and title, after those every operation of its kind can answer (`commonErrors`).
   */
  errors?: readonly ProblemCode[];
  /** Examples for the reference: the request body, and answers by status. Others are made from the schemas. */
  examples?: { body?: unknown; response?: Record<number, unknown> };
  /** The table's tags when omitted. */
  tags?: string[];
  deprecated?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** The success answers by status; problem documents are added for every error. None: an undocumented answer. */
  response?: Record<number, TSchema>;
  /** The success status; by default the lowest of `response`. A handler that returns an `Answer` chooses its own. */
  status?: number;
  scope: K;
  /** For a `link` operation: the scope of the account the request names. */
  resolve?: (request: FastifyRequest, services: Services) => Promise<AccountScope>;
  /** Whether the handler runs in one transaction (`db` is then that transaction). */
  transaction?: boolean;
  /** A limit of SPEC §8 this operation spends from, on top of requests_per_second. */
  rateLimit?: LimitName;
  /** The error of a body over the size limit, where the spec names one. */
  bodyTooLarge?: ProblemCode;
  bodyLimit?: number;
  /** Takes multipart/form-data bodies, with these limits (the import upload form). */
  multipart?: { fields: number; fieldSize: number; files: number; fileSize: number };
  /** Reshapes the body before validation (an events batch sent as a bare array). */
  preValidation?: (request: FastifyRequest) => Promise<void>;
  /** Headers of every answer, refusals of parsing and validation included (the token route's Cache-Control). */
  headers?: Record<string, string>;
  handle: (context: Context<Of<P>, Of<Q>, Of<B>, ScopeFor<K>>) => Promise<unknown>;
  /** Runs with the handler's result once its transaction has committed (counters of what was written). */
  committed?: (result: unknown, services: Services) => void;
}

/** A declared operation, as a table holds it. */
export type Operation = OperationSpec<TSchema | undefined, TSchema | undefined, TSchema | undefined, ScopeKind>;

/** Declares an operation; the handler's context is typed by its schemas and scope. */
export function operation<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
  K extends ScopeKind = ScopeKind,
>(spec: OperationSpec<P, Q, B, K>): Operation {
  return spec as unknown as Operation;
}

/** A route module: the operations of one area, with the tags they share. */
export interface OperationTable {
  tags: string[];
  operations: Operation[];
}

/** The scope an operation runs in, or undefined. */
async function scopeFor(op: Operation, request: FastifyRequest, services: Services): Promise<AccountScope | undefined> {
  if (op.scope === 'account') return accountScope(services, request.caller.accountId, request.caller);
  if (op.scope === 'operator-account') {
    const accountId = (request.params as { account_id: string }).account_id;
    await accounts.getAccount(services.pool, accountId);
    return accountScope(services, accountId);
  }
  return op.resolve?.(request, services);
}

/** The route of an operation: its schema for validation and OpenAPI, its access, and the one shared handler. */
export function routeOf(op: Operation, services: Services, tags: string[]): RouteOptions {
  const success = op.response ?? {};
  const statuses = Object.keys(success).map(Number);
  const status = op.status ?? (statuses.length > 0 ? Math.min(...statuses) : 200);
  let description: string | undefined;
  return {
    method: op.method,
    url: op.path,
    bodyLimit: op.bodyLimit,
    config: {
      auth: AUTH[op.scope],
      ...(op.rateLimit ? { rateLimit: op.rateLimit } : {}),
      ...(op.bodyTooLarge ? { bodyTooLarge: op.bodyTooLarge } : {}),
    },
    ...(op.preValidation ? { preValidation: op.preValidation } : {}),
    ...(op.headers
      ? {
          onRequest: (_request: FastifyRequest, reply: FastifyReply, done: () => void) => {
            reply.headers(op.headers!);
            done();
          },
        }
      : {}),
    schema: {
      summary: op.summary,
      // Written when the OpenAPI document first reads it, not at every start (src/http/app.ts).
      get description() {
        return (description ??= describeOperation(op));
      },
      tags: op.tags ?? tags,
      ...(op.deprecated ? { deprecated: true } : {}),
      ...(op.hide ? { hide: true } : {}),
      security: SECURITY[op.scope],
      ...(op.examples ? { 'x-examples': op.examples } : {}),
      ...(op.multipart ? { consumes: ['multipart/form-data'] } : {}),
      ...(op.params ? { params: op.params } : {}),
      ...(op.query ? { querystring: op.query } : {}),
      ...(op.body ? { body: op.body } : {}),
      ...(op.response ? { response: responses(op.response) } : {}),
    },
    handler: async (request, reply) => {
      const scope = await scopeFor(op, request, services);
      const run = (db: Queryable) =>
        op.handle({
          params: request.params,
          query: request.query,
          body: request.body,
          scope,
          db,
          services,
          request,
          reply,
        } as Parameters<Operation['handle']>[0]);
      const result = await (op.transaction ? withTransaction(services.pool, run) : run(services.pool));
      op.committed?.(result, services);
      // A handler that sent its own answer returns the reply, which is thenable: awaiting it gave
      // undefined once the answer went, so `sent` is what tells.
      if (reply.sent) return reply;
      const { status: code, body, headers } = result instanceof Answer ? result : new Answer(status, result);
      reply.code(code).headers(headers);
      return code === 204 || success[code] === NoContent ? reply.send() : reply.send(body);
    },
  };
}

/** Registers a table's operations; those that take a multipart form each in a context of their own with the parser. */
export async function registerOperations(
  app: FastifyInstance,
  services: Services,
  table: OperationTable,
): Promise<void> {
  await app.register(async (scoped) => {
    for (const op of table.operations) {
      if (!op.multipart) scoped.route(routeOf(op, services, table.tags));
      else {
        const limits = op.multipart;
        await scoped.register(async (form) => {
          await form.register(multipart, { limits });
          form.route(routeOf(op, services, table.tags));
        });
      }
    }
  });
}

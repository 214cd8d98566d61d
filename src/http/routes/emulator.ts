import { Type, type TSchema } from 'typebox';
import * as accounts from '../../accounts/accounts.ts';
import { LIMIT_NAMES } from '../../core/limits.ts';
import { Problem } from '../../core/problems.ts';
import { DateTime } from '../../core/schemas.ts';
import { SNAPSHOT_NAME } from '../../store/snapshots.ts';
import { readOutbox } from '../../transactional/outbox.ts';
import { operation, type Operation, type OperationSpec, type OperationTable } from '../operation.ts';
import { BODY_FAULTS, CONTROL_PREFIX, FAULT_STATUSES, type Emulator } from '../emulator.ts';

/**
 * The emulator's control API (docs/emulator.md), registered by `audience emulate` only: reset and
 * snapshots, the clock, jobs, faults, the request log, mail and limits. No token: the emulator is a
 * test tool on a throw-away database. Left out of the OpenAPI document, which describes the service.
 */

/** A namespace: an account made for one test (docs/emulator.md "Namespaces"); its id is the account's. */
const NamespaceId = Type.String({ pattern: '^[0-9]{1,18}$', description: 'A namespace (POST /_emulator/namespaces)' });
const InNamespace = Type.Object({ namespace: Type.Optional(NamespaceId) }, { additionalProperties: false });

const Clock = Type.Object({
  now: DateTime,
  frozen: Type.Boolean({ description: 'Whether the clock stands still' }),
  jobs_run: Type.Optional(Type.Integer({ description: 'Jobs that came due and ran' })),
});

const FaultBody = Type.Object(
  {
    namespace: Type.Optional(NamespaceId),
    path: Type.String({ minLength: 1, maxLength: 2000, description: 'A path; * stands for any characters' }),
    method: Type.Optional(Type.Union(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => Type.Literal(m)))),
    times: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 }),
    delay_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    status: Type.Optional(Type.Enum([...FAULT_STATUSES])),
    retry_after: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })),
    drop: Type.Optional(Type.Boolean()),
    body: Type.Optional(Type.Enum([...BODY_FAULTS])),
    body_delay_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    probability: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

const Fault = Type.Object({
  id: Type.Integer(),
  namespace: Type.Optional(Type.String()),
  path: Type.String(),
  method: Type.Optional(Type.String()),
  times: Type.Integer(),
  remaining: Type.Integer(),
  delay_ms: Type.Optional(Type.Integer()),
  status: Type.Optional(Type.Integer()),
  retry_after: Type.Optional(Type.Integer()),
  drop: Type.Optional(Type.Boolean()),
  body: Type.Optional(Type.String()),
  body_delay_ms: Type.Optional(Type.Integer()),
  probability: Type.Optional(Type.Number()),
});

const LoggedRequest = Type.Object({
  id: Type.Integer(),
  at: DateTime,
  method: Type.String(),
  path: Type.String(),
  query: Type.Record(Type.String(), Type.Unknown()),
  headers: Type.Record(Type.String(), Type.Unknown()),
  body: Type.Optional(Type.Unknown()),
  status: Type.Integer({ description: '0 for a dropped connection' }),
  fault: Type.Optional(Type.Integer()),
  namespace: Type.Optional(Type.String({ description: 'The namespace whose credentials the request carried' })),
});

const JobsMode = Type.Union([Type.Literal('automatic'), Type.Literal('manual')], {
  description: 'automatic: jobs run shortly after they are due; manual: only when the control API runs them',
});

const JobItem = Type.Object({
  job_id: Type.String(),
  kind: Type.String({ description: 'import, export, send …' }),
  state: Type.String({ description: 'waiting, running or failed' }),
  attempts: Type.Integer(),
  created_at: DateTime,
  run_at: DateTime,
  last_error: Type.Union([Type.String(), Type.Null()]),
  payload: Type.Unknown(),
});

const OutboundFaultBody = Type.Object(
  {
    namespace: Type.Optional(NamespaceId),
    kind: Type.Optional(
      Type.String({ pattern: '^[a-z][a-z_]{0,39}$', description: 'callback, mail (any kind when absent)' }),
    ),
    target: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2000, description: 'A URL or an address; * stands for any characters' }),
    ),
    times: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 }),
    delay_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    status: Type.Optional(Type.Integer({ minimum: 200, maximum: 599, description: 'Answer this status instead' })),
    refuse: Type.Optional(Type.Boolean({ description: 'Refuse the connection' })),
    probability: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
  },
  { additionalProperties: false },
);

const OutboundFault = Type.Object({
  id: Type.Integer(),
  namespace: Type.Optional(Type.String()),
  kind: Type.Optional(Type.String()),
  target: Type.Optional(Type.String()),
  times: Type.Integer(),
  remaining: Type.Integer(),
  delay_ms: Type.Optional(Type.Integer()),
  status: Type.Optional(Type.Integer()),
  refuse: Type.Optional(Type.Boolean()),
  probability: Type.Optional(Type.Number()),
});

const OutboundCall = Type.Object({
  id: Type.Integer(),
  at: DateTime,
  kind: Type.String(),
  method: Type.String(),
  target: Type.String(),
  body: Type.Unknown(),
  headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  answer: Type.Object({
    status: Type.Optional(Type.Integer()),
    body: Type.Optional(Type.String()),
    error: Type.Optional(Type.String()),
  }),
  duration_ms: Type.Integer(),
  fault: Type.Optional(Type.Integer()),
  namespace: Type.Optional(Type.String({ description: 'The namespace the call was made for' })),
});

const WebhookDelivery = Type.Object({
  id: Type.Integer({ description: 'The outbound call the attempt is (GET /_emulator/outbound)' }),
  at: DateTime,
  url: Type.String({ description: 'The endpoint' }),
  event_id: Type.String({ description: 'The webhook-id header: the same for every attempt of one delivery' }),
  type: Type.String({ description: 'The event type' }),
  headers: Type.Record(Type.String(), Type.String(), {
    description: 'webhook-id, webhook-timestamp and webhook-signature',
  }),
  body: Type.Unknown({ description: 'The signed body: type, timestamp, data' }),
  answer: OutboundCall.properties.answer,
  duration_ms: Type.Integer(),
  fault: Type.Optional(Type.Integer()),
  namespace: Type.Optional(Type.String()),
});

const MailMessage = Type.Object({
  message_id: Type.String(),
  transaction_id: Type.Union([Type.String(), Type.Null()]),
  created_at: DateTime,
  from: Type.String(),
  to: Type.Array(Type.String()),
  subject: Type.String(),
  text: Type.Union([Type.String(), Type.Null()]),
  html: Type.Union([Type.String(), Type.Null()]),
  links: Type.Array(Type.String()),
  unsubscribe: Type.Union([Type.String(), Type.Null()]),
});

const ReadyAccount = Type.Object({
  account_id: Type.String(),
  client_id: Type.String(),
  client_secret: Type.String(),
  vendor: Type.String(),
  region: Type.String(),
  admin_token: Type.String(),
});

const Limits = Type.Record(Type.String(), Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]));

const JobParams = Type.Object({ job_id: Type.String({ pattern: '^[0-9]{1,18}$' }) });

const SnapshotParams = Type.Object({ name: Type.String({ pattern: SNAPSHOT_NAME.source }) });

/**
 * A control operation: its path under CONTROL_PREFIX, no token (`public`), left out of the OpenAPI
 * document. The table's entries give only what differs; the index lists what they give.
 */
function control<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(spec: Omit<OperationSpec<P, Q, B, 'public'>, 'scope' | 'hide' | 'description'>): Operation {
  return operation<P, Q, B, 'public'>({
    ...spec,
    path: `${CONTROL_PREFIX}${spec.path}`,
    hide: true,
    scope: 'public',
  } as OperationSpec<P, Q, B, 'public'>);
}

export function emulatorRoutes(emulator: Emulator): OperationTable {
  // Read when a request comes: the account is made while the routes are built.
  const accountId = () => emulator.account.account_id;
  /** A namespace the query or body names, known to the emulator (404 AUD-2208 otherwise). */
  const known = <T extends string | undefined>(namespace: T): T => {
    if (namespace !== undefined && !emulator.traffic.namespaces.has(namespace))
      throw new Problem(
        'AUD-2208',
        `There is no namespace ${namespace}: POST /_emulator/namespaces makes one, and a reset removes them all`,
      );
    return namespace;
  };
  /** The account a namespaced call acts on: the namespace's, else the ready account's. */
  const accountOf = (namespace: string | undefined) => known(namespace) ?? accountId();
  const clockNow = (jobsRun?: number) => ({
    now: new Date(emulator.clock.read()).toISOString(),
    frozen: emulator.clock.frozen,
    ...(jobsRun === undefined ? {} : { jobs_run: jobsRun }),
  });
  // A moved clock runs the jobs it made due, unless jobs wait until they are asked for.
  const runDueJobs = async () => (emulator.jobsMode === 'manual' ? 0 : emulator.runJobs());
  const operations = [
    control({
      method: 'GET',
      path: '/account',
      summary: 'The ready account: its ids, its API key and the operator token',
      response: { 200: ReadyAccount },
      handle: async () => emulator.account,
    }),
    control({
      method: 'POST',
      path: '/namespaces',
      summary:
        "A namespace for one test: an account of the ready account's manifest and seed, with its own key, request log, mail, outbound calls and faults",
      response: { 201: Type.Object({ namespace: NamespaceId, ...ReadyAccount.properties }) },
      handle: async () => {
        const created = await emulator.createNamespace();
        return { namespace: created.account_id, ...created };
      },
    }),
    control({
      method: 'POST',
      path: '/reset',
      summary: 'Back to the initial state, or to a saved snapshot',
      // A POST without a body is a reset to the initial state.
      preValidation: async (request) => {
        request.body ??= {};
      },
      body: Type.Object(
        { snapshot: Type.Optional(Type.String({ pattern: SNAPSHOT_NAME.source })) },
        { additionalProperties: false },
      ),
      response: { 204: Type.Null() },
      handle: ({ body }) => emulator.reset(body.snapshot),
    }),
    control({
      method: 'GET',
      path: '/snapshots',
      summary: 'The saved snapshots',
      response: { 200: Type.Object({ items: Type.Array(Type.String()) }) },
      handle: async () => ({ items: await emulator.snapshots() }),
    }),
    control({
      method: 'PUT',
      path: '/snapshots/:name',
      summary: 'Save the current state (data and files) as a snapshot that reset can return to',
      params: SnapshotParams,
      response: { 204: Type.Null() },
      handle: ({ params }) => emulator.saveSnapshot(params.name),
    }),
    control({
      method: 'GET',
      path: '/clock',
      summary: "The emulator's time",
      response: { 200: Clock },
      handle: async () => clockNow(),
    }),
    control({
      method: 'PUT',
      path: '/clock',
      summary: 'Set the time (and stop it or let it run); the jobs due by then run before the answer',
      body: Type.Object(
        { now: Type.Optional(DateTime), frozen: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
      response: { 200: Clock },
      handle: async ({ body }) => {
        const at = body.now ? Date.parse(body.now) : emulator.clock.read();
        // Jobs are due by the later of this clock and the database's time: behind the real time,
        // the jobs the clock schedules for later (an export's sweep) would be due at once.
        if (at < Date.now())
          throw new Problem(
            'AUD-2203',
            `now ${body.now} is before the real time (${new Date().toISOString()}): the emulator's clock can be set from the real time on`,
          );
        emulator.clock.set(at, body.frozen);
        return clockNow(await runDueJobs());
      },
    }),
    control({
      method: 'POST',
      path: '/clock/advance',
      summary: 'Move the time forward; the jobs due by then run before the answer',
      body: Type.Object(
        { seconds: Type.Number({ minimum: 0, maximum: 10 * 365 * 86_400 }) },
        { additionalProperties: false },
      ),
      response: { 200: Clock },
      handle: async ({ body }) => {
        emulator.clock.advance(body.seconds * 1000);
        return clockNow(await runDueJobs());
      },
    }),
    control({
      method: 'POST',
      path: '/jobs/run',
      summary: "Run every job due now (imports, exports, mail; a namespace's only, with one) until none is left",
      query: InNamespace,
      response: { 200: Type.Object({ jobs_run: Type.Integer() }) },
      handle: async ({ query }) => ({ jobs_run: await emulator.runJobs(known(query.namespace)) }),
    }),
    control({
      method: 'GET',
      path: '/jobs',
      summary: 'The jobs of the queue (waiting, running, failed), oldest first, and whether they run by themselves',
      query: InNamespace,
      response: { 200: Type.Object({ mode: JobsMode, items: Type.Array(JobItem) }) },
      handle: async ({ query }) => ({
        mode: emulator.jobsMode,
        items: (await emulator.listJobs(known(query.namespace))).map((j) => ({
          job_id: j.job_id,
          kind: j.kind,
          state: j.state,
          attempts: j.attempts,
          created_at: j.created_at.toISOString(),
          run_at: j.run_at.toISOString(),
          last_error: j.last_error,
          payload: j.payload,
        })),
      }),
    }),
    control({
      method: 'PUT',
      path: '/jobs',
      summary:
        'Let jobs run by themselves (automatic) or only when asked (manual); reset brings back the mode of the start',
      body: Type.Object({ mode: JobsMode }, { additionalProperties: false }),
      response: { 200: Type.Object({ mode: JobsMode }) },
      handle: async ({ body }) => {
        emulator.jobsMode = body.mode;
        return { mode: emulator.jobsMode };
      },
    }),
    control({
      method: 'POST',
      path: '/jobs/:job_id/run',
      summary: 'Run one waiting job now, due or not; with hold, the job begins (in_progress) and waits until released',
      params: JobParams,
      query: InNamespace,
      // A POST without a body runs the job through.
      preValidation: async (request) => {
        request.body ??= {};
      },
      body: Type.Object(
        {
          hold: Type.Optional(
            Type.Boolean({ description: 'Begin the job and hold it before it reads its account, until released' }),
          ),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ jobs_run: Type.Integer(), held: Type.Optional(Type.Boolean()) }) },
      handle: async ({ params, query, body }) => {
        const namespace = known(query.namespace);
        if (await emulator.runJob(params.job_id, { namespace, hold: body.hold }))
          return { jobs_run: 1, ...(body.hold ? { held: true } : {}) };
        const job = (await emulator.listJobs(namespace)).find((j) => j.job_id === params.job_id);
        if (!job) throw new Problem('AUD-2204', `There is no job ${params.job_id}: GET /_emulator/jobs lists them`);
        throw new Problem('AUD-2205', `Job ${params.job_id} is ${job.state}, not waiting: it cannot be run`);
      },
    }),
    control({
      method: 'POST',
      path: '/jobs/:job_id/release',
      summary: 'Let a held job go on; answers once it ended',
      params: JobParams,
      response: { 200: Type.Object({ jobs_run: Type.Integer() }) },
      handle: async ({ params }) => {
        if (await emulator.releaseJob(params.job_id)) return { jobs_run: 1 };
        throw new Problem('AUD-2204', `No job ${params.job_id} is held: POST /_emulator/jobs/{job_id}/run holds one`);
      },
    }),
    control({
      method: 'GET',
      path: '/faults',
      summary: "The faults still to apply (a namespace's, with one)",
      query: InNamespace,
      response: { 200: Type.Object({ items: Type.Array(Fault) }) },
      handle: async ({ query }) => ({ items: emulator.traffic.listFaults(known(query.namespace)) }),
    }),
    control({
      method: 'POST',
      path: '/faults',
      summary: 'Delay, refuse (429, 500, 502, 503, 504), drop or spoil the answers of the next requests on a path',
      body: FaultBody,
      response: { 201: Fault },
      handle: async ({ body }) => {
        if (body.status === undefined && !body.drop && !body.delay_ms && !body.body)
          throw new Problem('AUD-2202', 'A fault needs status, drop, body or delay_ms: one of them says what it does');
        if (body.drop && (body.status !== undefined || body.body))
          throw new Problem(
            'AUD-2202',
            'A fault that drops the connection answers nothing: give drop alone, or status or body without it',
          );
        known(body.namespace);
        return emulator.traffic.addFault(body);
      },
    }),
    control({
      method: 'DELETE',
      path: '/faults',
      summary: "Remove every fault (a namespace's, with one)",
      query: InNamespace,
      response: { 204: Type.Null() },
      handle: async ({ query }) => emulator.traffic.clearFaults(known(query.namespace)),
    }),
    control({
      method: 'GET',
      path: '/requests',
      summary: 'The requests received (the control API excepted), oldest first, credentials masked',
      query: Type.Object(
        {
          namespace: Type.Optional(NamespaceId),
          method: Type.Optional(Type.String({ maxLength: 10 })),
          path: Type.Optional(Type.String({ maxLength: 2000, description: 'A path; * stands for any characters' })),
          since: Type.Optional(DateTime),
          after: Type.Optional(Type.Integer({ minimum: 0, description: 'Only requests of a greater id' })),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 1000 }),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ items: Type.Array(LoggedRequest) }) },
      handle: async ({ query }) => ({
        items: emulator.traffic.listRequests({ ...query, namespace: known(query.namespace) }),
      }),
    }),
    control({
      method: 'DELETE',
      path: '/requests',
      summary: "Forget the requests received (a namespace's, with one)",
      query: InNamespace,
      response: { 204: Type.Null() },
      handle: async ({ query }) => emulator.traffic.clearRequests(known(query.namespace)),
    }),
    control({
      method: 'GET',
      path: '/outbound',
      summary:
        'The outbound calls the service made (callbacks, mail, webhook deliveries), oldest first, with their bodies and answers',
      query: Type.Object(
        {
          namespace: Type.Optional(NamespaceId),
          kind: Type.Optional(Type.String({ maxLength: 40 })),
          target: Type.Optional(Type.String({ maxLength: 2000, description: 'A target; * stands for any characters' })),
          after: Type.Optional(Type.Integer({ minimum: 0, description: 'Only calls of a greater id' })),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 1000 }),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ items: Type.Array(OutboundCall) }) },
      handle: async ({ query }) => ({ items: emulator.outbound.list({ ...query, namespace: known(query.namespace) }) }),
    }),
    control({
      method: 'GET',
      path: '/webhooks',
      summary: 'The webhook deliveries the service attempted, oldest first, with their headers, bodies and answers',
      query: Type.Object(
        {
          namespace: Type.Optional(NamespaceId),
          url: Type.Optional(
            Type.String({ maxLength: 2000, description: 'An endpoint URL; * stands for any characters' }),
          ),
          type: Type.Optional(Type.String({ maxLength: 100, description: 'An event type (consent.changed …)' })),
          after: Type.Optional(Type.Integer({ minimum: 0, description: 'Only attempts of a greater id' })),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 1000, description: 'The last n' }),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ items: Type.Array(WebhookDelivery) }) },
      handle: async ({ query }) => ({
        items: emulator.outbound
          .list({
            namespace: known(query.namespace),
            kind: 'webhook',
            target: query.url,
            type: query.type,
            after: query.after,
            limit: query.limit,
          })
          .map(({ id, at, target, headers = {}, body, answer, duration_ms, fault, namespace }) => ({
            id,
            at,
            url: target,
            event_id: headers['webhook-id'] ?? '',
            // A body over 64 KB is not kept: its type with it.
            type: (body as { type?: string } | null)?.type ?? '',
            headers,
            body,
            answer,
            duration_ms,
            ...(fault === undefined ? {} : { fault }),
            ...(namespace === undefined ? {} : { namespace }),
          })),
      }),
    }),
    control({
      method: 'DELETE',
      path: '/outbound',
      summary: "Forget the outbound calls (a namespace's, with one)",
      query: InNamespace,
      response: { 204: Type.Null() },
      handle: async ({ query }) => emulator.outbound.clear(known(query.namespace)),
    }),
    control({
      method: 'GET',
      path: '/outbound/faults',
      summary: "The outbound faults still to apply (a namespace's, with one)",
      query: InNamespace,
      response: { 200: Type.Object({ items: Type.Array(OutboundFault) }) },
      handle: async ({ query }) => ({ items: emulator.outbound.listFaults(known(query.namespace)) }),
    }),
    control({
      method: 'POST',
      path: '/outbound/faults',
      summary: "Refuse, delay or answer a status in the target's place for the next outbound calls",
      body: OutboundFaultBody,
      response: { 201: OutboundFault },
      handle: async ({ body }) => {
        if (body.status === undefined && !body.refuse && !body.delay_ms)
          throw new Problem(
            'AUD-2202',
            'An outbound fault needs status, refuse or delay_ms: one of them says what it does',
          );
        if (body.status !== undefined && body.refuse)
          throw new Problem('AUD-2202', 'An outbound fault answers a status or refuses the connection, not both');
        known(body.namespace);
        return emulator.outbound.addFault(body);
      },
    }),
    control({
      method: 'DELETE',
      path: '/outbound/faults',
      summary: "Remove every outbound fault (a namespace's, with one)",
      query: InNamespace,
      response: { 204: Type.Null() },
      handle: async ({ query }) => emulator.outbound.clearFaults(known(query.namespace)),
    }),
    control({
      method: 'GET',
      path: '/mail',
      summary: "The messages the ready account's transactional sends sent, newest first, with their links",
      query: Type.Object(
        {
          namespace: Type.Optional(NamespaceId),
          to: Type.Optional(Type.String({ maxLength: 320, description: 'Only messages to this address' })),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
        },
        { additionalProperties: false },
      ),
      response: { 200: Type.Object({ items: Type.Array(MailMessage) }) },
      handle: async ({ db, query }) => {
        const messages = await readOutbox(db, accountOf(query.namespace), query.limit);
        const to = query.to?.toLowerCase();
        return { items: to ? messages.filter((m) => m.to.some((r) => r.toLowerCase() === to)) : messages };
      },
    }),
    control({
      method: 'GET',
      path: '/limits',
      summary: "The ready account's limits, or a namespace's (null: lifted)",
      query: InNamespace,
      response: { 200: Limits },
      handle: async ({ db, query }) => (await accounts.getAccount(db, accountOf(query.namespace))).limits,
    }),
    control({
      method: 'PATCH',
      path: '/limits',
      summary: "Change limits of the ready account or a namespace's (null lifts one); reset brings back the emulator's",
      query: InNamespace,
      body: Type.Partial(
        Type.Object(Object.fromEntries(LIMIT_NAMES.map((n) => [n, Type.Union([Type.Integer(), Type.Null()])]))),
        { additionalProperties: false },
      ),
      response: { 200: Limits },
      transaction: true,
      handle: async ({ db, services, body, query }) =>
        (await accounts.updateAccount(db, services.feed, accountOf(query.namespace), { limits: body })).limits,
    }),
  ];
  // The address the emulator prints for its control API answers what is there.
  const index = control({
    method: 'GET',
    path: '',
    summary: 'The operations of the control API (docs/emulator.md)',
    response: {
      200: Type.Object({
        operations: Type.Array(Type.Object({ method: Type.String(), path: Type.String(), summary: Type.String() })),
      }),
    },
    handle: async () => ({
      operations: operations.map(({ method, path, summary }) => ({ method, path, summary })),
    }),
  });
  return { tags: ['emulator'], operations: [index, ...operations] };
}

import { pipeline } from 'node:stream';
import zlib from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AccountScope } from '../../core/scope.ts';
import { Type, type TSchema } from 'typebox';
import { Problem, type ProblemCode } from '../../core/problems.ts';
import { accountScope, type Services } from '../../services.ts';
import { spend } from '../plugins/auth.ts';
import * as emailEvents from '../../exports/email-events.ts';
import * as exports from '../../exports/exports.ts';
import { EXPORT_KINDS, type ExportKindName } from '../../exports/kinds.ts';
import { listExports } from '../../exports/list.ts';
import { ALL_SECTIONS_PROBLEMS, SECTION_PROBLEMS } from '../../definitions/definitions.ts';
import { EMAIL_EVENT_EXPORT_PROBLEMS } from '../../exports/email-events.ts';
import { EVENT_EXPORT_PROBLEMS } from '../../exports/events.ts';
import {
  COLUMN_PROBLEMS,
  CONSENT_PLAN_PROBLEMS,
  NAMED_SEGMENTS_PROBLEMS,
  STORED_SEGMENTS_PROBLEMS,
} from '../../exports/plans.ts';
import {
  DownloadUrls,
  EmailReportFileParams,
  EmailReportFileQuery,
  EmailReportQuery,
  EmailReportStatus,
  ExportList,
  ExportListQuery,
  FileDownloadUrl,
  PollUrl,
  ReportId,
  ReportParams,
  SingleExportBody,
  SingleExportFileParams,
  SingleExportParams,
} from '../../exports/schemas.ts';
import * as single from '../../exports/single.ts';
import { SEGMENT_PROBLEMS } from '../../segments/segments.ts';
import type { Queryable } from '../../store/pool.ts';
import { answer, operation, type Operation, type OperationTable } from '../operation.ts';
import { FileAnswer } from '../schemas/problem.ts';
import { XLSX_TYPE } from '../../exports/formats.ts';

/** The items of an Accept or Accept-Encoding header, lower-cased, each with its weight (RFC 9110 §12.4.2; 1 without a q). */
function weighted(header: string | undefined): { name: string; q: number }[] {
  return (header ?? '').split(',').map((part) => {
    const [name, ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return { name, q: q === undefined ? 1 : Number(q.slice(2)) };
  });
}

/** Whether an Accept-Encoding header takes gzip (RFC 9110 §12.5.3: a q of 0 refuses it). */
function acceptsGzip(header: string | undefined): boolean {
  const codings = weighted(header);
  const gzip = codings.find((c) => c.name === 'gzip' || c.name === 'x-gzip') ?? codings.find((c) => c.name === '*');
  return gzip !== undefined && gzip.q > 0;
}

/**
 * The offered media type an Accept header prefers (RFC 9110 §12.5.1): each weighs as the most
 * specific range that names it, and the heaviest wins, the default (the first offered) on a tie.
 * A header that takes none of them gets the default rather than a 406: clients send
 * `Accept: application/json` on every call (ENDPOINTS.md), and are answered the CSV as before.
 */
function preferredType(header: string | undefined, offered: readonly string[]): string {
  if (header === undefined) return offered[0];
  const ranges = weighted(header);
  const weight = (type: string) => {
    const essence = type.split(';')[0];
    const range =
      ranges.find((r) => r.name === essence) ??
      ranges.find((r) => r.name === `${essence.split('/')[0]}/*`) ??
      ranges.find((r) => r.name === '*/*');
    return range !== undefined && range.q > 0 ? range.q : 0;
  };
  return offered.reduce((best, type) => (weight(type) > weight(best) ? type : best));
}

/** Sends a ready export: in the form Accept prefers, compressed when the request takes gzip (EXP-36), else not. */
function sendReady(request: FastifyRequest, reply: FastifyReply, answer: exports.ReadyAnswer): FastifyReply {
  const gzip = acceptsGzip(request.headers['accept-encoding']);
  reply.header('vary', 'accept-encoding');
  if (gzip) reply.header('content-encoding', 'gzip');
  if ('result' in answer) {
    const json = Buffer.from(JSON.stringify(answer.result));
    return reply.type('application/json').send(gzip ? zlib.gzipSync(json) : json);
  }
  const type = preferredType(request.headers.accept, answer.file.types);
  if (answer.file.types.length > 1) reply.header('vary', 'accept, accept-encoding');
  const { stream, compressed } = answer.file.read(type);
  reply.type(type);
  if (gzip === compressed) return reply.send(stream);
  const recoded = gzip ? exports.createExportGzip() : zlib.createGunzip();
  // A failing read (the stored file gone, or corrupt) ends the answer early; the log says why.
  pipeline(stream, recoded, (err) => {
    if (err) request.log.warn({ err }, 'an export file could not be read to the end');
  });
  return reply.send(recoded);
}

const requests = 'profile_export_requests_per_second';
const eventRequests = 'event_export_requests_per_minute';
const downloads = 'export_downloads_per_minute';

const ready = FileAnswer(
  "The file (CSV, or Excel with Accept: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, and for the segment export JSON with Accept: application/json; the event export's JSON) or the result of a count (JSON), gzip-compressed when Accept-Encoding takes gzip",
  ['text/csv', XLSX_TYPE, 'application/json'],
);

/** Exports and counts (SPEC §4.7) and their poll URLs (SPEC §3.3), on the routes of ENDPOINTS.md "Exports and counts". */
export function exportsRoutes(services: Services): OperationTable {
  const pollUrl = (id: string, prefix = '') => `${services.config.publicUrl}${prefix}/audience/profiles/reports/${id}`;

  /**
   * The operation that creates an export of a kind (src/exports/kinds.ts): it takes its kind's
   * body, creates the export in one transaction and answers 201 with where to find it.
   */
  const create = (route: {
    path: string;
    summary: string;
    description: string;
    errors: readonly ProblemCode[];
    /** The request body the reference shows, where the one made from the schema would break a rule. */
    example?: unknown;
    kind: ExportKindName;
    rateLimit: typeof requests | typeof eventRequests;
    created: TSchema;
    answer: (id: string) => unknown;
  }): Operation =>
    operation({
      method: 'POST',
      path: route.path,
      summary: route.summary,
      description: route.description,
      // Every export reaches the data of every section (exports.createExport).
      errors: [...ALL_SECTIONS_PROBLEMS, ...route.errors],
      ...(route.example === undefined ? {} : { examples: { body: route.example } }),
      body: EXPORT_KINDS[route.kind].body as TSchema,
      response: { 201: route.created },
      scope: 'account',
      transaction: true,
      rateLimit: route.rateLimit,
      // The body was checked against the kind's schema.
      handle: async ({ db, scope, body }) =>
        route.answer(await exports.createExport(db, scope, { kind: route.kind, body } as exports.ExportRequest)),
    });

  /** A poll of either form; only the v2 form answers "in progress" without a problem. */
  const poll =
    (form: 'v1' | 'v2') =>
    async (context: {
      db: Queryable;
      scope: AccountScope;
      params: { report_id: string };
      request: FastifyRequest;
      reply: FastifyReply;
    }) => {
      const polled = await exports.pollExport(
        context.db,
        services.files,
        context.scope,
        context.params.report_id,
        form,
      );
      return 'inProgress' in polled ? answer(202) : sendReady(context.request, context.reply, polled);
    };

  // Examples of the bodies that take one of two fields (channel_discriminator or channels, a
  // stored segment or a query): the ones made from the schemas would send both.
  const byConsent = {
    section_discriminator: 'com.vendor1.sections.user-created.shop',
    topic_discriminators: ['com.vendor1.topics.user-created.weekly-newsletter'],
    channel_discriminator: 'com.vendor1.channels.email',
    segments: {
      timezone: 'Europe/Berlin',
      segment_discriminators: { 'Frequent buyers': 'com.vendor1.segments.user-created.frequent-buyers' },
    },
  };

  const authHeader = `x-${services.config.vendor}-auth`;
  return {
    tags: ['exports'],
    operations: [
      create({
        path: '/audience/profiles/reports/consents',
        summary: 'Profile in segment by consent export',
        description:
          'The profiles of a segment with their consents to 1 to 100 topics on 1 or 2 channels, as a file: answers the poll URL to fetch it from when ready. One export request a second; a limited number may be pending at once.',
        errors: [
          ...SECTION_PROBLEMS,
          ...STORED_SEGMENTS_PROBLEMS,
          ...CONSENT_PLAN_PROBLEMS,
          ...COLUMN_PROBLEMS,
          'AUD-1905',
          'AUD-1907',
        ],
        example: {
          ...byConsent,
          tags: [{ field_name: 'vip', tag_discriminator: 'com.vendor1.tags.user-created.vip' }],
          limit: 1000,
        },
        kind: 'consents',
        rateLimit: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      }),
      create({
        path: '/audience/profiles/reports/consents/count',
        summary: 'Count profiles in segment by consent',
        description:
          'How many profiles of a segment have each consent state on the topics: answers the poll URL of the count.',
        errors: [
          ...SECTION_PROBLEMS,
          ...STORED_SEGMENTS_PROBLEMS,
          ...CONSENT_PLAN_PROBLEMS,
          'AUD-1905',
          'AUD-1907',
          'AUD-1908',
        ],
        example: byConsent,
        kind: 'consents-count',
        rateLimit: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      }),
      create({
        path: '/audience/profiles/reports/duplicates',
        summary: 'Duplicate profile in segment by consent export',
        description:
          'The profiles of a segment that share an address on a channel, with their consents, as a file at the poll URL.',
        errors: [
          ...SECTION_PROBLEMS,
          ...NAMED_SEGMENTS_PROBLEMS,
          ...CONSENT_PLAN_PROBLEMS,
          ...COLUMN_PROBLEMS,
          'AUD-1905',
        ],
        kind: 'duplicates',
        rateLimit: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      }),
      create({
        path: '/audience/profiles/reports/segments',
        summary: 'Profile in segment export (beta)',
        description:
          'The profiles of one or more segments with up to 75 attributes and 25 tags, as a file: answers the two forms of its poll URL.',
        errors: [...SECTION_PROBLEMS, ...SEGMENT_PROBLEMS, ...COLUMN_PROBLEMS, 'AUD-1905'],
        example: {
          section_discriminator: 'com.vendor1.sections.user-created.shop',
          segment: {
            timezone: 'Europe/Berlin',
            segment_discriminator: 'com.vendor1.segments.user-created.frequent-buyers',
          },
          known_profiles: true,
          tags: [{ field_name: 'vip', tag_discriminator: 'com.vendor1.tags.user-created.vip' }],
        },
        kind: 'segments',
        rateLimit: requests,
        created: DownloadUrls,
        answer: (id) => ({ file_download_url: pollUrl(id), file_download_url_v2: pollUrl(id, '/v2') }),
      }),
      create({
        path: '/audience/profiles/exports',
        summary: 'Profile in segment event export',
        description:
          "The events of a segment's profiles in a window, as a file at the poll URL. One event export a minute.",
        errors: [...EVENT_EXPORT_PROBLEMS, 'AUD-1905'],
        kind: 'events',
        rateLimit: eventRequests,
        created: FileDownloadUrl,
        answer: (id) => ({ file_download_url: pollUrl(id) }),
      }),
      // The email event export (SPEC §4.8): a report id, its status, and its file at URLs that each status call issues.
      create({
        path: '/emails/reports',
        summary: 'Email event export',
        description:
          "The email events (sent, opened, clicked, bounced …) of a window of at most three months, with attributes and tags of their profiles: answers a report id whose status (`GET /emails/reports/{report_id}`) gives the file's URL. One event export a minute.",
        errors: [...EMAIL_EVENT_EXPORT_PROBLEMS, 'AUD-1905'],
        kind: 'email-events',
        rateLimit: eventRequests,
        created: ReportId,
        answer: (id) => ({ report_id: id }),
      }),
      operation({
        method: 'POST',
        path: '/audience/profiles/export-single/:export_key',
        rateLimit: requests,
        summary: 'Single profile export (beta)',
        errors: [...ALL_SECTIONS_PROBLEMS, ...single.SINGLE_EXPORT_PROBLEMS],
        description:
          'Answers 202 with an empty body (and the URL of the file in Location); then POSTs {"code": 100, "message": "Callback verified"} to callback_url and, once the file is written, {"code": 200, "message": <the URL of the file>}. No second callback when the first is not taken.',
        params: SingleExportParams,
        body: SingleExportBody,
        response: { 202: Type.Null({ description: 'Accepted: the callbacks follow' }) },
        scope: 'account',
        transaction: true,
        handle: async ({ db, scope, params, body }) => {
          const id = await single.requestSingleExport(db, scope, params.export_key, body);
          return answer(202, undefined, {
            location: single.singleExportUrl(services.config.publicUrl, scope.accountId, id),
          });
        },
      }),
      operation({
        method: 'GET',
        path: '/audience/profiles/export-single/accounts/:account_id/definitions/:export_id',
        rateLimit: downloads,
        summary: 'The file of a single profile export',
        errors: [...ALL_SECTIONS_PROBLEMS, 'AUD-9', 'AUD-1901', 'AUD-1902', 'AUD-1903', 'AUD-1904'],
        description:
          'The URL of the second callback. 200 with the file (JSON) when ready, for one day; 404 while in progress or for an unknown id; 503 when the export failed (the detail says why); 410 once gone. The metadata=true of the URL changes nothing: include_type_definitions decides.',
        params: SingleExportFileParams,
        response: {
          200: FileAnswer('The file (JSON), gzip-compressed when Accept-Encoding takes gzip', ['application/json']),
        },
        scope: 'account',
        handle: async ({ db, scope, params, request, reply }) =>
          sendReady(
            request,
            reply,
            await single.readSingleExport(db, services.files, scope, params.account_id, params.export_id),
          ),
      }),
      operation({
        method: 'GET',
        path: '/emails/reports/:report_id',
        summary: 'Status of an email event export',
        errors: [...ALL_SECTIONS_PROBLEMS, 'AUD-1902', 'AUD-1903'],
        description: `The status of an email event export: requested, then completed (with a new download URL on every call) or error; 404 for an unknown id, 410 once the file has expired. With header_auth=true the URL carries no credential, and the token the download needs comes in the response header ${authHeader}.`,
        params: ReportParams,
        query: EmailReportQuery,
        response: { 200: EmailReportStatus },
        scope: 'account',
        handle: async ({ db, scope, params, query }) => {
          const status = await emailEvents.emailReportStatus(
            db,
            scope,
            services.config.publicUrl,
            params.report_id,
            query.header_auth === true,
          );
          return answer(200, status.body, status.headerToken !== undefined ? { [authHeader]: status.headerToken } : {});
        },
      }),
      // The download URL carries its own credential, or needs the status answer's token in a header: no bearer token (AUTH-09).
      operation({
        method: 'GET',
        path: '/files/email-events/:account_id/:report_id',
        summary: 'The file of an email event export',
        errors: ['AUD-1902', 'AUD-1912', 'AUD-1913'],
        description: `The gzip-compressed CSV at the URL of a status answer. 403 without the URL's token (or, for a header_auth URL, the ${authHeader} header of the status answer) or once the URL has expired; 410 once the file has expired.`,
        params: EmailReportFileParams,
        query: EmailReportFileQuery,
        response: { 200: FileAnswer('The gzip-compressed CSV', [emailEvents.GZIP_TYPE]) },
        scope: 'link',
        // An account that does not exist is refused as a wrong credential is: the URL tells nothing of which accounts exist.
        resolve: async (request) => {
          const accountId = (request.params as { account_id: string }).account_id;
          if (!/^\d{1,18}$/.test(accountId) || !(await services.accounts.get(accountId)))
            throw new Problem('AUD-1913', 'The download URL is not valid; call the status endpoint for a new one');
          return accountScope(services, accountId);
        },
        handle: async ({ db, scope, params, query, request, reply }) => {
          const header = request.headers[authHeader];
          const stream = await emailEvents.readEmailReportFile(db, services.files, scope, params.report_id, {
            token: query.token,
            headerToken: typeof header === 'string' ? header : undefined,
          });
          try {
            await spend(services, scope.accountId, scope.accountId, downloads);
          } catch (err) {
            stream.destroy();
            throw err;
          }
          return reply
            .type(emailEvents.GZIP_TYPE)
            .header('content-disposition', `attachment; filename="email-events-${params.report_id}.csv.gz"`)
            .send(stream);
        },
      }),
      operation({
        method: 'GET',
        path: '/audience/profiles/reports',
        summary: 'List exports',
        description:
          "The service's own route (for its console); a key restricted to sections is refused, as exports may name any section.",
        errors: ALL_SECTIONS_PROBLEMS,
        query: ExportListQuery,
        response: { 200: ExportList },
        scope: 'account',
        handle: async ({ db, scope, services, query }) => ({
          items: await listExports(db, scope, query.limit, services.apiKeys),
        }),
      }),
      operation({
        method: 'GET',
        path: '/audience/profiles/reports/:report_id',
        rateLimit: downloads,
        summary: 'Poll an export',
        description:
          "The poll URL of an export or count: 404 (`AUD-1901`) while it is in progress, 200 with the file (or the count's result) when ready, 410 once it is gone or for an unknown id. The file is CSV, Excel with `Accept: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet`, or JSON for the segment export with `Accept: application/json`; gzip-compressed when `Accept-Encoding` takes gzip. A poll URL lives a day; 60 downloads a minute.",
        errors: [...ALL_SECTIONS_PROBLEMS, 'AUD-1901', 'AUD-1902', 'AUD-1904'],
        params: ReportParams,
        response: { 200: ready },
        scope: 'account',
        handle: poll('v1'),
      }),
      operation({
        method: 'GET',
        path: '/v2/audience/profiles/reports/:report_id',
        rateLimit: downloads,
        summary: 'Poll an export (v2)',
        description:
          'The second form of the poll URL: 202 while the export is in progress, 200 with the file when ready, 404 for an unknown id, 410 once the file is gone. Formats and limits as the first form.',
        errors: [...ALL_SECTIONS_PROBLEMS, 'AUD-1902', 'AUD-1903', 'AUD-1904'],
        params: ReportParams,
        response: { 200: ready, 202: Type.Null({ description: 'In progress: poll again later' }) },
        scope: 'account',
        handle: poll('v2'),
      }),
    ],
  };
}

import { pipeline } from 'node:stream';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from 'typebox';
import { Problem } from '../../core/problems.ts';
import { accountScope, type Services } from '../../services.ts';
import { spend } from '../plugins/auth.ts';
import type { LimitName } from '../../core/limits.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import * as emailEvents from '../../exports/email-events.ts';
import * as exports from '../../exports/exports.ts';
import { EXPORT_KINDS, type ExportKindName } from '../../exports/kinds.ts';
import {
  DownloadUrls,
  EmailReportFileParams,
  EmailReportFileQuery,
  EmailReportQuery,
  EmailReportStatus,
  FileDownloadUrl,
  PollUrl,
  ReportId,
  ReportParams,
  SingleExportBody,
  SingleExportFileParams,
  SingleExportParams,
} from '../../exports/schemas.ts';
import * as single from '../../exports/single.ts';
import { withTransaction } from '../../store/pool.ts';
import { responses } from '../schemas/problem.ts';

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
  const recoded = gzip ? zlib.createGzip() : zlib.createGunzip();
  pipeline(stream, recoded, () => {});
  return reply.send(recoded);
}

/** Exports and counts (SPEC §4.7) and their poll URLs (SPEC §3.3), on the routes of ENDPOINTS.md "Exports and counts". */
export function exportsRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['exports'];
    const requests = { rateLimit: 'profile_export_requests_per_second' as const };
    const eventRequests = { rateLimit: 'event_export_requests_per_minute' as const };
    const downloads = { rateLimit: 'export_downloads_per_minute' as const };

    const pollUrl = (id: string, prefix = '') =>
      `${services.config.publicUrl}${prefix}/audience/profiles/reports/${id}`;

    /**
     * The routes that create an export of a kind (src/exports/kinds.ts): each takes its kind's
     * body, creates the export in one transaction and answers 201 with where to find it.
     */
    const creates: {
      path: string;
      summary: string;
      kind: ExportKindName;
      config: { rateLimit: LimitName };
      created: TSchema;
      answer: (id: string) => unknown;
    }[] = [
      {
        path: '/audience/profiles/reports/consents',
        summary: 'Profile in segment by consent export',
        kind: 'consents',
        config: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      },
      {
        path: '/audience/profiles/reports/consents/count',
        summary: 'Count profiles in segment by consent',
        kind: 'consents-count',
        config: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      },
      {
        path: '/audience/profiles/reports/duplicates',
        summary: 'Duplicate profile in segment by consent export',
        kind: 'duplicates',
        config: requests,
        created: PollUrl,
        answer: (id) => ({ poll_url: pollUrl(id) }),
      },
      {
        path: '/audience/profiles/reports/segments',
        summary: 'Profile in segment export (beta)',
        kind: 'segments',
        config: requests,
        created: DownloadUrls,
        answer: (id) => ({ file_download_url: pollUrl(id), file_download_url_v2: pollUrl(id, '/v2') }),
      },
      {
        path: '/audience/profiles/exports',
        summary: 'Profile in segment event export',
        kind: 'events',
        config: eventRequests,
        created: FileDownloadUrl,
        answer: (id) => ({ file_download_url: pollUrl(id) }),
      },
      {
        // The email event export (SPEC §4.8): a report id, its status, and its file at URLs that each status call issues.
        path: '/emails/reports',
        summary: 'Email event export',
        kind: 'email-events',
        config: eventRequests,
        created: ReportId,
        answer: (id) => ({ report_id: id }),
      },
    ];
    for (const route of creates) {
      app.post(
        route.path,
        {
          config: route.config,
          schema: {
            summary: route.summary,
            tags,
            body: EXPORT_KINDS[route.kind].body,
            response: responses({ 201: route.created }),
          },
        },
        async (request, reply) => {
          const scope = await scopeOf(request);
          // The body was checked against the kind's schema.
          const exportRequest = { kind: route.kind, body: request.body } as exports.ExportRequest;
          const id = await withTransaction(services.pool, (tx) => exports.createExport(tx, scope, exportRequest));
          return reply.code(201).send(route.answer(id));
        },
      );
    }

    app.post(
      '/audience/profiles/export-single/:export_key',
      {
        config: requests,
        schema: {
          summary: 'Single profile export (beta)',
          description:
            'Answers 202 with an empty body (and the URL of the file in Location); then POSTs {"code": 100, "message": "Callback verified"} to callback_url and, once the file is written, {"code": 200, "message": <the URL of the file>}. No second callback when the first is not taken.',
          tags,
          params: SingleExportParams,
          body: SingleExportBody,
          response: responses({ 202: Type.Null({ description: 'Accepted: the callbacks follow' }) }),
        },
      },
      async (request, reply) => {
        const scope = await scopeOf(request);
        const id = await withTransaction(services.pool, (tx) =>
          single.requestSingleExport(tx, scope, request.params.export_key, request.body),
        );
        return reply
          .code(202)
          .header('location', single.singleExportUrl(services.config.publicUrl, scope.accountId, id))
          .send();
      },
    );

    app.get(
      '/audience/profiles/export-single/accounts/:account_id/definitions/:export_id',
      {
        config: downloads,
        schema: {
          summary: 'The file of a single profile export: the URL of its second callback',
          description:
            '200 with the file (JSON) when ready, for one day; 404 while in progress or for an unknown id; 503 when the export failed (the detail says why); 410 once gone. The metadata=true of the URL changes nothing: include_type_definitions decides.',
          tags,
          params: SingleExportFileParams,
          response: responses({
            200: Type.Unknown({ description: 'The file (JSON), gzip-compressed when Accept-Encoding takes gzip' }),
          }),
        },
      },
      async (request, reply) => {
        const { account_id: accountId, export_id: exportId } = request.params;
        return sendReady(
          request,
          reply,
          await single.readSingleExport(services.pool, services.files, await scopeOf(request), accountId, exportId),
        );
      },
    );

    const authHeader = `x-${services.config.vendor}-auth`;
    app.get(
      '/emails/reports/:report_id',
      {
        schema: {
          summary: 'Status of an email event export',
          description: `requested, then completed (with a new download URL on every call) or error; 404 for an unknown id, 410 once the file has expired. With header_auth=true the URL carries no credential, and the token the download needs comes in the response header ${authHeader}.`,
          tags,
          params: ReportParams,
          querystring: EmailReportQuery,
          response: responses({ 200: EmailReportStatus }),
        },
      },
      async (request, reply) => {
        const answer = await emailEvents.emailReportStatus(
          services.pool,
          await scopeOf(request),
          services.config.publicUrl,
          request.params.report_id,
          request.query.header_auth === true,
        );
        if (answer.headerToken !== undefined) reply.header(authHeader, answer.headerToken);
        return answer.body;
      },
    );

    // The download URL carries its own credential, or needs the status answer's token in a header: no bearer token (AUTH-09).
    app.get(
      '/files/email-events/:account_id/:report_id',
      {
        config: { auth: 'none' },
        schema: {
          summary: 'The file of an email event export (gzip-compressed CSV), at the URL of a status answer',
          description: `403 without the URL's token (or, for a header_auth URL, the ${authHeader} header of the status answer) or once the URL has expired; 410 once the file has expired.`,
          tags,
          params: EmailReportFileParams,
          querystring: EmailReportFileQuery,
          response: responses({ 200: Type.Unknown({ description: 'The gzip-compressed CSV' }) }),
        },
      },
      async (request, reply) => {
        const { account_id: accountId, report_id: reportId } = request.params;
        // An account that does not exist is refused as a wrong credential is: the URL tells nothing of which accounts exist.
        if (!/^\d{1,18}$/.test(accountId) || !(await services.accounts.get(accountId)))
          throw new Problem('AUD-1913', 'The download URL is not valid; call the status endpoint for a new one');
        const header = request.headers[authHeader];
        const stream = await emailEvents.readEmailReportFile(
          services.pool,
          services.files,
          await accountScope(services, accountId),
          reportId,
          {
            token: request.query.token,
            headerToken: typeof header === 'string' ? header : undefined,
          },
        );
        try {
          await spend(services, accountId, accountId, 'export_downloads_per_minute');
        } catch (err) {
          stream.destroy();
          throw err;
        }
        return reply
          .type(emailEvents.GZIP_TYPE)
          .header('content-disposition', `attachment; filename="email-events-${reportId}.csv.gz"`)
          .send(stream);
      },
    );

    const ready = Type.Unknown({
      description:
        "The file (CSV, or Excel with Accept: application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, and for the segment export JSON with Accept: application/json; the event export's JSON) or the result of a count (JSON), gzip-compressed when Accept-Encoding takes gzip",
    });
    /** A poll of either form; only the v2 form answers "in progress" without a problem. */
    const poll =
      (form: 'v1' | 'v2') =>
      async (request: FastifyRequest<{ Params: { report_id: string } }>, reply: FastifyReply) => {
        const answer = await exports.pollExport(
          services.pool,
          services.files,
          await scopeOf(request),
          request.params.report_id,
          form,
        );
        return 'inProgress' in answer ? reply.code(202).send() : sendReady(request, reply, answer);
      };

    app.get(
      '/audience/profiles/reports/:report_id',
      {
        config: downloads,
        schema: {
          summary: 'Poll an export: 404 while in progress, 200 when ready, 410 when gone or unknown',
          tags,
          params: ReportParams,
          response: responses({ 200: ready }),
        },
      },
      poll('v1'),
    );

    app.get(
      '/v2/audience/profiles/reports/:report_id',
      {
        config: downloads,
        schema: {
          summary: 'Poll an export (v2): 202 while in progress, 200 when ready, 404 for an unknown id, 410 when gone',
          tags,
          params: ReportParams,
          response: responses({ 200: ready, 202: Type.Null({ description: 'In progress: poll again later' }) }),
        },
      },
      poll('v2'),
    );
  };
}

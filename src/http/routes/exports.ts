import { pipeline } from 'node:stream';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Services } from '../../services.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import * as exports from '../../exports/exports.ts';
import { ConsentCountBody, ConsentExportBody, DownloadUrls, DuplicateExportBody, EventExportBody, FileDownloadUrl, PollUrl, ReportParams, SegmentExportBody } from '../../exports/schemas.ts';
import { withTransaction } from '../../store/pool.ts';
import { responses } from '../schemas/problem.ts';

/** Whether an Accept-Encoding header takes gzip (RFC 9110 §12.5.3: a q of 0 refuses it). */
function acceptsGzip(header: string | undefined): boolean {
  const codings = (header ?? '').split(',').map((part) => {
    const [name, ...params] = part.split(';').map((p) => p.trim());
    const q = params.find((p) => p.toLowerCase().startsWith('q='));
    return { name: name.toLowerCase(), q: q === undefined ? 1 : Number(q.slice(2)) };
  });
  const gzip = codings.find((c) => c.name === 'gzip' || c.name === 'x-gzip') ?? codings.find((c) => c.name === '*');
  return gzip !== undefined && gzip.q > 0;
}

/** Sends a ready export: compressed when the request takes gzip (EXP-36), else as it is. */
function sendReady(request: FastifyRequest, reply: FastifyReply, answer: Exclude<exports.PollAnswer, { inProgress: true }>): FastifyReply {
  const gzip = acceptsGzip(request.headers['accept-encoding']);
  reply.header('vary', 'accept-encoding');
  if (gzip) reply.header('content-encoding', 'gzip');
  if ('result' in answer) {
    const json = Buffer.from(JSON.stringify(answer.result));
    return reply.type('application/json').send(gzip ? zlib.gzipSync(json) : json);
  }
  reply.type(answer.contentType);
  if (gzip) return reply.send(answer.file);
  const plain = zlib.createGunzip();
  pipeline(answer.file, plain, () => {});
  return reply.send(plain);
}

/** Exports and counts (SPEC §4.7) and their poll URLs (SPEC §3.3), on the routes of ENDPOINTS.md "Exports and counts". */
export function exportsRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['exports'];
    const requests = { rateLimit: 'profile_export_requests_per_second' as const };
    const eventRequests = { rateLimit: 'event_export_requests_per_minute' as const };
    const downloads = { rateLimit: 'export_downloads_per_minute' as const };

    /** Creates the export in one transaction and answers its id. */
    const create = async (request: FastifyRequest, exportRequest: exports.ExportRequest) => {
      const scope = await scopeOf(request);
      return withTransaction(services.pool, (tx) => exports.createExport(tx, scope, exportRequest));
    };
    const pollUrl = (id: string, prefix = '') => `${services.config.publicUrl}${prefix}/audience/profiles/reports/${id}`;

    app.post('/audience/profiles/reports/consents', {
      config: requests,
      schema: { summary: 'Profile in segment by consent export', tags, body: ConsentExportBody, response: responses({ 201: PollUrl }) },
    }, async (request, reply) => reply.code(201).send({ poll_url: pollUrl(await create(request, { kind: 'consents', body: request.body })) }));

    app.post('/audience/profiles/reports/consents/count', {
      config: requests,
      schema: { summary: 'Count profiles in segment by consent', tags, body: ConsentCountBody, response: responses({ 201: PollUrl }) },
    }, async (request, reply) => reply.code(201).send({ poll_url: pollUrl(await create(request, { kind: 'consents-count', body: request.body })) }));

    app.post('/audience/profiles/reports/duplicates', {
      config: requests,
      schema: { summary: 'Duplicate profile in segment by consent export', tags, body: DuplicateExportBody, response: responses({ 201: PollUrl }) },
    }, async (request, reply) => reply.code(201).send({ poll_url: pollUrl(await create(request, { kind: 'duplicates', body: request.body })) }));

    app.post('/audience/profiles/reports/segments', {
      config: requests,
      schema: { summary: 'Profile in segment export (beta)', tags, body: SegmentExportBody, response: responses({ 201: DownloadUrls }) },
    }, async (request, reply) => {
      const id = await create(request, { kind: 'segments', body: request.body });
      return reply.code(201).send({ file_download_url: pollUrl(id), file_download_url_v2: pollUrl(id, '/v2') });
    });

    app.post('/audience/profiles/exports', {
      config: eventRequests,
      schema: { summary: 'Profile in segment event export', tags, body: EventExportBody, response: responses({ 201: FileDownloadUrl }) },
    }, async (request, reply) => reply.code(201).send({ file_download_url: pollUrl(await create(request, { kind: 'events', body: request.body })) }));

    const ready = Type.Unknown({ description: 'The file (CSV; JSON for the event export) or the result of a count (JSON), gzip-compressed when Accept-Encoding takes gzip' });
    /** A poll of either form; only the v2 form answers "in progress" without a problem. */
    const poll = (form: 'v1' | 'v2') => async (request: FastifyRequest<{ Params: { report_id: string } }>, reply: FastifyReply) => {
      const answer = await exports.pollExport(services.pool, services.files, await scopeOf(request), request.params.report_id, form);
      return 'inProgress' in answer ? reply.code(202).send() : sendReady(request, reply, answer);
    };

    app.get('/audience/profiles/reports/:report_id', {
      config: downloads,
      schema: { summary: 'Poll an export: 404 while in progress, 200 when ready, 410 when gone or unknown', tags, params: ReportParams, response: responses({ 200: ready }) },
    }, poll('v1'));

    app.get('/v2/audience/profiles/reports/:report_id', {
      config: downloads,
      schema: {
        summary: 'Poll an export (v2): 202 while in progress, 200 when ready, 404 for an unknown id, 410 when gone', tags, params: ReportParams,
        response: responses({ 200: ready, 202: Type.Null({ description: 'In progress: poll again later' }) }),
      },
    }, poll('v2'));
  };
}

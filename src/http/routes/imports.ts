import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TSchema } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import multipart from '@fastify/multipart';
import type { Services } from '../../services.ts';
import type { ScopeOf } from '../plugins/profile-data.ts';
import * as imports from '../../imports/imports.ts';
import {
  ImportCreated,
  ImportParams,
  ImportStatus,
  ImportV1,
  ImportV2,
  type ImportRequest,
} from '../../imports/schemas.ts';
import { SectionParams } from '../schemas/common.ts';
import { withTransaction } from '../../store/pool.ts';
import { Problem } from '../../core/problems.ts';
import { NoContent, responses } from '../schemas/problem.ts';

/** Profile imports (SPEC §4.6) on the routes of ENDPOINTS.md "Imports", and the upload of their files. */
export function importsRoutes(services: Services, scopeOf: ScopeOf) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const tags = ['imports'];
    const config = { rateLimit: 'import_requests_per_minute' as const };

    /** The schema of the create route of one version. */
    const createSchema = <B extends TSchema>(version: ImportRequest['version'], body: B) => ({
      summary: `Create an import (version ${version})`,
      tags,
      params: SectionParams,
      body,
      response: responses({ 201: ImportCreated }),
    });
    /** Creates the import in one transaction, in the scope of the request's account. */
    const create = async (request: FastifyRequest, sectionDiscriminator: string, importRequest: ImportRequest) => {
      const scope = await scopeOf(request);
      return withTransaction(services.pool, (tx) =>
        imports.createImport(tx, scope, services.uploads, sectionDiscriminator, importRequest),
      );
    };
    // One route per version, so that each body is typed by its own schema and paired with its version.
    app.post(
      '/audience/sections/:section_discriminator/imports',
      { config, schema: createSchema(1, ImportV1) },
      async (request, reply) =>
        reply
          .code(201)
          .send(await create(request, request.params.section_discriminator, { version: 1, body: request.body })),
    );
    app.post(
      '/v2/audience/sections/:section_discriminator/imports',
      { config, schema: createSchema(2, ImportV2) },
      async (request, reply) =>
        reply
          .code(201)
          .send(await create(request, request.params.section_discriminator, { version: 2, body: request.body })),
    );

    app.get(
      '/audience/sections/:section_discriminator/imports/:import_id',
      {
        schema: {
          summary: 'Status and report of an import',
          tags,
          params: ImportParams,
          response: responses({ 200: ImportStatus }),
        },
      },
      async (request) =>
        imports.getImport(
          services.pool,
          await scopeOf(request),
          request.params.section_discriminator,
          request.params.import_id,
        ),
    );

    // The upload: an S3-style signed POST form, with no bearer token (ENDPOINTS.md "Imports").
    await app.register(async (upload) => {
      await upload.register(multipart, {
        limits: { fields: 20, fieldSize: 8192, files: 1, fileSize: imports.MAX_FILE_BYTES },
      });
      upload.post(
        '/files/uploads',
        {
          config: { auth: 'none' },
          schema: {
            summary: 'Upload an import file with its signed form',
            tags,
            security: [],
            consumes: ['multipart/form-data'],
            response: responses({ 204: NoContent }),
          },
        },
        async (request, reply) => {
          if (!request.isMultipart())
            throw new Problem(
              'AUD-1810',
              'The upload is a multipart/form-data form: the fields of file_upload_body, then the part "file"',
            );
          const fields: Record<string, string> = {};
          // A form that breaks off (a truncated body, a malformed part) is the client's fault: a 400, not a 500.
          let fileError: Error | undefined;
          let storing = false;
          try {
            for await (const part of request.parts()) {
              if (part.type === 'field') {
                fields[part.fieldname] = String(part.value);
                continue;
              }
              part.file.once('error', (err: Error) => (fileError = err));
              if (part.fieldname !== 'file')
                throw new Problem(
                  'AUD-1810',
                  `Unexpected file part "${part.fieldname}": the file goes in the part "file"`,
                );
              const checked = services.uploads.verify(fields, new Date(services.clock()));
              if ('refused' in checked) {
                part.file.resume();
                if (checked.refused === 'expired')
                  throw new Problem('AUD-1807', 'The upload window of this form has passed; create a new import');
                throw new Problem(
                  'AUD-1806',
                  `The upload form was changed or is incomplete (${checked.refused === 'signature' ? 'the signature does not match' : `field "${checked.refused}"`})`,
                );
              }
              const [accountId, importId] = checked.grant.metaId.split('/');
              storing = true;
              await imports.acceptUpload(
                services.pool,
                services.files,
                accountId,
                importId,
                checked.grant.key,
                part.file,
              );
              return reply.code(204).send();
            }
          } catch (err) {
            if (err instanceof Problem) throw err;
            // Reading the parts fails only for the form; storing the file, for the form when its stream failed.
            const formError = storing ? fileError : (err as Error);
            if (formError)
              throw new Problem(
                'AUD-1810',
                `The upload is not a complete multipart/form-data body: ${formError.message}`,
              );
            throw err;
          }
          throw new Problem('AUD-1810', 'The upload has no part "file"');
        },
      );
    });
  };
}

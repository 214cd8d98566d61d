import * as imports from '../../imports/imports.ts';
import {
  ImportCreated,
  ImportList,
  ImportListQuery,
  ImportParams,
  ImportStatus,
  ImportV1,
  ImportV2,
} from '../../imports/schemas.ts';
import { receiveUpload } from '../../imports/uploads.ts';
import { Problem } from '../../core/problems.ts';
import { operation, type OperationTable } from '../operation.ts';
import { SectionParams } from '../schemas/common.ts';
import { NoContent } from '../schemas/problem.ts';

const rateLimit = 'import_requests_per_minute';

/** Profile imports (SPEC §4.6) on the routes of ENDPOINTS.md "Imports", and the upload of their files. */
export const importsRoutes: OperationTable = {
  tags: ['imports'],
  // One operation per version, so that each body is typed by its own schema and paired with its version.
  operations: [
    operation({
      method: 'POST',
      path: '/audience/sections/:section_discriminator/imports',
      summary: 'Create an import (version 1)',
      params: SectionParams,
      body: ImportV1,
      response: { 201: ImportCreated },
      scope: 'account',
      transaction: true,
      rateLimit,
      handle: ({ db, scope, services, params, body }) =>
        imports.createImport(db, scope, services.uploads, params.section_discriminator, { version: 1, body }),
    }),
    operation({
      method: 'POST',
      path: '/v2/audience/sections/:section_discriminator/imports',
      summary: 'Create an import (version 2)',
      params: SectionParams,
      body: ImportV2,
      response: { 201: ImportCreated },
      scope: 'account',
      transaction: true,
      rateLimit,
      handle: ({ db, scope, services, params, body }) =>
        imports.createImport(db, scope, services.uploads, params.section_discriminator, { version: 2, body }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/imports',
      summary: "List the section's imports, newest first, with their progress",
      params: SectionParams,
      query: ImportListQuery,
      response: { 200: ImportList },
      scope: 'account',
      handle: async ({ db, scope, params, query }) => ({
        items: await imports.listImports(db, scope, params.section_discriminator, query.limit),
      }),
    }),
    operation({
      method: 'GET',
      path: '/audience/sections/:section_discriminator/imports/:import_id',
      summary: 'Status and report of an import',
      params: ImportParams,
      response: { 200: ImportStatus },
      scope: 'account',
      handle: ({ db, scope, params }) => imports.getImport(db, scope, params.section_discriminator, params.import_id),
    }),
    // The upload: an S3-style signed POST form, with no bearer token (ENDPOINTS.md "Imports").
    operation({
      method: 'POST',
      path: '/files/uploads',
      summary: 'Upload an import file with its signed form',
      multipart: { fields: 20, fieldSize: 8192, files: 1, fileSize: imports.MAX_FILE_BYTES },
      response: { 204: NoContent },
      scope: 'public',
      handle: async ({ services, request }) => {
        if (!request.isMultipart())
          throw new Problem(
            'AUD-1810',
            'The upload is a multipart/form-data form: the fields of file_upload_body, then the part "file"',
          );
        await receiveUpload(services, request.parts());
      },
    }),
  ],
};

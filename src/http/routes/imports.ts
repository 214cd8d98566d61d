import * as imports from '../../imports/imports.ts';
import { ImportCreated, ImportParams, ImportStatus, ImportV1, ImportV2 } from '../../imports/schemas.ts';
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
      description:
        "Requests an import of profiles from a CSV file: the mappings say which columns are keys, attributes, tags and consents. Answers the import's id and the signed form to upload the file with (`POST /files/uploads`) within 5 minutes. 10 import requests a minute; a limited number may wait for their file at once.",
      errors: ['AUD-1102', 'AUD-1107', 'AUD-1101', 'AUD-1801', 'AUD-1802', 'AUD-1803', 'AUD-1804'],
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
      description:
        "Requests an import as version 1 does, with mappings by attribute discriminator and consent mappings per topic and channel. Answers the import's id and the signed upload form.",
      errors: ['AUD-1102', 'AUD-1107', 'AUD-1101', 'AUD-1801', 'AUD-1802', 'AUD-1803', 'AUD-1804'],
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
      path: '/audience/sections/:section_discriminator/imports/:import_id',
      summary: 'Status and report of an import',
      description:
        "The import's status (`waiting_for_file`, `queued`, `in_progress`, `completed`, `error`) and, once it ran, its report: rows read, written and refused, with the reasons. Serves imports of both versions.",
      errors: ['AUD-1102', 'AUD-1107', 'AUD-1805'],
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
      description:
        "Receives an import's file: a multipart form with every field of the import's `file_upload_body` in order, then the part `file` (CSV, at most 50 MB). Needs no bearer token: the form's signature is the credential, valid 5 minutes.",
      errors: ['AUD-1806', 'AUD-1807', 'AUD-1808', 'AUD-1809', 'AUD-1810'],
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

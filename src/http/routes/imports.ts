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
import { IMPORT_REQUEST_PROBLEMS, IMPORT_V1_REQUEST_PROBLEMS } from '../../imports/imports.ts';

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
      errors: IMPORT_V1_REQUEST_PROBLEMS,
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
      examples: {
        body: {
          keyspace_mapping: { keyspace_discriminator: 'com.vendor1.keyspaces.email', field_selector: 'email' },
          attribute_mappings: [
            { field_selector: 'city', attribute_version_id: '3f6a1c2e-8b4d-4e5f-9a0b-1c2d3e4f5a6b' },
            { field_selector: 'points', attribute_version_id: '9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d' },
          ],
          tag_mappings: [{ tag_discriminator: 'com.vendor1.tags.user-created.vip' }],
          consent_mappings: [
            {
              consents: [
                {
                  field_selector: 'newsletter',
                  topic_discriminator: 'com.vendor1.topics.user-created.weekly-newsletter',
                  channel_discriminator: 'com.vendor1.channels.email',
                  type: 'opt-in',
                },
              ],
            },
          ],
        },
        response: {
          201: {
            import_id: 'b4e1c2d3-5f6a-4b7c-8d9e-0a1b2c3d4e5f',
            file_upload_url: 'https://cdp.shop.example/files/uploads',
            file_upload_body: {
              key: 'imports/1042/b4e1c2d3-5f6a-4b7c-8d9e-0a1b2c3d4e5f',
              policy: 'eyJleHBpcmF0aW9uIjoiMjAyNi0wMy0wMVQwOTozNTowMFoifQ==',
              'x-amz-signature': '5d2f0c9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e',
            },
            file_upload_url_expires_at: '2026-03-01T09:35:00Z',
          },
        },
      },
      description:
        "Requests an import as version 1 does, with mappings by attribute discriminator and consent mappings per topic and channel. Answers the import's id and the signed upload form.",
      errors: IMPORT_REQUEST_PROBLEMS,
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
      summary: "List a section's imports",
      description:
        "The service's own read (for its console): the section's imports, newest first, each with its state and progress (rows read of the file's rows).",
      errors: ['AUD-1102', 'AUD-1107'],
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
      examples: {
        response: {
          200: {
            import_id: 'b4e1c2d3-5f6a-4b7c-8d9e-0a1b2c3d4e5f',
            result: { status: 'completed', profiles_found: 3, profiles_processed: 2, profiles_failed: 1 },
            report: {
              profiles_new: 1,
              profiles_updated: 1,
              profiles_not_changed: 0,
              profiles_failed: 1,
              failures: [{ line: 4, reason: 'The key "bad-email" is not an email address' }],
            },
          },
        },
      },
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

import type { Readable } from 'node:stream';
import type pg from 'pg';
import { Problem } from '../core/problems.ts';
import type { FileStore } from '../files/store.ts';
import type { UploadSigner } from '../files/upload-form.ts';
import { acceptUpload } from './imports.ts';

/** A part of a multipart form, in the order it arrives: a field, or a file as a stream. */
export type FormPart =
  | { type: 'field'; fieldname: string; value: unknown }
  | { type: 'file'; fieldname: string; file: Readable & { truncated?: boolean } };

/** What receiving an upload needs: the pool, the file store, the signer of upload forms, and the time. */
export interface UploadReceiver {
  pool: pg.Pool;
  files: FileStore;
  uploads: UploadSigner;
  clock: () => number;
}

/**
 * Receives the upload of an import's file, an S3-style signed POST form: its fields, then the
 * part "file". The fields before the file are checked against their signature and window; the
 * file is then stored and its import queued (`acceptUpload`). A form that breaks off (a
 * truncated body, a malformed part) is the client's fault: a problem, not a failure.
 */
export async function receiveUpload(receiver: UploadReceiver, parts: AsyncIterable<FormPart>): Promise<void> {
  const fields: Record<string, string> = {};
  let fileError: Error | undefined;
  let storing = false;
  try {
    for await (const part of parts) {
      if (part.type === 'field') {
        fields[part.fieldname] = String(part.value);
        continue;
      }
      part.file.once('error', (err: Error) => (fileError = err));
      if (part.fieldname !== 'file')
        throw new Problem('AUD-1810', `Unexpected file part "${part.fieldname}": the file goes in the part "file"`);
      const checked = receiver.uploads.verify(fields, new Date(receiver.clock()));
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
      await acceptUpload(receiver.pool, receiver.files, accountId, importId, checked.grant.key, part.file);
      return;
    }
  } catch (err) {
    if (err instanceof Problem) throw err;
    // Reading the parts fails only for the form; storing the file, for the form when its stream failed.
    const formError = storing ? fileError : (err as Error);
    if (formError)
      throw new Problem('AUD-1810', `The upload is not a complete multipart/form-data body: ${formError.message}`);
    throw err;
  }
  throw new Problem('AUD-1810', 'The upload has no part "file"');
}

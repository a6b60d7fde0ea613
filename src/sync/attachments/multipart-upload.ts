import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';
import type { BlobStore, StagedBlob, StoredBlob } from './blob-store.js';

/** Multipart bounds besides the file size: the form has one file and two short text fields. */
// files: 2 so that a second file part reaches the handler and gets a clear 400, not the plugin's generic limit error.
export const UPLOAD_FORM_LIMITS = { fields: 10, fieldSize: 1024, parts: 20, files: 2 } as const;

export interface Upload {
  fields: Record<string, string>;
  filename: string | undefined;
  blob: StoredBlob;
}

/**
 * busboy's parse errors are plain Errors (no status, no code) with these
 * messages: a missing boundary, a malformed header, a body that ends early or
 * never shows the boundary. They are the client's fault, so 400; storage errors
 * (with a system or database `code`) stay 500.
 */
const MALFORMED_FORM = /^(Multipart: Boundary not found|Malformed |Unexpected end of |Part terminated early)/;
/** busboy's boundary search takes at most 256 bytes ("\r\n--" and the boundary); RFC 2046 allows 70 characters. */
const BOUNDARY_TOO_LONG = /^The needle cannot have a length bigger than/;

/** The 400 a busboy parse error is, or undefined for any other error. */
function malformedForm(e: unknown): AppError | undefined {
  if (!(e instanceof Error) || 'code' in e || 'statusCode' in e) return undefined;
  if (BOUNDARY_TOO_LONG.test(e.message)) return new AppError('invalid_request', 'malformed multipart/form-data body: the boundary is too long (RFC 2046 allows 70 characters)');
  return MALFORMED_FORM.test(e.message) ? new AppError('invalid_request', `malformed multipart/form-data body: ${e.message}`) : undefined;
}

/**
 * Reads a multipart form with exactly one part named `file`, streaming that
 * part into the blob store's staging (fields may come before or after it) and
 * storing it once the whole form has arrived: a client slow to send the fields
 * after the file never leaves a stored blob without its attachment for the
 * orphan sweep to take. A file above `maxBytes` stops the stream at once with
 * 413; on any failure the staged bytes are dropped, so nothing is left behind.
 */
export async function readUpload(req: FastifyRequest, blobs: BlobStore, maxBytes: number): Promise<Upload> {
  if (!req.isMultipart()) throw new AppError('unsupported_media_type', 'expected multipart/form-data with a "file" part');
  let blob: StagedBlob | undefined;
  let filename: string | undefined;
  const fields: Record<string, string> = {};
  try {
    for await (const part of req.parts({ limits: { ...UPLOAD_FORM_LIMITS, fileSize: maxBytes } })) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || blob) {
          part.file.resume();
          throw new AppError('invalid_request', 'the form must have exactly one file part, named "file"');
        }
        const tooLarge = () => part.file.destroy(new AppError('payload_too_large', `an attachment may be at most ${maxBytes} bytes`));
        // busboy may have passed the limit before the part got here: the request's buffered bytes (64 KiB by Node 22's
        // default) are parsed in one go and the part is handed over a tick later, so 'limit' already fired. busboy then
        // discards the rest of the part, reading the body to its end, unless the file stream is destroyed now.
        if (part.file.truncated) tooLarge();
        else part.file.once('limit', tooLarge);
        filename = part.filename;
        blob = await blobs.stage(part.file);
      } else {
        if (part.valueTruncated) throw new AppError('invalid_request', `form field ${part.fieldname.slice(0, 64)} is longer than ${UPLOAD_FORM_LIMITS.fieldSize} bytes`);
        fields[part.fieldname] = String(part.value);
      }
    }
  } catch (e: unknown) {
    await blob?.discard();
    throw malformedForm(e) ?? e;
  }
  // busboy drops, without a word, a part whose name or file name holds a bare CR or LF (raw, or percent-encoded in
  // filename*): say so, or a client that sent one is told it sent no file.
  if (!blob) throw new AppError('invalid_request', 'the form has no "file" part (a part whose name or file name holds a line break is ignored)');
  await blob.commit();
  const { storedName, size, sha256 } = blob;
  return { fields, filename, blob: { storedName, size, sha256 } };
}

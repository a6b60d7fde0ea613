import multipart from '@fastify/multipart';
import { Type } from 'typebox';
import type { Readable } from 'node:stream';
import type { App } from '../../core/http/create-app.js';
import { documentedBodyCompiler } from '../../core/http/validation.js';
import type { SyncDeps } from '../deps.js';
import { mayActIn, requireUser, resolveBusiness } from '../http/auth-guard.js';
import { BearerSecurity, errors } from '../http/schemas.js';
import { BusinessHeaderSchema } from '../changes/change-schemas.js';
import { AttachmentListQuerySchema, AttachmentParamsSchema, AttachmentSchema, DownloadHeadersSchema, UploadFormSchema } from './attachment-schemas.js';
import { listAttachments, openAttachment, saveAttachment, type AttachmentDeps } from './attachments.js';
import { readUpload } from './multipart-upload.js';
import { contentDisposition } from './safe-filename.js';
import { attachmentEtag, requestedRange } from './byte-range.js';

/**
 * Upload, download and list. Upload and list act on the request's business
 * (X-Business-ID or business token). Download finds the attachment by uuid
 * and answers 404 unless the caller may read its business, so another
 * business's attachment looks exactly like a missing one.
 */
export function registerAttachmentRoutes(app: App, deps: SyncDeps): void {
  const auth = requireUser(deps);
  const attachmentDeps: AttachmentDeps = { attachments: deps.attachments, blobs: deps.blobs, now: deps.now };
  const maxBytes = deps.config.attachmentMaxBytes;

  void app.register(async (scope) => {
    // Encapsulated: only these routes parse multipart, and the file is never buffered.
    await scope.register(multipart, { throwFileSizeLimit: true });

    scope.post('/api/sync/attachment', {
      onRequest: [auth, deps.diskGuard.hook],
      // A large file on a slow link may take minutes: bounded by inactivity, not total time.
      config: { upload: true },
      // The form is streamed and checked by readUpload and saveAttachment; its schema below documents it for OpenAPI.
      validatorCompiler: documentedBodyCompiler(),
      schema: {
        tags: ['attachments'], summary: 'Upload a file for a record (multipart/form-data: file, record_type, record_uuid)', security: BearerSecurity,
        description: `At most ${maxBytes} bytes by default (--attachment-max-bytes); larger uploads get 413 and leave nothing stored.`,
        consumes: ['multipart/form-data'],
        body: UploadFormSchema,
        headers: BusinessHeaderSchema,
        response: { 201: AttachmentSchema, ...errors(400, 401, 403, 404, 408, 413, 415, 503) },
      },
    }, async (req, reply) => {
      const businessId = await resolveBusiness(req, deps);
      const upload = await readUpload(req, deps.blobs, maxBytes);
      const attachment = await saveAttachment(attachmentDeps, {
        businessId,
        userId: req.caller.userId,
        recordType: upload.fields['record_type'],
        recordUuid: upload.fields['record_uuid'],
        filename: upload.filename,
        blob: upload.blob,
      });
      return reply.code(201).send(attachment);
    });
  });

  app.get('/api/sync/attachment/:uuid', {
    onRequest: auth,
    schema: {
      tags: ['attachments'], summary: 'Download the exact bytes of an attachment (application/octet-stream), all of them or one byte range', security: BearerSecurity,
      description: 'ETag is the file\'s SHA-256, quoted. A `Range` of one byte range (with `If-Range` naming that ETag, if any) is answered 206 '
        + 'with `Content-Range`; other ranges, or an `If-Range` that does not match, get the whole file (200). A range past the end is 416.',
      headers: DownloadHeadersSchema, params: AttachmentParamsSchema,
      // The reply is a byte stream, never serialised; this only documents it.
      response: {
        200: {
          description: 'The file; Content-Disposition carries its name (RFC 6266).',
          content: { 'application/octet-stream': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary' }) } },
        },
        206: {
          description: 'The range asked for; Content-Range says which bytes of how many.',
          content: { 'application/octet-stream': { schema: Type.Unsafe<Readable>({ type: 'string', format: 'binary' }) } },
        },
        ...errors(400, 401, 404, 416),
      },
    },
  }, async (req, reply) => {
    const { attachment, blob } = await openAttachment(attachmentDeps, req.params.uuid, (businessId) => mayActIn(req, deps, businessId));
    const etag = attachmentEtag(attachment.sha256);
    // Node joins a repeated If-Range into one string, which matches no ETag: the whole file.
    const range = requestedRange(blob.size, req.headers.range, req.headers['if-range'] as string | undefined, etag);
    if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${blob.size}`);
    return reply
      .header('content-type', 'application/octet-stream')
      .header('content-length', range ? range.end - range.start + 1 : blob.size)
      .header('accept-ranges', 'bytes')
      .header('etag', etag)
      .header('content-disposition', contentDisposition(attachment.filename))
      .header('cache-control', 'private, no-store')
      .send(blob.read(range));
  });

  app.get('/api/sync/attachments', {
    onRequest: auth,
    schema: {
      tags: ['attachments'], summary: 'Attachments of one record, oldest first', security: BearerSecurity,
      headers: BusinessHeaderSchema, querystring: AttachmentListQuerySchema,
      response: { 200: Type.Array(AttachmentSchema), ...errors(400, 401, 403, 404) },
    },
  }, async (req) => listAttachments(attachmentDeps, await resolveBusiness(req, deps), req.query.record_type, req.query.record_uuid));
}

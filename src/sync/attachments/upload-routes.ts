import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import { documentedBodyCompiler } from '../../core/http/validation.js';
import type { SyncDeps } from '../deps.js';
import { mayActIn, requireUser, resolveBusiness } from '../http/auth-guard.js';
import { BearerSecurity, errors } from '../http/schemas.js';
import { BusinessHeaderSchema } from '../changes/change-schemas.js';
import { UploadParamsSchema, UploadPatchHeadersSchema, UploadSessionSchema, UploadStartSchema } from './attachment-schemas.js';
import { appendToUpload, findUpload, removeUpload, showUpload, startUpload, type UploadDeps } from './resumable-uploads.js';
import { bodyUntilCut } from './upload-body.js';
import type { UploadRow } from './upload-store.js';

/** The media type of a PATCH's bytes, as tus (tus.io) names it: raw bytes at an offset. */
const OFFSET_OCTETS = 'application/offset+octet-stream';

/**
 * Resumable uploads: announce a file, send its bytes in as many PATCH requests as the network allows, each from where
 * the stored bytes end, and the last byte makes it an attachment. A session is its user's: anyone else, or a request
 * naming another business, gets 404 as for an unknown id.
 */
export function registerUploadRoutes(app: App, deps: SyncDeps): void {
  const auth = requireUser(deps);
  const uploadDeps: UploadDeps = { uploads: deps.uploads, attachments: deps.attachments, blobs: deps.blobs, now: deps.now, maxBytes: deps.config.attachmentMaxBytes };
  // The caller started the upload and may still act in its business (a member, naming no other business).
  const mine = (req: FastifyRequest) => async (row: UploadRow) => row.user_id === req.caller.userId && mayActIn(req, deps, row.business_id);

  app.post('/api/sync/uploads', {
    onRequest: [auth, deps.diskGuard.hook],
    schema: {
      tags: ['attachments'], summary: 'Start a resumable upload of one file for a record', security: BearerSecurity,
      headers: BusinessHeaderSchema, body: UploadStartSchema,
      response: { 201: UploadSessionSchema, ...errors(400, 401, 403, 404, 413, 415, 422, 503) },
    },
  }, async (req, reply) => {
    const businessId = await resolveBusiness(req, deps);
    const b = req.body;
    const session = await startUpload(uploadDeps, {
      businessId, userId: req.caller.userId, recordType: b.record_type, recordUuid: b.record_uuid, filename: b.filename, size: b.size,
      ...(b.sha256 !== undefined ? { sha256: b.sha256 } : {}),
    });
    return reply.code(201).send(session);
  });

  app.get('/api/sync/uploads/:id', {
    onRequest: auth,
    schema: {
      tags: ['attachments'], summary: 'How many bytes of an upload are stored, and the attachment once complete', security: BearerSecurity,
      headers: BusinessHeaderSchema, params: UploadParamsSchema,
      response: { 200: UploadSessionSchema, ...errors(400, 401, 404) },
    },
  }, async (req) => showUpload(uploadDeps, await findUpload(uploadDeps, req.params.id, mine(req))));

  void app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    // Only this route takes raw bytes; the handler reads them as they arrive, never buffered whole.
    scope.addContentTypeParser(OFFSET_OCTETS, (_req, _payload, done) => done(null, undefined));

    scope.patch('/api/sync/uploads/:id', {
      onRequest: [auth, deps.diskGuard.hook],
      // A large remainder on a slow link may take minutes: bounded by inactivity, not total time.
      config: { upload: true },
      // The bytes are streamed into the store by appendToUpload; the body schema below documents them for OpenAPI.
      validatorCompiler: documentedBodyCompiler(),
      schema: {
        tags: ['attachments'], summary: 'Send bytes of an upload from Upload-Offset (application/offset+octet-stream)', security: BearerSecurity,
        description: 'The bytes that arrive are kept even if the request breaks off. The request that brings the last byte answers with the attachment.',
        consumes: [OFFSET_OCTETS],
        body: Type.String({ format: 'binary', description: 'The file\'s bytes from Upload-Offset: any number of them, up to its end.' }),
        headers: UploadPatchHeadersSchema, params: UploadParamsSchema,
        response: { 200: UploadSessionSchema, ...errors(400, 401, 404, 408, 409, 413, 415, 503) },
      },
    }, async (req) => {
      if (req.headers['content-type']?.split(';')[0]?.trim().toLowerCase() !== OFFSET_OCTETS) {
        throw new AppError('unsupported_media_type', `the body must be ${OFFSET_OCTETS}: the file's bytes from Upload-Offset`);
      }
      const row = await findUpload(uploadDeps, req.params.id, mine(req));
      const offset = Number(req.headers['upload-offset']);
      return appendToUpload(uploadDeps, row, offset, bodyUntilCut(req.raw, Math.max(0, row.size - offset)));
    });
  });

  app.delete('/api/sync/uploads/:id', {
    onRequest: auth,
    schema: {
      tags: ['attachments'], summary: 'Cancel an upload (its bytes are deleted); on a complete one, forget the session (the attachment stays)', security: BearerSecurity,
      headers: BusinessHeaderSchema, params: UploadParamsSchema,
      response: { 204: Type.Null({ description: 'Removed' }), ...errors(400, 401, 404) },
    },
  }, async (req, reply) => {
    const row = await findUpload(uploadDeps, req.params.id, mine(req));
    await removeUpload(uploadDeps, row.id);
    return reply.code(204).send(null);
  });
}

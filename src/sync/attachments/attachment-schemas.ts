import { Type, type Static } from 'typebox';
import { Uuid } from '../http/schemas.js';
import { BusinessHeaderSchema } from '../changes/change-schemas.js';

export const AttachmentSchema = Type.Object({
  uuid: Uuid,
  filename: Type.String({ description: 'The uploaded file name, reduced to its last path segment, control characters removed, at most 255 characters.' }),
  stored_name: Type.String({ description: 'Name as stored: a server-generated UUID, never derived from the file name.' }),
  size: Type.Integer({ description: 'Bytes.' }),
  sha256: Type.String({ description: 'Hex SHA-256 of the content.' }),
  record_type: Type.String(),
  record_uuid: Uuid,
  created_at: Type.String({ description: 'ISO 8601 UTC timestamp.' }),
});
export type Attachment = Static<typeof AttachmentSchema>;

const RecordType = Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$', description: 'Identifier, like a table name.' });

export const AttachmentListQuerySchema = Type.Object({
  record_type: RecordType,
  record_uuid: Uuid,
});

/** The upload's multipart/form-data parts, for the OpenAPI document (the form is streamed and checked by readUpload and saveAttachment). */
export const UploadFormSchema = Type.Object({
  file: Type.String({ format: 'binary', description: 'The file\'s bytes, stored exactly; its file name is kept for display.' }),
  record_type: RecordType,
  record_uuid: Uuid,
}, { description: 'Exactly one file part, named file; the fields may come before or after it.' });

export const AttachmentParamsSchema = Type.Object({ uuid: Uuid });

/** A download's headers: the business, and an optional range (docs/sync-api.md, "Attachments"). */
export const DownloadHeadersSchema = Type.Object({
  ...BusinessHeaderSchema.properties,
  range: Type.Optional(Type.String({ description: 'One byte range, e.g. `bytes=65536-` to resume a download; anything else gets the whole file' })),
  'if-range': Type.Optional(Type.String({ description: 'The ETag the bytes already held came with: the range is served only if the file is still that one' })),
});

/** What a resumable upload announces (docs/sync-api.md, "Resumable uploads"). */
export const UploadStartSchema = Type.Object({
  record_type: RecordType,
  record_uuid: Uuid,
  filename: Type.String({ maxLength: 1024, description: 'Kept for display, sanitised as an upload\'s file name.' }),
  size: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Bytes the file has; above the attachment size limit the answer is 413.' }),
  sha256: Type.Optional(Type.String({ pattern: '^[0-9A-Fa-f]{64}$', description: 'Hex SHA-256 of the file: checked once every byte is in.' })),
}, { additionalProperties: false });

export const UploadSessionSchema = Type.Object({
  id: Uuid,
  record_type: Type.String(),
  record_uuid: Uuid,
  filename: Type.String(),
  size: Type.Integer(),
  sha256: Type.Union([Type.String(), Type.Null()]),
  received: Type.Integer({ description: 'Bytes stored so far: the next PATCH sends from here.' }),
  expires_at: Type.String({ description: 'ISO 8601 UTC: a day after the last byte, or after the completion.' }),
  attachment: Type.Union([AttachmentSchema, Type.Null()], { description: 'The attachment the upload became, once every byte is in.' }),
});

export const UploadParamsSchema = Type.Object({ id: Uuid });

/** A PATCH's headers: where its bytes go, and the business. */
export const UploadPatchHeadersSchema = Type.Object({
  ...BusinessHeaderSchema.properties,
  'upload-offset': Type.String({ pattern: '^[0-9]{1,16}$', description: 'The byte of the file the body starts at: the session\'s `received`.' }),
});

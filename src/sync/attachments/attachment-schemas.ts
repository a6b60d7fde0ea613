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

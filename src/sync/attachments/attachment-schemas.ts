import { Type, type Static } from 'typebox';
import { Uuid } from '../http/schemas.js';

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

export const AttachmentListQuerySchema = Type.Object({
  record_type: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$', description: 'Identifier, like a table name.' }),
  record_uuid: Uuid,
});

export const AttachmentParamsSchema = Type.Object({ uuid: Uuid });

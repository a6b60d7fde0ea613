import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import { PUSH_LIMITS } from '../changes/change-limits.js';
import { isUuid } from '../../core/uuid.js';
import type { Attachment } from './attachment-schemas.js';
import type { AttachmentRow, AttachmentStore } from './attachment-store.js';
import type { BlobReader, BlobStore, StoredBlob } from './blob-store.js';
import { safeFilename } from './safe-filename.js';

export interface AttachmentDeps {
  attachments: AttachmentStore;
  blobs: BlobStore;
  /** Epoch milliseconds. */
  now: () => number;
}

export interface NewAttachment {
  businessId: string;
  userId: string;
  recordType: unknown;
  recordUuid: unknown;
  /** The name the client sent; kept (sanitised) for display only. */
  filename: string | undefined;
  blob: StoredBlob;
}

/**
 * Records an uploaded blob as an attachment of one record. The blob is
 * already durable; if the fields are invalid or the row cannot be written the
 * blob is deleted, so a failed upload leaves nothing behind.
 */
export async function saveAttachment(deps: AttachmentDeps, input: NewAttachment): Promise<Attachment> {
  try {
    if (typeof input.recordType !== 'string' || !PUSH_LIMITS.tableNamePattern.test(input.recordType)) {
      throw new AppError('invalid_request', 'record_type must be an identifier: a letter or _, then letters, digits or _, at most 63 characters');
    }
    if (!isUuid(input.recordUuid)) throw new AppError('invalid_request', 'record_uuid must be a UUID');
    const row: AttachmentRow = {
      uuid: randomUUID(),
      business_id: input.businessId,
      record_type: input.recordType,
      record_uuid: input.recordUuid.toLowerCase(),
      filename: safeFilename(input.filename),
      stored_name: input.blob.storedName,
      size: input.blob.size,
      sha256: input.blob.sha256,
      uploaded_by: input.userId,
      created_at: deps.now(),
    };
    await deps.attachments.insert(row);
    return toAttachment(row);
  } catch (e: unknown) {
    await deps.blobs.delete(input.blob.storedName);
    throw e;
  }
}

/**
 * The attachment and its bytes, when `canRead(businessId)` allows the caller
 * into the attachment's business. Anything else is `not_found`, so an
 * attachment of another business is indistinguishable from a missing one.
 */
export async function openAttachment(
  deps: AttachmentDeps,
  uuid: string,
  canRead: (businessId: string) => Promise<boolean>,
): Promise<{ attachment: Attachment; blob: BlobReader }> {
  const row = await deps.attachments.find(uuid.toLowerCase());
  if (!row || !(await canRead(row.business_id))) throw new AppError('not_found', 'no such attachment');
  const blob = await deps.blobs.get(row.stored_name);
  // The row is committed only after its bytes are durable, so a missing blob is a store this instance does not share.
  if (!blob) {
    throw new AppError('internal', `attachment ${row.uuid} is recorded but its bytes (blob ${row.stored_name}) are not in the attachment store: `
      + 'most likely the instances run with --attachment-dir set to directories that are not one directory shared by every instance '
      + '(leave it unset with DATABASE_URL to keep the bytes in PostgreSQL), or the file was removed');
  }
  return { attachment: toAttachment(row), blob };
}

export async function listAttachments(deps: AttachmentDeps, businessId: string, recordType: string, recordUuid: string): Promise<Attachment[]> {
  const rows = await deps.attachments.list(businessId, recordType, recordUuid.toLowerCase());
  return rows.map(toAttachment);
}

export function toAttachment(row: AttachmentRow): Attachment {
  return {
    uuid: row.uuid,
    filename: row.filename,
    stored_name: row.stored_name,
    size: row.size,
    sha256: row.sha256,
    record_type: row.record_type,
    record_uuid: row.record_uuid,
    created_at: new Date(row.created_at).toISOString(),
  };
}

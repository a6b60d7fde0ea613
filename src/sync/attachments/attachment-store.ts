import type { Kysely, Selectable } from 'kysely';
import { chunks } from '../../core/storage/chunks.js';
import type { AttachmentTables } from './attachment-tables.js';

export type AttachmentRow = Selectable<AttachmentTables['sync_attachments']>;

/** Attachment metadata; the bytes live in a BlobStore under `stored_name`. */
export interface AttachmentStore {
  /** Records an attachment whose blob is already durable. */
  insert(row: AttachmentRow): Promise<void>;
  /** By uuid across businesses: the caller checks the business (another business's uuid must look unknown). */
  find(uuid: string): Promise<AttachmentRow | undefined>;
  /** Attachments of one record of one business, oldest first. */
  list(businessId: string, recordType: string, recordUuid: string): Promise<AttachmentRow[]>;
  /** Which of `storedNames` an attachment row refers to. */
  referenced(storedNames: string[]): Promise<Set<string>>;
}


/** Same SQL on SQLite and PostgreSQL. */
export function createKyselyAttachmentStore(db: Kysely<AttachmentTables>): AttachmentStore {
  return {
    async insert(row) {
      await db.insertInto('sync_attachments').values(row).execute();
    },
    async find(uuid) {
      return db.selectFrom('sync_attachments').selectAll().where('uuid', '=', uuid).executeTakeFirst();
    },
    async list(businessId, recordType, recordUuid) {
      return db.selectFrom('sync_attachments').selectAll()
        .where('business_id', '=', businessId).where('record_type', '=', recordType).where('record_uuid', '=', recordUuid)
        .orderBy('created_at').orderBy('uuid')
        .execute();
    },
    async referenced(storedNames) {
      const found = new Set<string>();
      for (const chunk of chunks(storedNames)) {
        const rows = await db.selectFrom('sync_attachments').select('stored_name')
          .where('stored_name', 'in', chunk).execute();
        for (const r of rows) found.add(r.stored_name);
      }
      return found;
    },
  };
}

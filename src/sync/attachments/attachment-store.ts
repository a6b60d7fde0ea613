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
  /** Which of `storedNames` an attachment, or a piece of an upload in progress, refers to. */
  referenced(storedNames: string[]): Promise<Set<string>>;
  /** Up to when (epoch ms) the orphan-blob sweep has checked every blob; 0 before the first sweep. */
  sweptUntil(): Promise<number>;
  /** Records a finished sweep; the mark never moves back (another instance may have swept further). */
  markSwept(until: number): Promise<void>;
}

const SWEEP_MARK = 'orphan_blob_sweep';


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
        const rows = await db.selectFrom('sync_attachments').select('stored_name').where('stored_name', 'in', chunk)
          .union(db.selectFrom('sync_upload_parts').select('stored_name').where('stored_name', 'in', chunk))
          .execute();
        for (const r of rows) found.add(r.stored_name);
      }
      return found;
    },
    async sweptUntil() {
      const r = await db.selectFrom('sync_maintenance').select('value').where('name', '=', SWEEP_MARK).executeTakeFirst();
      return r ? Number(r.value) : 0;
    },
    async markSwept(until) {
      await db.insertInto('sync_maintenance').values({ name: SWEEP_MARK, value: until })
        .onConflict((oc) => oc.column('name').doUpdateSet({ value: until }).where('sync_maintenance.value', '<', until))
        .execute();
    },
  };
}

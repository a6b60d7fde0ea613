import type { Kysely, Selectable } from 'kysely';
import type { DialectName } from '../../core/storage/database.js';
import type { AccountTables } from '../accounts/tables.js';
import type { AttachmentTables } from './attachment-tables.js';
import type { AttachmentRow } from './attachment-store.js';

export type UploadRow = Selectable<AttachmentTables['sync_uploads']>;
export type UploadPartRow = Selectable<AttachmentTables['sync_upload_parts']>;

/**
 * Resumable upload sessions and the pieces of each (blobs of the attachment store). Every change that another
 * instance could race is a compare-and-set on the session row, so two requests for one session never both count.
 */
export interface UploadStore {
  /**
   * Records the session unless its user already has `max` sessions not complete and not expired at `now`; whether it
   * did. The count and the insert are one step per user: of concurrent calls for one user, each counts what the
   * others recorded before it, so together they never take the user past `max`.
   */
  createIfUnder(row: UploadRow, max: number, now: number): Promise<boolean>;
  /** By id across businesses: the caller checks the owner (another user's upload must look unknown). */
  find(id: string): Promise<UploadRow | undefined>;
  /**
   * Records a piece that starts where the session's bytes end, moving `received` on and the expiry to `expiresAt`;
   * the session as it is then, or undefined (nothing recorded) when it has another length by now, is complete, or is
   * gone.
   */
  addPart(part: UploadPartRow, expiresAt: number): Promise<UploadRow | undefined>;
  /** The session's pieces in byte order. */
  parts(uploadId: string): Promise<UploadPartRow[]>;
  /**
   * Records the attachment the session became, in one transaction with the session's completion and with forgetting
   * the piece whose blob it adopts, if any (so no sweep of pieces can ever take an attachment's bytes); false (nothing
   * recorded) when the session is complete already (another request won) or gone.
   */
  complete(uploadId: string, attachment: AttachmentRow, expiresAt: number): Promise<boolean>;
  /** Forgets a piece (its blob is deleted first, by the caller). */
  removePart(storedName: string): Promise<void>;
  /** Forgets the session; its pieces stay until removed one by one. */
  remove(uploadId: string): Promise<void>;
  /** Forgets the session if it is still expired at `now`; whether it did. */
  removeIfExpired(uploadId: string, now: number): Promise<boolean>;
  /** Up to `limit` sessions expired at `now`. */
  expired(now: number, limit: number): Promise<string[]>;
  /** Up to `limit` pieces whose session is gone. */
  strayParts(limit: number): Promise<UploadPartRow[]>;
}

type Tables = AttachmentTables & Pick<AccountTables, 'users'>;

/**
 * Same SQL on SQLite and PostgreSQL except one lock: on PostgreSQL a new session first locks its user's row, so
 * two starts of one user count one after the other (under READ COMMITTED the second count, run once the first
 * committed, sees its row); SQLite transactions are already serialized (one connection, BEGIN IMMEDIATE).
 */
export function createKyselyUploadStore(db: Kysely<Tables>, dialect: DialectName): UploadStore {
  return {
    async createIfUnder(row, max, now) {
      return db.transaction().execute(async (trx) => {
        // FOR NO KEY UPDATE, not FOR UPDATE: the foreign-key checks of the user's token inserts (a login) stay free.
        if (dialect === 'postgres') await trx.selectFrom('users').select('id').where('id', '=', row.user_id).forNoKeyUpdate().execute();
        const open = await trx.selectFrom('sync_uploads').select((eb) => eb.fn.countAll<number | string>().as('n'))
          .where('user_id', '=', row.user_id).where('attachment_uuid', 'is', null).where('expires_at', '>', now)
          .executeTakeFirstOrThrow();
        if (Number(open.n) >= max) return false;
        await trx.insertInto('sync_uploads').values(row).execute();
        return true;
      });
    },
    async find(id) {
      return toRow(await db.selectFrom('sync_uploads').selectAll().where('id', '=', id).executeTakeFirst());
    },
    async addPart(part, expiresAt) {
      return db.transaction().execute(async (trx) => {
        const moved = toRow(await trx.updateTable('sync_uploads')
          .set((eb) => ({ received: eb('received', '+', part.size), expires_at: expiresAt }))
          .where('id', '=', part.upload_id).where('received', '=', part.start).where('attachment_uuid', 'is', null)
          .returningAll()
          .executeTakeFirst());
        if (moved) await trx.insertInto('sync_upload_parts').values(part).execute();
        return moved;
      });
    },
    async parts(uploadId) {
      const rows = await db.selectFrom('sync_upload_parts').selectAll().where('upload_id', '=', uploadId).orderBy('start').execute();
      return rows.map((r) => ({ ...r, start: Number(r.start), size: Number(r.size) }));
    },
    async complete(uploadId, attachment, expiresAt) {
      return db.transaction().execute(async (trx) => {
        const done = await trx.updateTable('sync_uploads').set({ attachment_uuid: attachment.uuid, expires_at: expiresAt })
          .where('id', '=', uploadId).where('attachment_uuid', 'is', null)
          .executeTakeFirst();
        if (Number(done.numUpdatedRows) !== 1) return false;
        await trx.insertInto('sync_attachments').values(attachment).execute();
        await trx.deleteFrom('sync_upload_parts').where('stored_name', '=', attachment.stored_name).execute();
        return true;
      });
    },
    async removePart(storedName) {
      await db.deleteFrom('sync_upload_parts').where('stored_name', '=', storedName).execute();
    },
    async remove(uploadId) {
      await db.deleteFrom('sync_uploads').where('id', '=', uploadId).execute();
    },
    async removeIfExpired(uploadId, now) {
      const r = await db.deleteFrom('sync_uploads').where('id', '=', uploadId).where('expires_at', '<=', now).executeTakeFirst();
      return Number(r.numDeletedRows) === 1;
    },
    async expired(now, limit) {
      const rows = await db.selectFrom('sync_uploads').select('id').where('expires_at', '<=', now).orderBy('expires_at').limit(limit).execute();
      return rows.map((r) => r.id);
    },
    async strayParts(limit) {
      const rows = await db.selectFrom('sync_upload_parts').selectAll()
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('sync_uploads').select('id').whereRef('sync_uploads.id', '=', 'sync_upload_parts.upload_id'))))
        .limit(limit).execute();
      return rows.map((r) => ({ ...r, start: Number(r.start), size: Number(r.size) }));
    },
  };
}

/** PostgreSQL's driver gives BIGINT as text. */
function toRow(r: UploadRow | undefined): UploadRow | undefined {
  return r && { ...r, size: Number(r.size), received: Number(r.received), created_at: Number(r.created_at), expires_at: Number(r.expires_at) };
}

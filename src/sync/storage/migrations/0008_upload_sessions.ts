import type { Kysely, Migration } from 'kysely';

/**
 * Resumable uploads (docs/sync-api.md, "Resumable uploads"): a session per file being sent, and the pieces received
 * so far, each a blob of the attachment store. The same DDL runs on SQLite and PostgreSQL. No foreign key from the
 * pieces to their session: the sweep deletes a piece's blob before its row, and the row before the session's.
 */
export const uploadSessionsMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.createTable('sync_uploads')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('business_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('record_type', 'text', (c) => c.notNull())
      .addColumn('record_uuid', 'text', (c) => c.notNull())
      .addColumn('filename', 'text', (c) => c.notNull())
      .addColumn('size', 'bigint', (c) => c.notNull())
      .addColumn('sha256', 'text')
      .addColumn('received', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('attachment_uuid', 'text')
      .execute();
    // The sweep takes expired sessions in small batches; a user's open sessions are counted at each new one.
    await db.schema.createIndex('sync_uploads_expires_idx').on('sync_uploads').column('expires_at').execute();
    await db.schema.createIndex('sync_uploads_user_idx').on('sync_uploads').column('user_id').execute();
    await db.schema.createTable('sync_upload_parts')
      .addColumn('upload_id', 'text', (c) => c.notNull())
      .addColumn('start', 'bigint', (c) => c.notNull())
      .addColumn('size', 'bigint', (c) => c.notNull())
      .addColumn('stored_name', 'text', (c) => c.notNull().unique())
      .addColumn('sha256', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('sync_upload_parts_pk', ['upload_id', 'start'])
      .execute();
  },
};

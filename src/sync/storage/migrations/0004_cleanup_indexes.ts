import type { Kysely, Migration } from 'kysely';

/**
 * Indexes for the background work that must stay bounded (expiry cleanup,
 * orphan sweep) and for listing every conflict in id order, plus the orphan
 * sweep's progress marker. The same DDL runs on SQLite and PostgreSQL.
 */
export const cleanupIndexesMigration: Migration = {
  async up(db: Kysely<any>) {
    // Expiry cleanup deletes by expiry in small batches: without these it scans the whole table each batch.
    await db.schema.createIndex('access_tokens_expires_idx').on('access_tokens').column('expires_at').execute();
    await db.schema.createIndex('refresh_tokens_expires_idx').on('refresh_tokens').column('expires_at').execute();
    // Pending conflicts have no resolved_at, so the cleanup of resolved ones reads only what it deletes.
    await db.schema.createIndex('sync_conflicts_resolved_idx').on('sync_conflicts').column('resolved_at').execute();
    // `status=all` lists a business's conflicts by id: (business_id, resolution, id) cannot give that order.
    await db.schema.createIndex('sync_conflicts_business_id_idx').on('sync_conflicts').columns(['business_id', 'id']).execute();
    // How far the orphan-blob sweep got, so a restart checks only blobs stored since.
    await db.schema.createTable('sync_maintenance')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('value', 'bigint', (c) => c.notNull())
      .execute();
  },
};

import type { Kysely, Migration } from 'kysely';

/**
 * Drops `sync_records_uuid_idx` (business_id, record_uuid). The push path now
 * finds records by their primary key (business_id, table_name, record_uuid),
 * so this index only cost writes: one more random-key B-tree insert per
 * applied change, the largest share of a push's commit on SQLite.
 */
export const dropRecordUuidIndexMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.dropIndex('sync_records_uuid_idx').ifExists().execute();
  },
  async down(db: Kysely<any>) {
    await db.schema.createIndex('sync_records_uuid_idx').ifNotExists().on('sync_records').columns(['business_id', 'record_uuid']).execute();
  },
};

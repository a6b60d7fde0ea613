import type { Kysely, Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * Change log, record states, per-business version counters, conflicts and
 * attachments. Only the auto-increment id columns differ per dialect; times
 * are BIGINT epoch milliseconds, record data is JSON text (kept byte-exact).
 * No foreign keys to `businesses`: every request resolves its business before
 * it reaches these tables, and the change log must never block a business row.
 */
export function changesMigration(dialect: DialectName): Migration {
  const serialId = (t: any) => dialect === 'postgres'
    ? t.addColumn('id', 'bigserial', (c: any) => c.primaryKey())
    : t.addColumn('id', 'integer', (c: any) => c.primaryKey().autoIncrement());
  return {
    async up(db: Kysely<any>) {
      await db.schema.createTable('sync_counters')
        .addColumn('business_id', 'text', (c) => c.primaryKey())
        .addColumn('server_version', 'bigint', (c) => c.notNull())
        .execute();

      await serialId(db.schema.createTable('sync_changes'))
        .addColumn('business_id', 'text', (c: any) => c.notNull())
        .addColumn('version', 'bigint', (c: any) => c.notNull())
        .addColumn('table_name', 'text', (c: any) => c.notNull())
        .addColumn('record_uuid', 'text', (c: any) => c.notNull())
        .addColumn('operation', 'text', (c: any) => c.notNull())
        .addColumn('data', 'text')
        .addColumn('record_version', 'bigint', (c: any) => c.notNull())
        .addColumn('instance_id', 'text', (c: any) => c.notNull())
        .addColumn('created_at', 'bigint', (c: any) => c.notNull())
        .addUniqueConstraint('sync_changes_version_uq', ['business_id', 'version'])
        .execute();
      // Retry detection looks up this instance's earlier changes of a record.
      await db.schema.createIndex('sync_changes_record_idx').on('sync_changes').columns(['business_id', 'record_uuid', 'instance_id']).execute();

      await db.schema.createTable('sync_records')
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('table_name', 'text', (c) => c.notNull())
        .addColumn('record_uuid', 'text', (c) => c.notNull())
        .addColumn('record_version', 'bigint', (c) => c.notNull())
        .addColumn('server_version', 'bigint', (c) => c.notNull())
        .addColumn('instance_id', 'text', (c) => c.notNull())
        .addColumn('data', 'text')
        .addPrimaryKeyConstraint('sync_records_pk', ['business_id', 'table_name', 'record_uuid'])
        .execute();
      await db.schema.createIndex('sync_records_uuid_idx').on('sync_records').columns(['business_id', 'record_uuid']).execute();

      await serialId(db.schema.createTable('sync_conflicts'))
        .addColumn('business_id', 'text', (c: any) => c.notNull())
        .addColumn('branch_name', 'text', (c: any) => c.notNull())
        .addColumn('table_name', 'text', (c: any) => c.notNull())
        .addColumn('record_uuid', 'text', (c: any) => c.notNull())
        .addColumn('operation', 'text', (c: any) => c.notNull())
        .addColumn('version', 'bigint', (c: any) => c.notNull())
        .addColumn('instance_id', 'text', (c: any) => c.notNull())
        .addColumn('local_data', 'text', (c: any) => c.notNull())
        .addColumn('remote_data', 'text', (c: any) => c.notNull())
        .addColumn('resolution', 'text', (c: any) => c.notNull())
        .addColumn('created_at', 'bigint', (c: any) => c.notNull())
        .addColumn('resolved_at', 'bigint')
        .addColumn('applied_version', 'bigint')
        .execute();
      await db.schema.createIndex('sync_conflicts_list_idx').on('sync_conflicts').columns(['business_id', 'resolution', 'id']).execute();
      await db.schema.createIndex('sync_conflicts_record_idx').on('sync_conflicts').columns(['business_id', 'record_uuid', 'instance_id']).execute();

      await db.schema.createTable('sync_attachments')
        .addColumn('uuid', 'text', (c) => c.primaryKey())
        .addColumn('business_id', 'text', (c) => c.notNull())
        .addColumn('record_type', 'text', (c) => c.notNull())
        .addColumn('record_uuid', 'text', (c) => c.notNull())
        .addColumn('filename', 'text', (c) => c.notNull())
        .addColumn('stored_name', 'text', (c) => c.notNull().unique())
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('sha256', 'text', (c) => c.notNull())
        .addColumn('uploaded_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('sync_attachments_record_idx').on('sync_attachments').columns(['business_id', 'record_type', 'record_uuid']).execute();
    },
  };
}

import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Marks the changes `local` resolutions wrote (`sync_changes.resolves_conflict`, the conflict's id) and leaves the
 * records they made current without a device (`sync_records.instance_id` = ''). Such a change carries the
 * conflict's `instance_id`, but that device never pushed it: its own next edit at that record version was refused as
 * "already pushed by this instance with different content", or as stale, and lost, where the version rule promises a
 * conflict. Existing resolutions are found through `sync_conflicts.applied_version` (those the cleanup has not removed).
 */
export const resolutionChangesMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('sync_changes').addColumn('resolves_conflict', 'bigint').execute();
    await sql`UPDATE sync_changes SET resolves_conflict = k.id FROM sync_conflicts AS k
      WHERE k.applied_version IS NOT NULL AND sync_changes.business_id = k.business_id AND sync_changes.version = k.applied_version`.execute(db);
    await sql`UPDATE sync_records SET instance_id = '' FROM sync_conflicts AS k
      WHERE k.applied_version IS NOT NULL AND sync_records.business_id = k.business_id AND sync_records.table_name = k.table_name
        AND sync_records.record_uuid = k.record_uuid AND sync_records.server_version = k.applied_version`.execute(db);
  },
};

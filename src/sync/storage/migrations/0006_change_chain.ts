import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Links each change to the previous change of its record (`prev_version`, the
 * server version of that change; null for a record's first change) and drops
 * `sync_changes_record_idx` (business_id, record_uuid, instance_id). Retry
 * detection now walks a record's chain back from its current state through the
 * (business_id, version) index, which every insert appends to, instead of a
 * second random-key index: on SQLite that index was 40 % of a push's CPU and
 * most of the pages each commit wrote.
 */
export const changeChainMigration: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('sync_changes').addColumn('prev_version', 'bigint').execute();
    // Existing changes, while the old index still serves the per-record order.
    await sql`UPDATE sync_changes SET prev_version = w.prev
      FROM (SELECT id, lag(version) OVER (PARTITION BY business_id, table_name, record_uuid ORDER BY version) AS prev FROM sync_changes) AS w
      WHERE w.id = sync_changes.id AND w.prev IS NOT NULL`.execute(db);
    await db.schema.dropIndex('sync_changes_record_idx').execute();
  },
};

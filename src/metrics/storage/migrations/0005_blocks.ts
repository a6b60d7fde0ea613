import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * The storage engine's sealed layout (src/metrics/storage/engine/): `reports`
 * stays as the durable head of raw reports; closed one-hour windows of a host
 * move into `blocks` (compressed columns plus a 15-minute rollup), and each
 * tenant's windows get a rollup summed over its hosts in `tenant_windows`.
 * Reports already stored in `reports` are sealed by the engine after start,
 * like any other head rows, so an upgraded database loses nothing.
 */
function up(dialect: DialectName) {
  const blob = dialect === 'sqlite' ? 'blob' : 'bytea';
  return async (db: Kysely<any>): Promise<void> => {
    // Latest values are read from the head now; a column every report updated was the contention between instances.
    await db.schema.alterTable('hosts').dropColumn('cpu_usage').execute();
    await db.schema.alterTable('hosts').dropColumn('memory_percent').execute();
    await db.schema.createTable('blocks')
      .addColumn('host_key', 'integer', (c) => c.notNull().references('hosts.key').onDelete('cascade'))
      .addColumn('window_start', 'bigint', (c) => c.notNull())
      .addColumn('rows', 'integer', (c) => c.notNull())
      .addColumn('min_ts', 'bigint', (c) => c.notNull())
      .addColumn('max_ts', 'bigint', (c) => c.notNull())
      // The small rollup before the large data: a tier read stops at the first pages of the row.
      .addColumn('rollup', blob, (c) => c.notNull())
      .addColumn('data', blob, (c) => c.notNull())
      .addPrimaryKeyConstraint('blocks_pk', ['host_key', 'window_start'])
      .execute();
    await db.schema.createIndex('blocks_window_start').on('blocks').column('window_start').execute();
    await db.schema.createTable('tenant_windows')
      .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
      .addColumn('window_start', 'bigint', (c) => c.notNull())
      // Bumped by every seal of one of the tenant's hosts in this window; the rollup is current when rolled_version equals it.
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('changed_at', 'bigint', (c) => c.notNull())
      .addColumn('rolled_version', 'integer')
      .addColumn('fine', blob)
      .addColumn('coarse', blob)
      .addPrimaryKeyConstraint('tenant_windows_pk', ['tenant_id', 'window_start'])
      .execute();
    if (dialect === 'postgres') {
      // Already compressed: PostgreSQL's own TOAST compression would only spend CPU.
      for (const [table, column] of [['blocks', 'data'], ['blocks', 'rollup'], ['tenant_windows', 'fine'], ['tenant_windows', 'coarse']] as const) {
        await sql`ALTER TABLE ${sql.table(table)} ALTER COLUMN ${sql.ref(column)} SET STORAGE EXTERNAL`.execute(db);
      }
    }
  };
}

export const metrics0005: Record<DialectName, Migration> = { sqlite: { up: up('sqlite') }, postgres: { up: up('postgres') } };

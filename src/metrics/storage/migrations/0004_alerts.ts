import type { CreateTableBuilder, Kysely, Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * Alerts carried in reports, one row per incident (an alert from its first
 * report until a report of its host no longer carries it), with each route's
 * notification state, so the dashboard can list them and the notifier can
 * de-duplicate (src/metrics/alerts/alert-store.ts). Tenant-scoped like every table.
 */
function columns(t: CreateTableBuilder<'alerts', 'id'>, double: 'real' | 'double precision'): CreateTableBuilder<'alerts', 'id'> {
  return t
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('host_id', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('severity', 'text', (c) => c.notNull())
    .addColumn('message', 'text')
    .addColumn('labels', 'text', (c) => c.notNull())
    .addColumn('value', double)
    .addColumn('threshold', double)
    .addColumn('starts_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .addColumn('resolved_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('routes', 'text', (c) => c.notNull());
}

async function indexes(db: Kysely<any>): Promise<void> {
  // The notifier reads a host's firing incidents on every report; listings read a tenant's newest first.
  await db.schema.createIndex('alerts_host_firing').on('alerts').columns(['tenant_id', 'host_id', 'resolved_at']).execute();
  await db.schema.createIndex('alerts_tenant_starts').on('alerts').columns(['tenant_id', 'starts_at']).execute();
}

export const metrics0004: Record<DialectName, Migration> = {
  sqlite: {
    async up(db: Kysely<any>) {
      await db.schema.createTable('alerts').addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()).$call((t) => columns(t, 'real')).execute();
      await indexes(db);
    },
  },
  postgres: {
    async up(db: Kysely<any>) {
      await db.schema.createTable('alerts').addColumn('id', 'bigserial', (c) => c.primaryKey()).$call((t) => columns(t, 'double precision')).execute();
      await indexes(db);
    },
  },
};

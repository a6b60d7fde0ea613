import { sql, type CreateTableBuilder, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * Tenants, their tokens (hashes only), the per-tenant metric-name dictionary,
 * hosts (with their latest dashboard numbers) and one row per stored report
 * whose samples are a packed vector (see ../sample-codec.ts).
 */
export const metrics0001: Record<DialectName, Migration> = {
  sqlite: {
    async up(db: Kysely<any>) {
      await createTenantTables(db);
      await db.schema.createTable('metric_names')
        .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addUniqueConstraint('metric_names_tenant_name', ['tenant_id', 'name'])
        .execute();
      // AUTOINCREMENT: a host deleted by retention never hands its key to a new host.
      await db.schema.createTable('hosts')
        .addColumn('key', 'integer', (c) => c.primaryKey().autoIncrement())
        .$call((t) => hostColumns(t, 'real'))
        .execute();
      await db.schema.createTable('host_metric_names')
        .addColumn('host_key', 'integer', (c) => c.notNull().references('hosts.key').onDelete('cascade'))
        .addColumn('metric_id', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('host_metric_names_pk', ['host_key', 'metric_id'])
        .modifyEnd(sql`without rowid`)
        .execute();
      // WITHOUT ROWID clusters the rows by (host_key, ts): a host's range read is one sequential scan.
      await db.schema.createTable('reports')
        .addColumn('host_key', 'integer', (c) => c.notNull().references('hosts.key').onDelete('cascade'))
        .addColumn('ts', 'integer', (c) => c.notNull())
        .addColumn('samples', 'blob', (c) => c.notNull())
        .addPrimaryKeyConstraint('reports_pk', ['host_key', 'ts'])
        .modifyEnd(sql`without rowid`)
        .execute();
    },
  },
  postgres: {
    async up(db: Kysely<any>) {
      await createTenantTables(db);
      await db.schema.createTable('metric_names')
        .addColumn('id', 'serial', (c) => c.primaryKey())
        .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addUniqueConstraint('metric_names_tenant_name', ['tenant_id', 'name'])
        .execute();
      await db.schema.createTable('hosts')
        .addColumn('key', 'serial', (c) => c.primaryKey())
        .$call((t) => hostColumns(t, 'double precision'))
        .execute();
      await db.schema.createTable('host_metric_names')
        .addColumn('host_key', 'integer', (c) => c.notNull().references('hosts.key').onDelete('cascade'))
        .addColumn('metric_id', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('host_metric_names_pk', ['host_key', 'metric_id'])
        .execute();
      await db.schema.createTable('reports')
        .addColumn('host_key', 'integer', (c) => c.notNull().references('hosts.key').onDelete('cascade'))
        .addColumn('ts', 'bigint', (c) => c.notNull())
        .addColumn('samples', 'bytea', (c) => c.notNull())
        .addPrimaryKeyConstraint('reports_pk', ['host_key', 'ts'])
        .execute();
    },
  },
};

async function createTenantTables(db: Kysely<any>): Promise<void> {
  await db.schema.createTable('tenants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createTable('tenant_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
}

function hostColumns(t: CreateTableBuilder<'hosts', any>, double: 'real' | 'double precision'): CreateTableBuilder<'hosts', any> {
  return t
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
    .addColumn('host_id', 'text', (c) => c.notNull())
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('platform', 'text', (c) => c.notNull())
    .addColumn('last_ts', 'bigint', (c) => c.notNull())
    .addColumn('cpu_usage', double)
    .addColumn('memory_percent', double)
    .addUniqueConstraint('hosts_tenant_host', ['tenant_id', 'host_id']);
}

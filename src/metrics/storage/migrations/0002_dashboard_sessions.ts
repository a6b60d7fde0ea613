import type { Kysely, Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * Browser sessions of the dashboard (see src/metrics/dashboard/sessions.ts).
 * Only a hash of the session id is stored; the token hash ties the session to
 * the token that opened it, so revoking that token ends the session. The same
 * DDL serves both dialects.
 */
async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createTable('dashboard_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dashboard_sessions_expires_at').on('dashboard_sessions').column('expires_at').execute();
}

export const metrics0002: Record<DialectName, Migration> = { sqlite: { up }, postgres: { up } };

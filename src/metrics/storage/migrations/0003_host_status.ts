import type { Kysely, Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * What the dashboard's host list needs beyond CPU and memory: the fullest
 * filesystem's percent and the host's own reporting interval (for up / late /
 * down). Hosts stored before this have nulls until their next report.
 */
function up(double: 'real' | 'double precision') {
  return async (db: Kysely<any>): Promise<void> => {
    await db.schema.alterTable('hosts').addColumn('disk_percent', double).execute();
    await db.schema.alterTable('hosts').addColumn('interval_ms', 'bigint').execute();
  };
}

export const metrics0003: Record<DialectName, Migration> = { sqlite: { up: up('real') }, postgres: { up: up('double precision') } };

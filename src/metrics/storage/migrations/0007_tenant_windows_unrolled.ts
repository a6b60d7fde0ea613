import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * A partial index of the tenant windows whose rollup is missing or stale.
 * Every seal pass (twice a second) asks for them, and without it that read
 * went through the whole table: 100 tenants with 30 days of windows is 72,000
 * rows, 90 ms a pass on SQLite, while appends waited behind it. The index
 * holds only windows waiting for a rollup, a handful at any time. Its
 * predicate is the query's own (tenant-rollup.ts), which is what lets both
 * databases use it.
 */
const up = async (db: Kysely<any>): Promise<void> => {
  await sql`CREATE INDEX tenant_windows_unrolled ON tenant_windows (window_start) WHERE rolled_version IS NULL OR rolled_version <> version`.execute(db);
};

export const metrics0007: Record<DialectName, Migration> = { sqlite: { up }, postgres: { up } };

// Why: a resolved notification that failed is retried with the host's next reports, so those reads must find it.
import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * `resolve_pending`: the incident is resolved but a route that heard of it has not yet had its resolved notification
 * delivered (it failed, or the instance sending it stopped). The partial index keeps the read every report makes of
 * its host's incidents as cheap as the open-incidents one. Incidents resolved before this migration keep 0: their
 * notification was attempted once, as the code then did.
 */
const up = async (db: Kysely<any>): Promise<void> => {
  await sql`ALTER TABLE alerts ADD COLUMN resolve_pending INTEGER NOT NULL DEFAULT 0`.execute(db);
  await sql`CREATE INDEX alerts_resolve_pending ON alerts (tenant_id, host_id) WHERE resolve_pending = 1`.execute(db);
};

export const metrics0009: Record<DialectName, Migration> = { sqlite: { up }, postgres: { up } };

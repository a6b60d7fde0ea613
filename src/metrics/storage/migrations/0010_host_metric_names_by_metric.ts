// Why: the tenant's name limit counts the names its live hosts hold, which is a lookup of host_metric_names by metric.
import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';

/**
 * Whether any host still holds a metric name (retention removes hosts, and with them what they held): one index probe
 * per name, where the table's key (host, metric) would scan every host of the tenant.
 */
const up = async (db: Kysely<any>): Promise<void> => {
  await sql`CREATE INDEX host_metric_names_metric ON host_metric_names (metric_id)`.execute(db);
};

export const metrics0010: Record<DialectName, Migration> = { sqlite: { up }, postgres: { up } };

import type { Migration } from 'kysely';
import type { DialectName } from '../../../core/storage/database.js';
import { metrics0001 } from './0001_metrics.js';
import { metrics0002 } from './0002_dashboard_sessions.js';
import { metrics0004 } from './0004_alerts.js';
import { metrics0005 } from './0005_blocks.js';
import { metrics0006 } from './0006_head_rowid.js';
import { metrics0007 } from './0007_tenant_windows_unrolled.js';
import { metrics0008 } from './0008_alerts_open_unique.js';
import { metrics0009 } from './0009_alerts_resolve_pending.js';
import { metrics0010 } from './0010_host_metric_names_by_metric.js';

/**
 * The metrics service's migrations, in the order they apply. Each entry gives
 * one migration per dialect; add a new one at the end with the next number.
 */
const MIGRATIONS: Array<[name: string, perDialect: Record<DialectName, Migration>]> = [
  ['0001_metrics', metrics0001],
  ['0002_dashboard_sessions', metrics0002],
  ['0004_alerts', metrics0004],
  ['0005_blocks', metrics0005],
  ['0006_head_rowid', metrics0006],
  ['0007_tenant_windows_unrolled', metrics0007],
  ['0008_alerts_open_unique', metrics0008],
  ['0009_alerts_resolve_pending', metrics0009],
  ['0010_host_metric_names_by_metric', metrics0010],
];

/** Applied by databases of earlier versions and folded into later migrations (0005 dropped what 0003 added). */
export const RETIRED_METRICS_MIGRATIONS: readonly string[] = ['0003_host_status'];

export function metricsMigrations(dialect: DialectName): Record<string, Migration> {
  return Object.fromEntries(MIGRATIONS.map(([name, perDialect]) => [name, perDialect[dialect]]));
}

import { openDatabase, type Database } from '../core/storage/database.js';
import { writeLogLine } from '../core/log-line.js';
import { createDiskGuard, type DiskGuard } from '../core/storage/disk-guard.js';
import { exposeDiskGuard } from '../core/ops/self-metrics.js';
import { createLogThrottle, withHeld } from '../core/log-throttle.js';
import { createAlertRouter, loadAlertRoutes, type AlertRouter } from './alerts/alert-router.js';
import { createAlertStore, type AlertStore, type AlertTables } from './alerts/alert-store.js';
import type { MetricsConfig } from './config.js';
import type { MetricsStore } from './domain/metrics-store.js';
import { createBulkLinePool, type BulkLinePool } from './http/bulk-line-pool.js';
import { createEngineMetricsStore } from './storage/engine-metrics-store.js';
import { databaseConn, METRICS_SQLITE_CACHE_KIB } from './storage/engine/sql-conn.js';
import { countHostReportsAfter } from './storage/engine/reader.js';
import { metricsMigrations, RETIRED_METRICS_MIGRATIONS } from './storage/migrations/index.js';
import { createMetricsSelfMetrics, type MetricsSelfMetrics } from './self-metrics.js';
import type { MetricsTables } from './storage/tables.js';

/**
 * Everything the metrics app talks to outside itself, created in one place
 * so a deployment (or a test) can swap a piece: the database and store, the
 * alert router, the clock.
 */
export interface MetricsDeps {
  database: Database<MetricsTables>;
  store: MetricsStore;
  alertRouter: AlertRouter;
  /** Alerts carried in reports (incidents and their notifications), listed by /api/v1/alerts and the dashboard. */
  alerts: AlertStore;
  /** This instance's Prometheus metrics (`/metrics`). */
  selfMetrics: MetricsSelfMetrics;
  now: () => number;
  /** Reads bulk bodies off the event loop (parse threads). */
  bulkLines: BulkLinePool;
  /** Refuses ingest while the SQLite data directory's disk is under --min-free-disk-bytes. */
  diskGuard: DiskGuard;
  /** Drains queued reports, then closes the database. */
  close(): Promise<void>;
}

export async function createMetricsDeps(config: MetricsConfig, overrides: { now?: () => number } = {}): Promise<MetricsDeps> {
  // Routes first: a bad routes file stops the start before the database is touched.
  const routes = await loadAlertRoutes(config.alertRoutes);
  const database = await openMetricsDatabase(config);
  const now = overrides.now ?? Date.now;
  const store = createMetricsStore(database, config, now);
  const alerts = createAlertStore(database.db.withTables<AlertTables>(), databaseConn(database), countHostReportsAfter);
  const bulkLines = createBulkLinePool(config.bulkParseThreads);
  // PostgreSQL's disk is the database server's to watch; it answers disk_full (a 503 too) when it fills.
  const diskGuard = await createDiskGuard({ dirs: config.databaseUrl ? [] : [config.dataDir], minFreeBytes: config.minFreeDiskBytes, service: 'metrics' });
  const selfMetrics = createMetricsSelfMetrics();
  exposeDiskGuard(selfMetrics, diskGuard);
  return {
    database,
    store,
    alertRouter: createAlertRouter(routes, { timeoutMs: config.alertTimeoutMs, store: alerts, now }),
    alerts,
    selfMetrics,
    now,
    bulkLines,
    diskGuard,
    async close() {
      diskGuard.close();
      await bulkLines.close();
      await store.close();
      await database.close();
    },
  };
}

/**
 * The store over an open database, with the configured limits. Background
 * failures of the storage engine (a seal pass) go to stderr as one JSON line:
 * they are retried on the next pass and never lose a report. The same error again (a full disk fails every pass,
 * twice a second) is one line a minute with a count.
 */
export function createMetricsStore(database: Database<MetricsTables>, config: Pick<MetricsConfig, 'maxMetricsPerHost' | 'maxMetricsPerTenant' | 'maxHostsPerTenant'>, now: () => number = Date.now): MetricsStore {
  const backgroundErrorLog = createLogThrottle(60_000);
  return createEngineMetricsStore(database, {
    limits: { perHost: config.maxMetricsPerHost, perTenant: config.maxMetricsPerTenant, hostsPerTenant: config.maxHostsPerTenant },
    now,
    onError: (e) => {
      const line = backgroundErrorLog(e instanceof Error ? e.message : String(e));
      if (line) writeLogLine('error', 'metrics', withHeld('storage engine background work failed', line.held), e);
    },
  });
}

export function openMetricsDatabase(config: Pick<MetricsConfig, 'databaseUrl' | 'dbSchema' | 'dataDir'>): Promise<Database<MetricsTables>> {
  return openDatabase<MetricsTables>({
    databaseUrl: config.databaseUrl,
    pgSchema: config.dbSchema,
    dataDir: config.dataDir,
    sqliteFile: 'metrics.db',
    service: 'metrics',
    // Sealed blocks are rows of several KiB spilling into overflow pages; 1 KiB pages waste ~6 % of them, 4 KiB ~20 %.
    sqlitePageSize: 1024,
    sqliteTuning: { cacheKiB: METRICS_SQLITE_CACHE_KIB },
    migrations: metricsMigrations,
    retiredMigrations: RETIRED_METRICS_MIGRATIONS,
  });
}

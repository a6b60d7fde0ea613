// Why: the benchmarks that run the metrics service in their own process start it from the same defaults.
import { loadMetricsConfig, type MetricsConfig } from '../../src/metrics/config.js';

/** The service's defaults, silent, on any free port, storing in `dataDir` or (given a URL) the PostgreSQL schema. */
export function benchMetricsConfig(storage: { dataDir: string; databaseUrl?: string | undefined; dbSchema?: string | undefined }, overrides: Partial<MetricsConfig> = {}): MetricsConfig {
  return {
    ...loadMetricsConfig([], {}),
    logLevel: 'silent',
    port: 0,
    dataDir: storage.dataDir,
    databaseUrl: storage.databaseUrl,
    ...(storage.dbSchema ? { dbSchema: storage.dbSchema } : {}),
    ...overrides,
  };
}

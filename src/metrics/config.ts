/** The metrics service's options, declared once: --help, validation and the config object all come from them. */
import os from 'node:os';
import { ConfigError, httpOptions, loadConfig, opsOptions, opt, type ConfigOf } from '../core/config.js';

/**
 * Every option of the metrics service. Read once at start by `loadMetricsConfig`;
 * tests build a config with overrides instead of touching the environment.
 */
const shared = { ...httpOptions('METRICS', 8080), ...opsOptions('METRICS') };

export const metricsOptions = {
  ...shared,
  // The shared Redis options serve the sync service's rate limits and change feed; this service has neither.
  redisUrl: { ...shared.redisUrl, doc: 'Not used: the metrics service keeps nothing in Redis (no rate limits, no change feed); accepted as every service\'s shared options are.' },
  redisPrefix: { ...shared.redisPrefix, doc: 'Not used, as --redis-url is not: the metrics service keeps nothing in Redis.' },
  secret: {
    ...opt.optionalString({
      flag: 'secret', env: 'METRICS_SECRET', secret: true,
      doc: 'HMAC-SHA256 key for ingest signatures (at least 16 characters); when set, both ingest endpoints need a valid x-collector-signature header.',
    }),
    rule: 'must be at least 16 characters',
    // Given but empty (METRICS_SECRET=$(cat a-missing-file)) would quietly accept unsigned reports: refused at start.
    parse: (r: string) => {
      if (r === '') throw new Error('is empty: unset it to accept unsigned reports');
      if (r.length < 16) throw new Error('must be at least 16 characters');
      return r;
    },
  },
  bulkBodyLimit: opt.int({
    flag: 'bulk-body-limit', env: 'METRICS_BULK_BODY_LIMIT', default: 32 * 1_048_576, min: 1024,
    doc: 'Largest POST /api/v1/ingest/bulk body in bytes, both as sent and once decompressed (a gzip body inflating past it is refused with 413).',
  }),
  bulkParseThreads: {
    ...opt.int({
      // Two cores are the event loop's and the storage writer's: on two, a parse thread made bulk ingest cost a quarter more CPU (docs/benchmarks.md).
      flag: 'bulk-parse-threads', env: 'METRICS_BULK_PARSE_THREADS', default: Math.max(0, Math.min(4, os.availableParallelism() - 2)), min: 0, max: 64,
      doc: 'Threads that parse and check POST /api/v1/ingest/bulk bodies off the event loop; 0 reads them on the event loop.',
    }),
    defaultRule: 'one per core beyond two, at most 4',
  },
  seriesPoints: opt.int({
    flag: 'series-points', env: 'METRICS_SERIES_POINTS', default: 500, min: 1, max: 100_000,
    doc: 'Point budget of a series when the request gives no ?points=; longer ranges are averaged into this many buckets.',
  }),
  seriesPointsMax: opt.int({
    flag: 'series-points-max', env: 'METRICS_SERIES_POINTS_MAX', default: 10_000, min: 1, max: 1_000_000,
    doc: 'Largest ?points= a client may ask for.',
  }),
  maxMetricsPerHost: opt.int({
    flag: 'max-metrics-per-host', env: 'METRICS_MAX_METRICS_PER_HOST', default: 1_000, min: 1,
    doc: 'Distinct metric names one host may ever report; a report that would exceed it is rejected with 422.',
  }),
  maxMetricsPerTenant: opt.int({
    flag: 'max-metrics-per-tenant', env: 'METRICS_MAX_METRICS_PER_TENANT', default: 20_000, min: 1,
    doc: 'Distinct metric names across all hosts of one tenant; a report that would exceed it is rejected with 422.',
  }),
  maxHostsPerTenant: opt.int({
    // Far above a real tenant's fleet, and what bounds the host list (GET /, /api/v1/hosts/status), which is never shed.
    flag: 'max-hosts-per-tenant', env: 'METRICS_MAX_HOSTS_PER_TENANT', default: 10_000, min: 1,
    doc: 'Hosts one tenant may have at once; a report of a new host that would exceed it is rejected with 422 (hosts removed by retention free their places).',
  }),
  retentionDays: opt.int({
    flag: 'retention-days', env: 'METRICS_RETENTION_DAYS', default: 30, min: 1, max: 36_500,
    doc: 'Reports older than this are deleted by the background sweep (and refused at ingest), with alert incidents that ended before it.',
  }),
  retentionSweepMs: opt.ms({
    flag: 'retention-sweep-ms', env: 'METRICS_RETENTION_SWEEP_MS', default: 3_600_000, min: 1_000,
    doc: 'How often the retention sweep runs.',
  }),
  sessionCleanupMs: opt.ms({
    flag: 'session-cleanup-ms', env: 'METRICS_SESSION_CLEANUP_MS', default: 600_000, min: 1_000,
    doc: 'Mean time between two runs of the cleanup of expired dashboard sessions on one instance (each wait is 0.5 to 1.5 times it).',
  }),
  maxFutureMs: opt.int({
    flag: 'max-future-ms', env: 'METRICS_MAX_FUTURE_MS', default: 600_000, min: 0,
    doc: 'How far ahead of the server clock a report ts may be (agent clock skew); later ones get 400.',
  }),
  alertRoutes: opt.optionalString({
    flag: 'alert-routes', env: 'METRICS_ALERT_ROUTES',
    doc: 'JSON file of alert routes (match on severity/name -> webhook); without it, alerts in reports are validated but not routed.',
  }),
  alertTimeoutMs: opt.int({
    flag: 'alert-timeout-ms', env: 'METRICS_ALERT_TIMEOUT_MS', default: 5_000, min: 100, max: 60_000,
    doc: 'Bound on one webhook delivery of an alert, connection included.',
  }),
};

export type MetricsConfig = ConfigOf<typeof metricsOptions>;

/** Reads flags and environment once; throws a ConfigError listing every problem. */
export function loadMetricsConfig(argv: string[], env: Record<string, string | undefined> = process.env): MetricsConfig {
  const config = loadConfig(metricsOptions, { argv, env });
  if (config.seriesPoints > config.seriesPointsMax) {
    throw new ConfigError([`--series-points (${config.seriesPoints}) is above --series-points-max (${config.seriesPointsMax})`]);
  }
  return config;
}

import type { Counter } from 'prom-client';
import { createSelfMetrics, type SelfMetrics } from '../core/ops/self-metrics.js';

/** The metrics service's own Prometheus metrics, next to the per-route request metrics every service has. */
export interface MetricsSelfMetrics extends SelfMetrics {
  /** Reports accepted by ingest: `stored`, or `duplicate` (same host and ts, nothing changed). */
  readonly ingestedReports: Counter<'result'>;
  /** Samples (metric values) stored by ingest. */
  readonly ingestedSamples: Counter;
}

export function createMetricsSelfMetrics(): MetricsSelfMetrics {
  const base = createSelfMetrics('metrics');
  return {
    ...base,
    ingestedReports: base.counter('metrics_ingested_reports_total', 'Reports accepted by ingest, by result: stored or duplicate.', ['result']),
    ingestedSamples: base.counter('metrics_ingested_samples_total', 'Samples (metric values) stored by ingest.'),
  };
}

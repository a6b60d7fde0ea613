import type { Counter, Gauge } from 'prom-client';
import { createSelfMetrics, type SelfMetrics } from '../core/ops/self-metrics.js';

/** The sync service's own Prometheus metrics, next to the per-route request metrics every service has. */
export interface SyncSelfMetrics extends SelfMetrics {
  /** Push requests answered 200. */
  readonly pushes: Counter;
  /** Pushed items by outcome: accepted (applied), rejected (invalid), conflict (stored as pending). */
  readonly pushedItems: Counter<'outcome'>;
  /** Changes returned by pulls. */
  readonly pulledChanges: Counter;
  /** WebSocket feed connections open on this instance. */
  readonly feedConnections: Gauge;
}

export function createSyncSelfMetrics(): SyncSelfMetrics {
  const base = createSelfMetrics('sync');
  return {
    ...base,
    pushes: base.counter('sync_pushes_total', 'Push requests applied (answered 200).'),
    pushedItems: base.counter('sync_pushed_items_total', 'Pushed changes and tombstones by outcome: accepted, rejected, conflict.', ['outcome']),
    pulledChanges: base.counter('sync_pulled_changes_total', 'Changes returned by pulls.'),
    feedConnections: base.gauge('sync_feed_connections', 'WebSocket change-feed connections open on this instance.'),
  };
}

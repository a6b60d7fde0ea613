import type { AlertStore } from '../alerts/alert-store.js';
import type { MetricsStore } from './metrics-store.js';

export interface RetentionSettings {
  retentionMs: number;
  intervalMs: number;
  now: () => number;
  /** Called after each sweep with what it removed, or with the error that stopped it. */
  onSweep: (result: SweepResult | { error: unknown }) => void;
}

/** What one sweep removed. */
export interface SweepResult {
  reports: number;
  hosts: number;
  /** Alert incidents that ended before the cutoff. */
  incidents: number;
}

/** The stores a sweep deletes from. */
export interface RetentionStores {
  store: Pick<MetricsStore, 'deleteBefore'>;
  alerts: Pick<AlertStore, 'deleteEndedBefore'>;
}

/**
 * Deletes reports older than the retention, hosts with no report left inside
 * it, and alert incidents that ended before it: resolved, or still open but
 * last carried by a report older than the retention (their host has reported
 * nothing since, so it is swept too). Nothing is notified for them: whoever
 * was paged heard of the incident when it opened.
 */
export async function sweepExpired(stores: RetentionStores, retentionMs: number, now: number): Promise<SweepResult> {
  const cutoff = now - retentionMs;
  const removed = await stores.store.deleteBefore(cutoff);
  return { ...removed, incidents: await stores.alerts.deleteEndedBefore(cutoff) };
}

/**
 * Runs `sweepExpired` at start and then every `intervalMs`, one sweep at a
 * time. Several instances may sweep the same database: the deletes are
 * idempotent. Returns a stop function that waits for a running sweep.
 */
export function startRetentionSweep(stores: RetentionStores, s: RetentionSettings): () => Promise<void> {
  let running: Promise<void> | undefined;
  const sweep = () => {
    running ??= sweepExpired(stores, s.retentionMs, s.now())
      .then((result) => s.onSweep(result), (error: unknown) => s.onSweep({ error }))
      .finally(() => { running = undefined; });
  };
  sweep();
  const timer = setInterval(sweep, s.intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

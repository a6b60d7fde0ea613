import type { MetricsStore } from './metrics-store.js';

export interface RetentionSettings {
  retentionMs: number;
  intervalMs: number;
  now: () => number;
  /** Called after each sweep with what it removed, or with the error that stopped it. */
  onSweep: (result: { reports: number; hosts: number } | { error: unknown }) => void;
}

/** Deletes reports older than the retention, and hosts with no report left inside it. */
export async function sweepExpired(store: MetricsStore, retentionMs: number, now: number): Promise<{ reports: number; hosts: number }> {
  return store.deleteBefore(now - retentionMs);
}

/**
 * Runs `sweepExpired` at start and then every `intervalMs`, one sweep at a
 * time. Several instances may sweep the same database: the deletes are
 * idempotent. Returns a stop function that waits for a running sweep.
 */
export function startRetentionSweep(store: MetricsStore, s: RetentionSettings): () => Promise<void> {
  let running: Promise<void> | undefined;
  const sweep = () => {
    running ??= sweepExpired(store, s.retentionMs, s.now())
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

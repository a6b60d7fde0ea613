import { startExpiryCleanup, type ExpiryRule } from '../../core/storage/expiry-cleanup.js';
import type { Database } from '../../core/storage/database.js';

/** Dashboard sessions past their expiry (the index on expires_at serves the batches). */
export const DASHBOARD_SESSION_EXPIRY: ExpiryRule = { name: 'dashboard_sessions', table: 'dashboard_sessions', key: 'id_hash', column: 'expires_at', cutoff: (now) => now };

export interface SessionCleanupLog {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Removes expired dashboard sessions in small batches on every instance while
 * the service runs (core/storage/expiry-cleanup.ts), so the table stays bounded
 * even when nobody signs in; it is the only sweep (sign-in does none).
 * `intervalMs` is the mean time between runs. Returns the stop function.
 */
export function startSessionCleanup<DB>(database: Database<DB>, now: () => number, log: SessionCleanupLog, intervalMs: number): () => Promise<void> {
  return startExpiryCleanup({
    database,
    rules: [DASHBOARD_SESSION_EXPIRY],
    intervalMs,
    now,
    onRun: (r) => {
      if ('error' in r) log.error({ err: r.error }, 'dashboard session cleanup failed');
      else if (r['dashboard_sessions']) log.info({ removed: r['dashboard_sessions'] }, 'removed expired dashboard sessions');
    },
  });
}

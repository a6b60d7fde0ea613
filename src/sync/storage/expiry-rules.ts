import type { ExpiryRule } from '../../core/storage/expiry-cleanup.js';
import type { SyncConfig } from '../config.js';

const DAY_MS = 86_400_000;

/** How often each instance cleans, on average: tokens expire every minute, so the backlog of one run stays small. */
export const SYNC_CLEANUP_INTERVAL_MS = 10 * 60_000;

/**
 * What the sync service deletes in the background (core/storage/expiry-cleanup.ts),
 * so its tables do not grow forever: expired access tokens (user and
 * business-scoped), expired refresh tokens (used ones are kept until they
 * expire: presenting one again must still revoke its family), and conflicts
 * resolved longer ago than the retention. Pending conflicts are never deleted.
 */
export function syncExpiryRules(config: Pick<SyncConfig, 'resolvedConflictRetentionDays'>): ExpiryRule[] {
  return [
    { name: 'access_tokens', table: 'access_tokens', key: 'token_hash', column: 'expires_at', cutoff: (now) => now },
    { name: 'refresh_tokens', table: 'refresh_tokens', key: 'token_hash', column: 'expires_at', cutoff: (now) => now },
    { name: 'resolved_conflicts', table: 'sync_conflicts', key: 'id', column: 'resolved_at', cutoff: (now) => now - config.resolvedConflictRetentionDays * DAY_MS },
  ];
}

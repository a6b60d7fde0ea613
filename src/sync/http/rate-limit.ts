import { AppError } from '../../core/errors.js';
import type { SyncDeps } from '../deps.js';

const MINUTE_MS = 60_000;

async function enforce(deps: SyncDeps, key: string, limit: number, what: string): Promise<void> {
  const r = await deps.rateLimiter.hit(key, limit, MINUTE_MS);
  if (!r.allowed) {
    throw new AppError('rate_limited', `${what} limit of ${limit} requests per minute exceeded`, { retry_after: Math.max(1, Math.ceil(r.retryAfterMs / 1000)) });
  }
}

/** Counts one request of an authenticated user (all their tokens share the budget); 429 past the limit. */
export function limitUser(deps: SyncDeps, userId: string): Promise<void> {
  return enforce(deps, `sync:user:${userId}`, deps.config.userRateLimit, 'per-user');
}

/** Counts one unauthenticated request from `ip` (register, login, refresh, a missing or bad token); 429 past the limit. */
export function limitIp(deps: SyncDeps, ip: string): Promise<void> {
  return enforce(deps, `sync:ip:${ip}`, deps.config.ipRateLimit, 'per-IP');
}

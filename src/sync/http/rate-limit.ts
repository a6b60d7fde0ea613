import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';
import { isRateLimitExempt } from '../../core/http/rate-limit-exempt.js';
import type { SyncDeps } from '../deps.js';

const MINUTE_MS = 60_000;

/** What the limits read from a request: who is calling from where, and whether its route is exempt. */
export type LimitedRequest = Pick<FastifyRequest, 'ip' | 'routeOptions'>;

async function enforce(deps: SyncDeps, req: LimitedRequest, key: string, limit: number, what: string): Promise<void> {
  // Routes declared with `config: { rateLimit: false }` (probes, /metrics) are neither counted nor refused.
  if (isRateLimitExempt(req)) return;
  const r = await deps.rateLimiter.hit(key, limit, MINUTE_MS);
  if (!r.allowed) {
    throw new AppError('rate_limited', `${what} limit of ${limit} requests per minute exceeded`, { retry_after: Math.max(1, Math.ceil(r.retryAfterMs / 1000)) });
  }
}

/** Counts one request of an authenticated user (all their tokens share the budget); 429 past the limit. */
export function limitUser(deps: SyncDeps, req: LimitedRequest, userId: string): Promise<void> {
  return enforce(deps, req, `sync:user:${userId}`, deps.config.userRateLimit, 'per-user');
}

/** Counts one unauthenticated request from the client's IP (register, login, refresh, a missing or bad token); 429 past the limit. */
export function limitIp(deps: SyncDeps, req: LimitedRequest): Promise<void> {
  return enforce(deps, req, `sync:ip:${req.ip}`, deps.config.ipRateLimit, 'per-IP');
}

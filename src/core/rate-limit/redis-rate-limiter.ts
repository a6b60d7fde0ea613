import { randomUUID } from 'node:crypto';
import type { Redis, Result } from 'ioredis';
import { AppError } from '../errors.js';
import type { RateLimiter, RateLimitResult } from './rate-limiter.js';

/**
 * One atomic step per hit: increment, start the window's expiry on the first
 * hit, and read the time left. A key that somehow lost its expiry (PTTL -1) is
 * given one, so a counter can never block a key forever.
 */
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if count == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

/**
 * A sliding log: the hits of the last window as a sorted set scored by Redis's own time (as the fixed windows follow
 * Redis's TTLs), the expired ones dropped and only the newest `keep` kept, in one atomic step. Redis 5+ replicates
 * a script's effects, so reading TIME before writing is allowed.
 */
const SLIDING_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZADD', KEYS[1], now, ARGV[3])
local count = redis.call('ZCARD', KEYS[1])
if count > keep then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, count - keep - 1)
  count = keep
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {count, tonumber(oldest[2]) + window - now}
`;

type HitReply = [number, number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    rateLimitHit(key: string, windowMs: number): Result<HitReply, Context>;
    rateLimitSliding(key: string, windowMs: number, keep: number, member: string): Result<HitReply, Context>;
  }
}

/**
 * Rate limiter shared by every instance through Redis: fixed windows that
 * start at a key's first hit and end with its TTL (the same semantics as the
 * memory limiter). Keys are namespaced by `keyPrefix` so services, and tests,
 * sharing one Redis never see each other's counters. The connection belongs to
 * the caller; `close` does not quit it.
 */
export function createRedisRateLimiter(redis: Redis, keyPrefix: string): RateLimiter {
  if (!redis.rateLimitHit) redis.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  if (!redis.rateLimitSliding) redis.defineCommand('rateLimitSliding', { numberOfKeys: 1, lua: SLIDING_SCRIPT });
  const k = (key: string) => `${keyPrefix}rl:${key}`;

  return {
    async hit(key, limit, windowMs): Promise<RateLimitResult> {
      const [count, ttl] = await unavailableOnError(() => redis.rateLimitHit(k(key), windowMs));
      return { allowed: count <= limit, count, retryAfterMs: Math.max(0, ttl) };
    },
    async hitSliding(key, limit, windowMs): Promise<RateLimitResult> {
      const [count, left] = await unavailableOnError(() => redis.rateLimitSliding(k(key), windowMs, limit + 1, randomUUID()));
      return { allowed: count <= limit, count, retryAfterMs: Math.max(0, left) };
    },
    async inspect(key) {
      const replies = await unavailableOnError(async () => {
        const r = await redis.multi().get(k(key)).pttl(k(key)).exec();
        if (!r || r.some(([err]) => err)) throw new Error('inspect failed');
        return r;
      });
      const count = replies[0]?.[1] === null ? 0 : Number(replies[0]?.[1]);
      const ttl = Number(replies[1]?.[1]);
      return count > 0 && ttl > 0 ? { count, retryAfterMs: ttl } : { count: 0, retryAfterMs: 0 };
    },
    async reset(key) {
      await unavailableOnError(() => redis.del(k(key)));
    },
    async close() {},
  };
}

/** `Retry-After` of the 503 while Redis is unreachable: long enough for a restart or fail-over, not to hammer it meanwhile. */
export const REDIS_OUTAGE_RETRY_AFTER_S = 5;

/** A Redis outage must not become a 500 nor let requests through unchecked: it is a 503. */
async function unavailableOnError<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch {
    throw new AppError('unavailable', 'rate limiting is temporarily unavailable; retry', { retry_after: REDIS_OUTAGE_RETRY_AFTER_S });
  }
}

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

type HitReply = [number, number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    rateLimitHit(key: string, windowMs: number): Result<HitReply, Context>;
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
  const k = (key: string) => `${keyPrefix}rl:${key}`;

  return {
    async hit(key, limit, windowMs): Promise<RateLimitResult> {
      const [count, ttl] = await unavailableOnError(() => redis.rateLimitHit(k(key), windowMs));
      return { allowed: count <= limit, count, retryAfterMs: Math.max(0, ttl) };
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

/** A Redis outage must not become a 500 nor let requests through unchecked: it is a 503. */
async function unavailableOnError<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch {
    throw new AppError('unavailable', 'rate limiting is temporarily unavailable');
  }
}

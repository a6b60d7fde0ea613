import type { Redis } from 'ioredis';
import { createMemoryRateLimiter } from './memory-rate-limiter.js';
import { createRedisRateLimiter } from './redis-rate-limiter.js';
import type { RateLimiter } from './rate-limiter.js';

/**
 * The limiter a service instance uses: shared through Redis when the service
 * has a Redis connection (several instances must count together), in memory
 * otherwise (one process, embedded behaviour).
 */
export function createRateLimiter(redis: Redis | undefined, keyPrefix: string): RateLimiter {
  return redis ? createRedisRateLimiter(redis, keyPrefix) : createMemoryRateLimiter();
}

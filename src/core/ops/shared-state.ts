import type { Redis } from 'ioredis';
import { connectRedis } from '../redis/connect-redis.js';
import { createRateLimiter } from '../rate-limit/create-rate-limiter.js';
import { createPubSub } from '../pubsub/create-pubsub.js';
import type { RateLimiter } from '../rate-limit/rate-limiter.js';
import type { PubSub } from '../pubsub/pubsub.js';

/**
 * The state a service instance shares with its siblings: rate-limit counters
 * (and lockouts built on them) and cross-instance notifications. With a Redis
 * URL both live in Redis; without one, in this process's memory.
 */
export interface SharedState {
  rateLimiter: RateLimiter;
  pubsub: PubSub;
  /** The Redis connection, when configured (for readiness checks). */
  redis: Redis | undefined;
  close(): Promise<void>;
}

export interface SharedStateOptions {
  redisUrl: string | undefined;
  /** Namespace of this service's keys and channels in a Redis shared with others, e.g. `sync:`. */
  prefix: string;
  /** Shown by Redis `CLIENT LIST`, to tell connections apart. */
  connectionName: string;
}

export async function openSharedState(opts: SharedStateOptions): Promise<SharedState> {
  const redis = opts.redisUrl ? await connectRedis(opts.redisUrl, opts.connectionName) : undefined;
  try {
    const rateLimiter = createRateLimiter(redis, opts.prefix);
    const pubsub = await createPubSub(redis, `${opts.prefix}ch:`);
    return {
      rateLimiter,
      pubsub,
      redis,
      async close() {
        await pubsub.close();
        await rateLimiter.close();
        if (redis) await redis.quit().catch(() => redis.disconnect());
      },
    };
  } catch (e: unknown) {
    redis?.disconnect();
    throw e;
  }
}

import type { Redis } from 'ioredis';
import { createMemoryPubSub } from './memory-pubsub.js';
import { createRedisPubSub } from './redis-pubsub.js';
import type { PubSub } from './pubsub.js';

/**
 * The pub/sub a service instance uses: Redis when the service has a Redis
 * connection (a change handled by one instance must reach feed subscribers
 * connected to another), in-process otherwise.
 */
export async function createPubSub(redis: Redis | undefined, channelPrefix: string): Promise<PubSub> {
  return redis ? createRedisPubSub(redis, channelPrefix) : createMemoryPubSub();
}

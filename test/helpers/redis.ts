import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL, required } from './backends.js';
import { skipUnless } from './missing-tool.js';
import { outageProxy, type Outage } from './outage-proxy.js';

/**
 * Redis for tests: reachable at TEST_REDIS_URL or skipped, except under
 * REQUIRE_REDIS=1 (as in .ci/run) or on CI (CI=true), where its absence fails the run loudly.
 * Every test takes its own key prefix, so tests sharing one Redis never see
 * each other's counters or channels.
 */
export { TEST_REDIS_URL };

async function redisReachable(): Promise<boolean> {
  const probe = new Redis(TEST_REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
    return true;
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

export const REDIS_UP = await redisReachable();
if (!REDIS_UP && required('REDIS')) {
  throw new Error(`Redis is required (REQUIRE_REDIS=1 or CI) but not reachable at ${TEST_REDIS_URL}`);
}
if (!REDIS_UP) {
  console.warn(`# Redis not reachable at ${TEST_REDIS_URL}: Redis tests are skipped`);
  skipUnless([{ tool: 'Redis', skipped: 'the Redis rate limiter, pub/sub and health tests', install: `apt-get install redis-server (or TEST_REDIS_URL); now ${TEST_REDIS_URL}` }]);
}

/** A key/channel prefix no other test uses, e.g. `t_1a2b3c4d:`. */
export function testPrefix(): string {
  return `t_${randomBytes(4).toString('hex')}:`;
}

/** Deletes every key under `prefix` (SCAN, never KEYS, so a shared Redis is not blocked). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

/**
 * A TCP proxy in front of the test Redis that a test can take down and bring back: a Redis outage as its clients
 * see it, without stopping the Redis every other test shares.
 */
export function redisOutageProxy(): Promise<Outage> {
  return outageProxy(TEST_REDIS_URL, 6379);
}

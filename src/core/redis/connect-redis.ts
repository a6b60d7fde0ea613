import type { Redis } from 'ioredis';
import { redactConnectionUrl } from '../connection-url.js';

/** How long a start waits for Redis before failing, and a command for a reply before erroring. */
const CONNECT_TIMEOUT_MS = 5_000;
const COMMAND_TIMEOUT_MS = 2_000;

/**
 * Opens a Redis connection for one service instance and waits until it is
 * ready, so a wrong `REDIS_URL` stops the start with a clear message instead
 * of surfacing as failed requests later.
 *
 * Commands fail fast while Redis is down (no unbounded offline queue, a few
 * retries, a per-command timeout): a rate-limit check then answers 503 rather
 * than holding the request open. The client keeps reconnecting in the
 * background, with a capped back-off.
 */
export async function connectRedis(url: string, connectionName: string): Promise<Redis> {
  // Loaded only by an instance given a REDIS_URL: the client's modules are a tenth of a service's start.
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    connectionName,
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2_000),
  });
  // Without a listener ioredis prints every reconnect error; readiness reports the outage instead.
  redis.on('error', () => undefined);
  try {
    await redis.connect();
  } catch (e: unknown) {
    redis.disconnect();
    throw new Error(`Redis is not reachable at ${redactConnectionUrl(url)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return redis;
}

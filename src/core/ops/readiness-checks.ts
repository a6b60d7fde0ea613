import { sql, type Kysely } from 'kysely';
import type { Redis } from 'ioredis';
import type { ReadinessCheck } from './health.js';

/** The database answers a trivial query (a pool connection can be taken and used). */
export function databaseCheck<DB>(db: Kysely<DB>): ReadinessCheck {
  return () => sql`select 1`.execute(db);
}

/** Redis answers PING on the shared connection. */
export function redisCheck(redis: Redis): ReadinessCheck {
  return async () => {
    if (redis.status !== 'ready') throw new Error(`redis connection is ${redis.status}`);
    await redis.ping();
  };
}
